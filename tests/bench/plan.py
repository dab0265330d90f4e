#!/usr/bin/env python3
"""Plan benchmark: `make plan` for every framework preset in one process, heavy imports done once;
then one `make plan` of a verl preset with CODE and a 40-row DATA, cold and warm (issue 44 item 4).

Each preset is loaded, rendered and checked exactly as `make plan` does (backend render + check,
which runs rlaunch's topology rules and the framework's own loader). The loader requests of all
presets are sent first, one loader process per framework, the three in parallel; the per-preset
checks then hit that cache. The loaders' disk cache is a fresh directory: S is a cold figure.
Writes {"presets": N, "seconds": S, ...} (target: S < 15 once the validator environments exist;
without them the loaders are "skipped" and the plan says so), and "code_data": the CODE + DATA plan
as its own process (`python -m rlaunch plan`, as make runs it) twice on fresh caches: "cold_seconds",
"warm_seconds" (target < 10). "loadavg": the machine's 1/5/15-minute load when the bench ended (the
machine is shared: figures under load are longer).

Usage: tests/bench/plan.py     (after `make setup`, ideally `make setup-validators`)
Env:
  RLAUNCH_BENCH_PRESETS  space-separated presets (default: every verl/areal/rlinf preset)
  RLAUNCH_BENCH_SMOKE    1: one preset only (the list's first verl one), to check the benchmark still runs
  RLAUNCH_BENCH_OUT      result file (default build/bench/plan.json)
  RLAUNCH_VALIDATORS     where the .venv-<framework> validator environments are (default: the repo)
Exit: 0 every plan passed; 1 a plan failed (named on stderr), or in smoke mode the JSON lacks a key or type.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import NUM, check  # noqa: E402 - tests/bench/, just put on the path

FRAMEWORK_PRESETS = ("verl-", "areal-", "rlinf-")
SCHEMA = {"presets": int, "seconds": NUM, "loader_seconds": NUM, "validators": dict, "failed": list,
          "checks": dict, "target_s": NUM, "met": bool, "loadavg": list,
          "code_data": {"cold_seconds": NUM, "warm_seconds": NUM, "target_s": NUM, "met": bool}}
TARGET_S, CODE_DATA_TARGET_S = 15, 10  # issue 44 item 4, on an idle machine
# The second figure: a verl launch's plan with the user's code (its reward) and 40 rows of their data.
CODE_DATA = ["--PRESET=verl-ppo-gsm8k-0.5b", "--CODE=tests/fixtures/code/rehearsal",
             "--DATA=tests/fixtures/data/gsm8k-parquet",
             "--SET=train.batch_size=32 train.mini_batch_size=16 framework.overrides="
             '["reward.custom_reward_function.path=rehearsal_reward/verl_reward.py"]']
# The same preset in another shape counts as one more plan: AReaL's Ray scheduler form.
VARIANTS = [("areal-grpo-gsm8k", {"NODES": "2", "GPUS_PER_NODE": "8"})]


def presets() -> list[tuple[str, dict]]:
    from rlaunch.config import load as config

    names = os.environ.get("RLAUNCH_BENCH_PRESETS", "").split() or [
        p for p in config.available("presets") if p.startswith(FRAMEWORK_PRESETS)]
    if os.environ.get("RLAUNCH_BENCH_SMOKE") == "1":
        # One verl preset: its loader answers in ~1 s, leaving the smoke's time to the CODE + DATA plan
        # (AReaL's loader, ~10 s, is tests/unit/test_loaders.py's).
        names = [n for n in names if n.startswith("verl-")][:1] or names[:1]
    return [(p, {}) for p in names] + [v for v in VARIANTS if v[0] in names]


def code_data(scratch: Path, failed: list[str]) -> dict:
    """The CODE + DATA plan twice, its caches (loader answers, checked rows) fresh in scratch."""
    env = {**os.environ, "RLAUNCH_LOADER_CACHE": str(scratch / "loader-cache"),
           "RLAUNCH_DATACHECK_CACHE": str(scratch / "datacheck"), "PYTHONPATH": str(ROOT / "tools")}
    seconds = []
    for run in ("cold", "warm"):
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "rlaunch", "plan", *CODE_DATA, f"--OUT={scratch / run}"],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
        seconds.append(round(time.monotonic() - began, 2))
        if proc.returncode:
            failed.append(f"code+data plan ({run}): exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return {"cold_seconds": seconds[0], "warm_seconds": seconds[1], "target_s": CODE_DATA_TARGET_S,
            "met": seconds[1] < CODE_DATA_TARGET_S}


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="rlaunch-bench-plan-"))
    # Cold: no loader answer kept by an earlier plan counts (rlaunch.validate.loaders' disk cache).
    os.environ["RLAUNCH_LOADER_CACHE"] = str(scratch / "presets-loader-cache")
    started = time.monotonic()
    from rlaunch.registry import frameworks
    from rlaunch.cli import commands as cli
    from rlaunch.config import load as config
    from rlaunch.validate import loaders

    specs = []
    for preset, knobs in presets():
        # The render directory through the OUT knob, as `make plan OUT=...` sets it: the spec is frozen.
        out = ROOT / "build" / "bench" / "plan" / (preset + "".join(f"-{v}" for v in knobs.values()))
        specs.append(config.load(preset, {**knobs, "OUT": str(out)}))
    requests: dict[str, list[dict]] = {}
    for spec in specs:
        fw = frameworks.get(spec.framework.name)
        if hasattr(fw, "loader_request"):
            requests.setdefault(fw.name, []).append(fw.loader_request(spec))
    loaded = time.monotonic()
    loaders.prefetch_all(requests)
    loader_s = time.monotonic() - loaded
    failed, lines = [], {}
    for spec in specs:
        try:
            backend, files = cli._render(spec)
            lines[spec.preset + ("" if spec.cluster.nodes < 2 or "areal" not in spec.preset
                                 else "@2nodes")] = backend.check(spec, files)
        except Exception as err:  # noqa: BLE001 - reported per preset
            failed.append(f"{spec.preset}: {err}")
    seconds = round(time.monotonic() - started, 2)
    second = code_data(scratch, failed)
    shutil.rmtree(scratch, ignore_errors=True)
    result = {"presets": len(specs), "seconds": seconds, "loader_seconds": round(loader_s, 2),
              "validators": {fw: loaders.available(fw) for fw in ("verl", "areal", "rlinf")},
              "failed": failed, "checks": lines, "target_s": TARGET_S, "met": seconds < TARGET_S,
              "loadavg": [round(x, 2) for x in os.getloadavg()], "code_data": second}
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or ROOT / "build" / "bench" / "plan.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"plan bench: {len(specs)} presets in {seconds} s cold (loaders {loader_s:.1f} s; target < {TARGET_S} s)"
          f"; CODE + 40-row DATA plan {second['cold_seconds']} s cold, {second['warm_seconds']} s warm "
          f"(target < {CODE_DATA_TARGET_S} s); load average {result['loadavg'][0]} -> {out}")
    for line in failed:
        print(f"plan bench: FAILED {line}", file=sys.stderr)
    if os.environ.get("RLAUNCH_BENCH_SMOKE") == "1" and check(out, SCHEMA, "plan bench"):
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

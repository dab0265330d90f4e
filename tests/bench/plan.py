#!/usr/bin/env python3
"""Plan benchmark: `make plan` for every framework preset in one process, heavy imports done once.

Each preset is loaded, rendered and checked exactly as `make plan` does (backend render + check,
which runs rlaunch's topology rules and the framework's own loader). The loader requests of all
presets are sent first, one loader process per framework, the three in parallel; the per-preset
checks then hit that cache. Writes {"presets": N, "seconds": S, ...} (target: S < 15 once the
validator environments exist; without them the loaders are "skipped" and the plan says so).

Usage: tests/bench/plan.py     (after `make setup`, ideally `make setup-validators`)
Env:
  RLAUNCH_BENCH_PRESETS  space-separated presets (default: every verl/areal/rlinf preset)
  RLAUNCH_BENCH_SMOKE    1: one preset only (the first of the list), to check the benchmark still runs
  RLAUNCH_BENCH_OUT      result file (default build/bench/plan.json)
  RLAUNCH_VALIDATORS     where the .venv-<framework> validator environments are (default: the repo)
Exit: 0 every plan passed; 1 a plan failed (named on stderr), or in smoke mode the JSON lacks a key or type.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import NUM, check  # noqa: E402 - tests/bench/, just put on the path

FRAMEWORK_PRESETS = ("verl-", "areal-", "rlinf-")
SCHEMA = {"presets": int, "seconds": NUM, "loader_seconds": NUM, "validators": dict, "failed": list,
          "checks": dict}
# The same preset in another shape counts as one more plan: AReaL's Ray scheduler form.
VARIANTS = [("areal-grpo-gsm8k", {"NODES": "2", "GPUS_PER_NODE": "8"})]


def presets() -> list[tuple[str, dict]]:
    from rlaunch.config import load as config

    names = os.environ.get("RLAUNCH_BENCH_PRESETS", "").split() or [
        p for p in config.available("presets") if p.startswith(FRAMEWORK_PRESETS)]
    if os.environ.get("RLAUNCH_BENCH_SMOKE") == "1":
        names = names[:1]
    return [(p, {}) for p in names] + [v for v in VARIANTS if v[0] in names]


def main() -> int:
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
    result = {"presets": len(specs), "seconds": seconds, "loader_seconds": round(loader_s, 2),
              "validators": {fw: loaders.available(fw) for fw in ("verl", "areal", "rlinf")},
              "failed": failed, "checks": lines}
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or ROOT / "build" / "bench" / "plan.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"plan bench: {len(specs)} presets in {seconds} s (loaders {loader_s:.1f} s) -> {out}")
    for line in failed:
        print(f"plan bench: FAILED {line}", file=sys.stderr)
    if os.environ.get("RLAUNCH_BENCH_SMOKE") == "1" and check(out, SCHEMA, "plan bench"):
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

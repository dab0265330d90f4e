#!/usr/bin/env python3
"""Inputs benchmark (issue 46): the seconds and bytes the GPU nodes spend on the model, today's
design against the new one, for a first launch, a second launch and a recovery.

  today  the GPU task's setup prepares the inputs (rank 0, every GPU node up and billed): the line
         setup.sh had before issue 46, `sha256sum --check` of every weight file, else a download.
  new    a CPU step prepares them first (rlaunch.config.inputs.setup_lines: the stamp, else the full
         check, else a download, then SHA256SUMS.stamp); a second launch skips that step after the
         launcher's own metadata check; the GPU side runs check_lines (the stamp against a listing).

The model is a generated one of RLAUNCH_BENCH_INPUTS_MB (random bytes, which hash like real weights)
on tests/fakehub.py, downloaded by rlaunch's real code into the storage directory of one spec
(emptied between the designs). The lines run on this host, not on namespace nodes: the benchmark measures the
input lines alone, and the namespaces' cost (a cluster per case) would be the same for both designs.
gpu_bytes: bytes read from the model's files by the GPU-side step (strace -y of its read calls;
without strace, null): not Python's own imports, nor SHA256SUMS and its stamp (a few KB). The seconds are taken
under that strace, the same tracer for both designs.

Goal: a prepared run (second, recovery) of the new design takes at most 2 s and reads 0 model
bytes on the GPU side.

Usage: tests/bench/inputs.py     (after `make setup`)
Env:
  RLAUNCH_BENCH_INPUTS_MB  model size in MiB, >= 1 (default 1024; smoke 1)
  RLAUNCH_BENCH_SMOKE      1: the smallest model, then the JSON's keys and types checked
  RLAUNCH_BENCH_OUT        result file (default build/bench/inputs.json)
  RLAUNCH_BENCH_STRICT     1: exit 1 when the goal is missed (default 0)
Exit: 0 done, 1 the goal missed (strict) or the JSON lacks a key or type (smoke), 2 bad input,
  3 a step failed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import die, env_int, loadavg, log  # noqa: E402 - tests/bench/, just put on the path
from schema import NUM, OPT, check  # noqa: E402

PROG = "inputs bench"
COMMIT = "46b0e7c46b0e7c46b0e7c46b0e7c46b0e7c46b0e"
SHARDS = 4
GOAL_S = 2.0
DESIGN = {"gpu_s": NUM, "gpu_bytes": OPT}
SCHEMA = {"model_bytes": int, "bytes_by": str, "met": bool, "loadavg": list,
          "cases": {case: {"today": DESIGN, "new": {**DESIGN, "cpu_s": NUM}}
                    for case in ("first", "second", "recovery")}}
NOT_WEIGHTS = ("SHA256SUMS", "SHA256SUMS.stamp")
READ = re.compile(r"\b(?:read|pread64|readv|preadv2?)\(\d+<([^>]*)>.*\)\s+=\s+(\d+)$")


def make_model(hub_root: Path, mib: int) -> int:
    """The generated model on the fake hub: config files and SHARDS safetensors of random bytes."""
    top = hub_root / "models" / "acme" / "bench-lm" / COMMIT
    top.mkdir(parents=True)
    (top / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    (top / "tokenizer_config.json").write_text("{}")
    shard, chunk = mib * 2**20 // SHARDS, 2**24
    for i in range(SHARDS):
        with (top / f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors").open("wb") as f:
            left = shard
            while left:
                f.write(os.urandom(min(chunk, left)))
                left -= min(chunk, left)
    return sum(p.stat().st_size for p in top.iterdir())


def today_line(mdir: str, fetch: str) -> str:
    """setup.sh's line before issue 46 (the GPU task's setup): sha256sum over every file, else a download."""
    q = shlex.quote(mdir)
    return (f"if ! (cd {q} 2>/dev/null && sha256sum --check --quiet --strict SHA256SUMS); then "
            f'"${{RLAUNCH_PYTHON:-python3}}" -m rlaunch.job.data {fetch} --out={q}; '
            f"else echo 'inputs: model {mdir} matches its SHA256SUMS: kept'; fi")


class Runner:
    def __init__(self, work: Path, hub_url: str, mdir: str):
        self.work, self.mdir = work, mdir
        self.strace = shutil.which("strace")
        self.env = {**os.environ, "RLAUNCH_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "tools"),
                    "HF_ENDPOINT": hub_url, "HF_HOME": str(work / "hf"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        self.env.pop("HF_HUB_OFFLINE", None)
        self.n = 0

    def step(self, line: str) -> tuple[float, int | None]:
        """Seconds and model-directory bytes read by `bash -c line` (strace -f -y of its reads)."""
        self.n += 1
        trace = self.work / f"trace-{self.n}"
        argv = ["bash", "-c", line]
        if self.strace:
            argv = [self.strace, "-f", "-qq", "-y", "-e", "trace=read,pread64,readv,preadv,preadv2",
                    "-e", "signal=none", "-o", str(trace), *argv]
        started = time.monotonic()
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=1800, check=False)
        seconds = round(time.monotonic() - started, 3)
        if proc.returncode:
            die(PROG, f"step failed ({proc.returncode}): {line[:160]}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}", 3)
        if not self.strace:
            return seconds, None
        total = 0
        for text in trace.read_text(errors="replace").splitlines():
            m = READ.search(text)
            # The model's files; SHA256SUMS and its stamp (a few KB) are what a check by metadata reads.
            if m and m.group(1).startswith(self.mdir + "/") and Path(m.group(1)).name not in NOT_WEIGHTS:
                total += int(m.group(2))
        trace.unlink()
        return seconds, total


def measure(work: Path, hub_url: str) -> dict:
    from rlaunch.config import inputs
    from rlaunch.config import load as config

    storage = work / "storage"
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "bench-inputs"},
                       f"model.path=acme/bench-lm@{COMMIT} storage.mount={storage}")
    model = next(item for item in inputs.of(spec) if item.what == "model")
    run = Runner(work, hub_url, model.dir)
    cases: dict[str, dict] = {"first": {}, "second": {}, "recovery": {}}
    line = today_line(model.dir, " ".join(model.fetch))
    for case in cases:  # today: the GPU task's setup on every launch and every recovery
        s, b = run.step(line)
        cases[case]["today"] = {"gpu_s": s, "gpu_bytes": b}
    shutil.rmtree(storage)  # the new design's first launch starts from empty storage too
    prepare = next(ln for ln in inputs.setup_lines(spec) if model.dir in ln)
    check_line = next(ln for ln in inputs.check_lines(spec) if model.dir in ln)
    launcher = f'"${{RLAUNCH_PYTHON:-python3}}" -m rlaunch.job.data --check-stamp={shlex.quote(model.dir)} --what=model'
    cpu_s, _ = run.step(prepare)  # first launch: the CPU step downloads and stamps
    s, b = run.step(check_line)
    cases["first"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": cpu_s}
    cpu_s, _ = run.step(launcher)  # second launch: the launcher's metadata check skips the CPU step
    s, b = run.step(check_line)
    cases["second"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": cpu_s}
    s, b = run.step(check_line)  # recovery: the GPU task's setup again, no CPU step
    cases["recovery"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": 0.0}
    return cases


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    if not b:
        return "inf" if a else "1x"
    return f"{a / b:.0f}x" if a / b >= 10 else f"{a / b:.1f}x"


def main() -> int:
    smoke = os.environ.get("RLAUNCH_BENCH_SMOKE") == "1"
    mib = env_int(PROG, "RLAUNCH_BENCH_INPUTS_MB", 1 if smoke else 1024, 1)
    from fakehub import FakeHub

    (ROOT / "build" / "bench").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="inputs-", dir=ROOT / "build" / "bench") as tmp:
        work = Path(tmp)
        size = make_model(work / "hub", mib)
        log(PROG, f"model of {size / 1e9:.2f} GB on the fake hub; strace: {shutil.which('strace') or 'none'}")
        with FakeHub(work / "hub") as hub:
            cases = measure(work, hub.url)
    prepared = [cases[c]["new"] for c in ("second", "recovery")]
    met = all(d["gpu_s"] <= GOAL_S and d["gpu_bytes"] in (0, None) for d in prepared)
    result = {"model_bytes": size, "bytes_by": "strace" if shutil.which("strace") else "none", "met": met,
              "goal": f"new design, prepared run: gpu_s <= {GOAL_S}, gpu_bytes == 0",
              "loadavg": loadavg(), "cases": cases}
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or ROOT / "build" / "bench" / "inputs.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for case, d in cases.items():
        today, new = d["today"], d["new"]
        print(f"inputs bench: {case:<8} GPU side today {today['gpu_s']:.2f} s / {today['gpu_bytes']} B, "
              f"new {new['gpu_s']:.2f} s / {new['gpu_bytes']} B (CPU step {new['cpu_s']:.2f} s): "
              f"{ratio(today['gpu_s'], new['gpu_s'])} the seconds, "
              f"{ratio(today['gpu_bytes'], new['gpu_bytes'])} the bytes")
    print(f"inputs bench: goal {'met' if met else 'MISSED'} ({result['goal']}) -> {out}")
    if smoke and check(out, SCHEMA, PROG):
        return 1
    return 1 if not met and os.environ.get("RLAUNCH_BENCH_STRICT") == "1" else 0


if __name__ == "__main__":
    sys.exit(main())

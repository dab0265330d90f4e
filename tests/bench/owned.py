"""What a benchmark run created outside its process, recorded (tests/owner.py) so the next run of
this checkout takes down what an earlier one left when it was killed past its own cleanup: the
local clusters (scripts/local-cluster, by name) and the local launches (by run id), each a record
under build/bench/owned/, removed once it is down. Only those records' names are ever touched,
all under the benchmarks' prefix `bench-`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
import owner  # noqa: E402 - tests/, just put on the path

STATE = REPO / "build" / "bench" / "owned"
PREFIX = "bench-"


def _record(kind: str, name: str) -> Path:
    return STATE / f"{kind}-{name}.json"


def claim(kind: str, name: str) -> None:
    """Before creating it: `kind` is "cluster" (a local-cluster name) or "run" (a local run id)."""
    assert name.startswith(PREFIX), name
    owner.write(_record(kind, name), {"kind": kind, "name": name})


def release(kind: str, name: str) -> None:
    _record(kind, name).unlink(missing_ok=True)


def take_down(kind: str, name: str, env: dict | None = None) -> bool:
    if kind == "cluster":
        argv = [str(REPO / "scripts" / "local-cluster"), "down"]
        env = {**os.environ, **(env or {}), "RLAUNCH_CLUSTER_NAME": name, "RLAUNCH_STOP_GRACE_S": "5"}
    else:
        argv, env = [str(REPO / "scripts" / "rlaunch"), "down", "INFRA=local", f"RUN_ID={name}"], None
    return subprocess.run(argv, env=env, capture_output=True, timeout=300, check=False).returncode == 0


def sweep(prog: str) -> list[str]:
    """Take down what earlier runs recorded and did not release (their process is gone)."""
    swept = []
    for path, state in owner.stale(STATE):
        kind, name = state.get("kind"), state.get("name", "")
        if kind in ("cluster", "run") and name.startswith(PREFIX) and take_down(kind, name):
            path.unlink(missing_ok=True)
            swept.append(f"{kind} {name}")
    if swept:
        print(f"{prog}: took down what an earlier run left: {', '.join(swept)}", file=sys.stderr)
    return swept

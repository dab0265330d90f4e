"""README's first command, end to end: `make launch` runs the CPU rehearsal on a 2-node local Ray
cluster and verifies itself; `make down` leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


def make(*args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "WANDB_API_KEY": "sekret-value"})


def netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def rehearsal():
    if os.geteuid() != 0:
        pytest.skip("the 2-node rehearsal needs root for network namespaces")
    run_id = f"e2e-{os.getpid()}"
    from rlaunch.backends.local import cluster_name

    name = cluster_name({"run": {"id": run_id}})
    proc = make("launch", f"RUN_ID={run_id}", timeout=600)
    yield run_id, name, proc
    make("down", f"RUN_ID={run_id}", timeout=120)


def test_launch_exits_0_and_verification_passed(rehearsal):
    run_id, _, proc = rehearsal
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run_dir = ROOT / "build" / "storage" / "runs" / "rehearsal" / run_id
    report = json.loads((run_dir / "verification.json").read_text())
    assert report["passed"] is True, report
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["num_workers"] == 2
    assert len(set(summary["worker_nodes"])) == 2, "each Ray Train worker on its own node"
    assert summary["reward_first"] < 0.3 and summary["reward_last"] >= 0.9, summary
    score = json.loads((run_dir / "eval.json").read_text())
    assert score["greedy_correct"] >= 9, score
    assert json.loads((run_dir / "preflight.json").read_text())["passed"] is True
    assert "verification  passed" in proc.stdout


def test_no_secret_value_in_outputs(rehearsal):
    run_id, _, proc = rehearsal
    assert "sekret-value" not in proc.stdout + proc.stderr
    for path in (ROOT / "build" / run_id).rglob("*"):
        if path.is_file():
            assert b"sekret-value" not in path.read_bytes(), path


def test_down_leaves_nothing_and_is_idempotent(rehearsal):
    run_id, name, _ = rehearsal
    first = make("down", f"RUN_ID={run_id}", timeout=120)
    assert first.returncode == 0, first.stderr
    assert name not in netns()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert name not in links
    assert make("down", f"RUN_ID={run_id}", timeout=120).returncode == 0

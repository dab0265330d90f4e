"""`make launch SMOKE=1` on the rehearsal, end to end: the same config on the same 2-node cluster for
train.smoke_steps steps, a validation pass and a checkpoint save + reload at step 1, postflight, and
the numbers printed (wall time, s/step, peak memory per node, the full run's extrapolated time); its
run directory is marked SMOKE, and a real run with its id is refused before anything starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import needs
import pytest
from e2e_support import make

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.full]


@pytest.fixture(scope="module")
def smoke():
    if os.geteuid() != 0:
        needs.missing("the 2-node rehearsal needs root for network namespaces")
    run_id = f"e2e-smoke-{os.getpid()}"
    proc = make("launch", "SMOKE=1", f"RUN_ID={run_id}", timeout=600)
    yield run_id, proc
    make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)


def test_smoke_run_passes_and_prints_its_numbers(smoke):
    run_id, proc = smoke
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run_dir = ROOT / "build" / "storage" / "runs" / "rehearsal" / run_id
    report = json.loads((run_dir / "verification.json").read_text())
    passed = {c["name"] for c in report["checks"] if c["passed"]}
    assert report["passed"] and {"validation at step 1", "checkpoint reload at step 1", "step target"} <= passed
    assert "learned" not in {c["name"] for c in report["checks"]}  # 5 steps learn nothing to check
    reload = json.loads((run_dir / "reload.json").read_text())
    assert reload["step"] == 1 and reload["tensors"] > 0 and reload["differ"] == [] and reload["optimizer_states"] > 0
    assert json.loads((run_dir / "validation.json").read_text())["greedy_total"] == 10
    numbers = json.loads((run_dir / "smoke.json").read_text())
    assert numbers["steps"] == numbers["smoke_steps"] == 5
    assert numbers["s_per_step"] > 0 and len(numbers["peak_memory"]) == 2  # one entry per node
    assert all(peak["rss_mb"] > 100 for peak in numbers["peak_memory"].values())
    assert numbers["full_run"]["steps"] == 300 and numbers["full_run"]["s"] > 300 * numbers["s_per_step"]
    for needle in ("smoke: 5/5 steps in ", " s/step (steady, after step 1)", "smoke: peak memory on ",
                   "smoke: the full run (300 steps) would take about "):
        assert needle in proc.stdout, needle
    # Training itself (from the job's start of train.py to its end) stays under a minute here.
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["smoke"] is True and summary["steps"] == 5
    print(f"\nsmoke: training {summary['duration_s']} s, {numbers['s_per_step']} s/step; "
          + "; ".join(line for line in proc.stdout.splitlines() if line.startswith("smoke:")))


def test_the_smoke_run_directory_is_marked_and_no_real_run_resumes_from_it(smoke):
    run_id, _ = smoke
    run_dir = ROOT / "build" / "storage" / "runs" / "rehearsal" / run_id
    assert json.loads((run_dir / "SMOKE").read_text()) == {"smoke": True, "steps": 5}
    real = make("launch", f"RUN_ID={run_id}", timeout=120)
    assert real.returncode == 2
    assert "holds SMOKE, and a real run never resumes from a smoke run" in real.stderr
    assert "cluster" not in real.stdout  # refused before the plan, let alone a cluster

"""README's first command, end to end: `make launch` runs the CPU rehearsal on a 2-node local Ray
cluster and verifies itself; the run directory on the (local) shared storage holds the spec, the
plan, the reports and the job's log; with the launch's build/<run_id> gone, status, verify, down and
logs still work from the run id; `make down` leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_support import make

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
import launch as launch_bench  # noqa: E402 - tests/bench/, just put on the path
import schema  # noqa: E402
pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


def netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def run_dir_of(run_id: str) -> Path:
    return ROOT / "build" / "storage" / "runs" / "rehearsal" / run_id


def test_launch_exits_0_and_verification_passed(rehearsal):
    run_id, _, proc, _ = rehearsal
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
    # The driver's Ray Train settings reached its controller: no preemption watcher was started.
    assert "PreemptionWatcher" not in (run_dir / "logs" / "train.log").read_text()


def test_the_whole_rehearsal_ran_without_a_false_stall_at_the_default_timeout(rehearsal, capsys):
    """Its first step, six checkpoint saves, the final save, evaluation and exit: the stall watch saw
    them all at train.stall_timeout_s=0 and named none; its record says how near one came."""
    run_id, _, _, _ = rehearsal
    run_dir = run_dir_of(run_id)
    records = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert not [r for r in records if r["event"] == "stalled"]
    watch = next(r for r in records if r["event"] == "progress")
    assert watch["last_step"] == 300 and watch["steps_seen"] > 0 and watch["margin"] >= 2, watch
    with capsys.disabled():
        print(f"\nrehearsal at the default stall timeout: {watch['steps_seen']} steps watched, median "
              f"{watch['median_step_s']} s, first step {watch['first_step_s']} s; the gap nearest its timeout "
              f"{watch['worst_gap_s']} s after step {watch['worst_at_step']} of {watch['worst_timeout_s']} s "
              f"({watch['margin']}x)")


def test_no_secret_value_in_outputs(rehearsal):
    run_id, _, proc, _ = rehearsal
    assert "sekret-value" not in proc.stdout + proc.stderr
    for path in [*(ROOT / "build" / run_id).rglob("*"), *run_dir_of(run_id).rglob("*")]:
        if path.is_file():
            assert b"sekret-value" not in path.read_bytes(), path


def test_the_run_directory_holds_spec_plan_reports_and_the_log(rehearsal):
    run_id, _, proc, _ = rehearsal
    run_dir = run_dir_of(run_id)
    for name in ("spec.json", "preflight.json", "verification.json", "metrics.jsonl", "reward.png"):
        assert (run_dir / name).is_file(), name
    plan = run_dir / "plan"
    # run.json: the run's handle (rlaunch.backends.base.RunHandle), kept with the run
    assert sorted(p.name for p in plan.iterdir()) == ["PROVENANCE", "job.sh", "plan.txt", "run.json", "spec.json",
                                                      "trl.json"]
    assert (plan / "job.sh").read_text() == (ROOT / "build" / run_id / "job.sh").read_text()
    assert (plan / "plan.txt").read_text().startswith(f"plan for run {run_id} (preset rehearsal)")
    log = (run_dir / "logs" / "job.log").read_text()
    assert "rlaunch-job: preflight on every node" in log and "postflight: passed" in log


def test_the_launch_benchmark_runs_on_this_launch(rehearsal, tmp_path):
    """`make bench`'s launch benchmark still runs (its smoke): rlaunch's path is this launch, measured
    by the benchmark's own measure() (tests/e2e/conftest.py), so the smoke runs the bare path alone;
    rlaunch's phases account for its time to the first step (within 5%: the command's own start and
    the gaps between phases are outside them), and its JSON's keys and types are checked."""
    assert "error" not in rehearsal[3], rehearsal[3]
    out = tmp_path / "launch.json"
    proc = schema.smoke("launch", out, 900, sample=rehearsal[3])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert schema.problems(data, launch_bench.SCHEMA) == []
    first_step = sum(data["phases"][k] for k in ("plan", "formation", "job_start", "preflight", "first_step"))
    assert data["runs"] == 1 and data["bare_first_step_s"] > 0, data
    assert first_step == pytest.approx(data["rlaunch_first_step_s"], rel=0.05), data
    print(proc.stdout.strip())


def test_the_reward_came_from_code_staged_once_with_one_hash_on_both_nodes(rehearsal):
    """The launch ran with CODE=tests/fixtures/code/rehearsal (conftest): staged at <mount>/code/<hash>,
    both nodes' preflight read the same hash, and each worker imported its reward from there."""
    run_id, _, proc, _ = rehearsal
    run_dir = run_dir_of(run_id)
    spec = json.loads((run_dir / "spec.json").read_text())
    code_dir, want = spec["paths"]["code_dir"], spec["pins"]["code"]["hash"]
    assert code_dir == str(ROOT / "build" / "storage" / "code" / want), code_dir
    preflight = json.loads((run_dir / "preflight.json").read_text())
    assert [n["code"]["hash"] for n in preflight["nodes"]] == [want, want]
    assert next(c for c in preflight["checks"] if c["name"] == "code")["passed"]
    workers = json.loads((run_dir / "ray-train" / "workers.json").read_text())
    assert workers["worker_reward"] == [f"{code_dir}/rehearsal_reward/__init__.py"] * 2
    assert f"rehearsal_reward: from {code_dir}/rehearsal_reward" in (run_dir / "logs" / "job.log").read_text()
    assert f"local: code {want[:12]}" in proc.stdout


def test_the_rows_came_from_data_uploaded_once_and_read_by_both_workers(rehearsal):
    """The launch ran with DATA=tests/fixtures/data/digits-jsonl (conftest): uploaded to the storage under
    its content hash before any node started, checked by preflight on both nodes, and every worker
    trained on its 30 rows from there; the same DATA again copies nothing."""
    run_id, _, proc, _ = rehearsal
    run_dir = run_dir_of(run_id)
    source = json.loads((run_dir / "spec.json").read_text())["pins"]["source"]
    staged = ROOT / "build" / "storage" / "data" / "local" / source["sha256"][:12]
    assert source["dir"] == str(staged) and (staged / "SHA256SUMS").is_file()
    assert f"local: dataset {source['local']} -> {staged}: " in proc.stdout  # copied, or kept from a run before
    assert "data: 30 rows read (train.jsonl)" in proc.stdout  # the plan's check
    preflight = json.loads((run_dir / "preflight.json").read_text())
    seen = next(c for c in preflight["checks"] if c["name"] == "input" and str(staged) in c["detail"])
    assert seen["passed"] and "on all 2 nodes" in seen["detail"], seen
    workers = json.loads((run_dir / "ray-train" / "workers.json").read_text())
    assert workers["worker_rows"] == [f"30 rows from {staged}/train.jsonl"] * 2
    again = subprocess.run([sys.executable, "-m", "rlaunch.job.data", f"--upload={source['local']}",
                            f"--sha256={source['sha256']}", f"--out={staged}"], capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and '"copied": 0' in again.stdout, again.stdout + again.stderr


def test_without_the_launch_cache_status_and_verify_work_from_the_id(rehearsal):
    run_id, _, _, _ = rehearsal
    shutil.rmtree(ROOT / "build" / run_id)
    status = make("status", "INFRA=local", f"RUN_ID={run_id}", timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"{run_id} (netns): head" in status.stdout and f"job {run_id}: SUCCEEDED" in status.stdout
    verify = make("verify", f"RUN_DIR={run_dir_of(run_id)}", timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_down_from_the_id_leaves_nothing_and_is_idempotent(rehearsal):
    run_id, name, _, _ = rehearsal
    pids = [p for ns in (f"rl-{name}-0", f"rl-{name}-1") for p in
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
    assert pids
    first = make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)
    assert first.returncode == 0, first.stderr
    assert name not in netns()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert name not in links
    alive = [p for p in pids if Path(f"/proc/{p}/stat").exists()
             and Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"]
    assert not alive, alive
    again = make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)
    assert again.returncode == 0 and "nothing to remove" in again.stdout
    # The cluster is gone; the job's log stayed with the run.
    logs = make("logs", "INFRA=local", f"RUN_ID={run_id}", timeout=120)
    assert logs.returncode == 0 and "postflight: passed" in logs.stdout

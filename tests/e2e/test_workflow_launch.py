""".github/workflows/launch.yml executed for real by `act` (tests/actrun.py), as on a GitHub-hosted
runner: as a user that is not root but has passwordless sudo (tests/e2e/conftest.py), in act's copy
of the work tree (no .venv, no build/: the workflow's `make setup` builds the environment there),
with infra=local and the rehearsal preset. Setup, plan, launch on a 2-node network-namespace
cluster (local-cluster makes the namespaces through sudo; Ray runs as the runner's user) and
verification pass; the job summary holds the verification table and the launch's numbers; the
artifact holds the plan and the run directory's reports. The cluster outlives the job (act removes
its copy after a successful job, so the test cannot `make down` there): `make down INFRA=local`
runs scripts/local-cluster down with the run id, which the runner's user does here, through sudo,
from this checkout; it leaves no namespace and no process, and `make down INFRA=local RUN_ID=...`
from this checkout then finds nothing to remove.

Cost: one act run, a fresh 2.7 GB venv (`make setup`, ~100 s of CPU) and the rehearsal (`make
launch`). Measured on a 2-core machine shared with other jobs (load 5-13): setup 295-318 s, launch
155-179 s, 9.5 min in all; setup took 121 s there on a quieter moment. A pip cache does not shorten
it where the index's proxy sends no caching headers (the cache stays empty), nor did a local
wheelhouse (pip's work here is unpacking and compiling, not downloading)."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from actrun import pids_of, run_workflow

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.slow]
SECRET = "sekret-act-wandb"


def netns(run_id: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"rl-{run_id}-")]


def as_runner(user: str, argv: list[str], cwd: Path, home: Path, timeout: int, env: dict) -> subprocess.CompletedProcess:
    entry = pwd.getpwnam(user)
    ids = {} if entry.pw_uid == os.geteuid() else {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "USER": user, **env}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False, **ids)


@pytest.fixture(scope="module")
def launched(runner_user):
    run_id = f"act-{os.getpid()}"
    tmp = Path(tempfile.mkdtemp(prefix=f"rlaunch-act-{run_id}-"))
    # The machine's pip settings (here: a local wheel for the CPU torch), as a runner image has its own.
    pip = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    inputs = {"infra": "local", "algo": "grpo", "preset": "rehearsal", "nodes": 2, "gpus_per_node": 0,
              "spot": False, "run_id": run_id}
    started = time.monotonic()
    run = run_workflow("launch.yml", inputs, tmp=tmp, user=runner_user, env=pip,
                       secrets={"WANDB_API_KEY": SECRET}, timeout=1800)
    elapsed = time.monotonic() - started
    # Who runs the nodes' processes, while they run.
    owners = {Path(f"/proc/{pid}").stat().st_uid for ns in netns(run_id)
              for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
              if Path(f"/proc/{pid}").exists()}
    try:
        down = as_runner(runner_user, [str(ROOT / "scripts" / "local-cluster"), "down"], tmp, tmp / "act" / "home",
                         timeout=300, env={"RLAUNCH_CLUSTER_NAME": run_id, "RLAUNCH_STATE_DIR": str(tmp / "state")})
        again = subprocess.run(["make", "down", "INFRA=local", f"RUN_ID={run_id}"], cwd=ROOT, capture_output=True,
                               text=True, timeout=300, check=False)
        yield {"run": run, "run_id": run_id, "down": down, "again": again, "owners": owners, "elapsed": elapsed,
               "user": runner_user}
    finally:
        # Whatever a failed test left: the same down from the repository, as root (by name alone).
        if netns(run_id):
            subprocess.run([str(ROOT / "scripts" / "local-cluster"), "down"], capture_output=True, timeout=300,
                           env={**os.environ, "RLAUNCH_CLUSTER_NAME": run_id, "RLAUNCH_STATE_DIR": str(tmp / "state")})
        shutil.rmtree(tmp, ignore_errors=True)


def step_seconds(run, step: str) -> float:
    ns = [e.get("executionTime", 0) for e in run.events if e.get("step") == step and "stepResult" in e]
    return ns[-1] / 1e9 if ns else float("nan")


def test_the_job_runs_setup_plan_launch_and_verification_passes(launched):
    run = launched["run"]
    assert run.ok, run.log[-8000:]
    # "Down (failed or cancelled)" did not run: act lists only the steps that started.
    assert run.steps == {"Check out": "success", "Check inputs": "success", "Set up": "success",
                         "Plan": "success", "Credentials": "success", "Launch": "success", "Summary": "success",
                         "Keep the plan and reports": "success"}, run.log
    launch = run.output("Launch")
    # A 2-node cluster in network namespaces, as the runner's user, not one loopback node.
    assert "created 2 node(s) (netns" in launch and "ONE node on 127.0.0.1" not in launch, launch[-4000:]
    assert "verification  passed" in launch
    print(f"act launch.yml: {launched['elapsed']:.0f} s in all; make setup {step_seconds(run, 'Set up'):.0f} s, "
          f"make launch {step_seconds(run, 'Launch'):.0f} s")


def test_the_job_summary_has_the_verification_table_and_the_numbers(launched):
    run, run_id = launched["run"], launched["run_id"]
    summary = run.summary()
    assert summary.startswith(f"### rlaunch: run {run_id} (trl on local)\n"), summary
    assert re.search(r"^\| steps \| (\d+)/\1 \|$", summary, re.M), summary
    reward = re.search(r"^\| reward \| (\d\.\d\d) -> (\d\.\d\d) \|$", summary, re.M)
    assert reward and float(reward.group(1)) < 0.3 and float(reward.group(2)) >= 0.9, summary
    # act's copy of the work tree, where the workflow ran.
    assert re.search(rf"^\| run dir \| /\S+/hostexecutor/build/storage/runs/rehearsal/{run_id} \|$", summary, re.M)
    assert "| verification | passed |" in summary
    table = summary.split("#### Verification\n", 1)[1]
    reports = run.uploaded[f"rlaunch-{run_id}"] / "storage" / "runs" / "rehearsal" / run_id
    report = json.loads((reports / "verification.json").read_text())
    rows = [line for line in table.splitlines() if line.startswith("| ok |") or line.startswith("| **FAIL** |")]
    assert len(rows) == len(report["checks"]) and all(r.startswith("| ok |") for r in rows), table
    # The same numbers as the closing lines `make launch` printed.
    assert f"  reward        {reward.group(1)} -> {reward.group(2)}" in run.output("Launch")


def test_the_artifact_keeps_the_plan_and_the_reports_not_the_checkpoints(launched):
    run, run_id = launched["run"], launched["run_id"]
    art = run.uploaded[f"rlaunch-{run_id}"]
    plan = art / run_id
    assert {"plan.txt", "spec.json", "job.sh"} <= {p.name for p in plan.iterdir()}
    reports = art / "storage" / "runs" / "rehearsal" / run_id
    for name in ("preflight.json", "verification.json", "metrics.jsonl", "reward.png", "spec.json",
                 "train_summary.json", "eval.json", "plan/plan.txt", "logs/job.log"):
        assert (reports / name).is_file(), name
    assert json.loads((reports / "verification.json").read_text())["passed"] is True
    assert (reports / "reward.png").read_bytes().startswith(b"\x89PNG")
    kept = [p.relative_to(art).as_posix() for p in art.rglob("*") if p.is_file()]
    assert not [p for p in kept if "/checkpoint" in p or "/ray-train/" in p], kept


def test_no_secret_value_in_the_log_or_the_artifact(launched):
    run, run_id = launched["run"], launched["run_id"]
    assert SECRET not in run.log
    for path in run.uploaded[f"rlaunch-{run_id}"].rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_ray_runs_as_the_runners_user_not_root(launched):
    assert launched["owners"] == {pwd.getpwnam(launched["user"]).pw_uid}, launched["owners"]


def test_down_by_the_run_id_leaves_no_namespace_and_no_process(launched):
    down, again, run_id = launched["down"], launched["again"], launched["run_id"]
    assert down.returncode == 0, down.stdout + down.stderr
    assert re.search(rf"local-cluster: {run_id}: down \(stopped \d+ processes, deleted 3 namespaces\)", down.stdout), \
        down.stdout + down.stderr
    assert netns(run_id) == []
    assert again.returncode == 0 and f"local-cluster: {run_id}: nothing to remove" in again.stdout, \
        again.stdout + again.stderr
    uid = pwd.getpwnam(launched["user"]).pw_uid
    if uid != os.geteuid():  # the throwaway runner user: nothing of it may run any more
        assert pids_of(uid) == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids_of(uid)]

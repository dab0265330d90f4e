"""The fault table, on real network-namespace clusters through `make launch`, and recovery proof (c).

Each case ends with one clear message, every node of the run freed (or the exact `make down`), and
nothing of another run touched: a bystander cluster (namespaces with a process in each, a run
directory, a launch lock of its own) stays as it was through every case.

  two launches of one RUN_ID at once   one runs, the other is refused at once, nothing overwritten
  a worker killed mid-run              named (IP, rank, when, from Ray's GCS) in the summary and
                                       verification.json; non-zero exit; every node freed
  the same RUN_ID again                refused; with RESUME=1 the run continues from its last
                                       checkpoint, loses at most save_freq steps
  its trainers frozen (SIGSTOP) after  no false stall before, under a CPU-stress neighbour; the stall
  step 100                             named within its timeout + 15 s, both nodes' trainers' stacks
                                       in the run directory, every node freed, exit 75; RESUME=1
                                       again continues from step 100 and postflight passes on the
                                       whole run (one metrics history, one TensorBoard), with no
                                       stall at the default timeout
  the head killed mid-run              fails naming the head; the workers leave
  a worker that never arrives          the formation deadline names it (IP, rank); every node freed
  the storage full at a checkpoint     named, with what the storage had left (a small tmpfs)
  Ctrl-C during `make launch`          the job stopped and the cluster taken down, and it says so

Shared: the first five are one run (its first attempt loses a worker, its second resumes and is
frozen, its third finishes), so the table costs five short trainings and two resumes. Seconds from a
loss or a freeze to the launch's exit are printed, not asserted: `make bench` measures them
(build/bench/recovery.json), and its smoke reads them from this run (the same scenario, measured by
the benchmark's own lose_worker, resume_after and stalled_attempt) instead of launching twice more.
`make test` runs that one run; the other four cases are marked `full` (`make test-all`), to keep CI
within its budget (tests/budget.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from needs import missing
from faults_support import (ROOT, Launch, attempts, kill_node, last_step, make, namespaces, run_dir,
                            steps, wait_for_step)

sys.path.insert(0, str(ROOT / "tests" / "bench"))
import recovery  # noqa: E402 - tests/bench/, just put on the path
import schema  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.slow]

SAVE_FREQ = 20
TRAIN = f"train.steps=120 train.save_freq={SAVE_FREQ}"  # learned by ~100 steps: postflight's thresholds hold
KILL_AT = SAVE_FREQ + 5  # after the first checkpoint: the resumed attempt redoes a few steps
FREEZE_AFTER = 100  # the resumed attempt's trainers are frozen once step 100 (a checkpoint) is done
# The frozen attempt's train.stall_timeout_s (RESUME=1 may change it; the others: the default). Each of
# its seconds is waited once per `make test`; the longest gap between this run's steps before the freeze
# is a checkpoint save, about a second (docs/recovery.md: 250x inside the timeout under the same neighbour).
STALL_S = 15
DEADLINE_S = 600  # one attempt, formation to postflight, on a loaded 2-core machine


def cluster_info(run_id: str, deadline_s: float = 60) -> dict:
    """cluster.json of a run's local cluster while it is up (`down` removes it)."""
    path = ROOT / "build" / run_id / "cluster" / "cluster.json"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    raise AssertionError(f"no {path} after {deadline_s:.0f} s")


def down(run_id: str) -> None:
    make("down", "INFRA=local", f"RUN_ID={run_id}")
    shutil.rmtree(run_dir(run_id), ignore_errors=True)
    shutil.rmtree(ROOT / "build" / run_id, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def needs_root():
    if os.geteuid() != 0 or not shutil.which("ip"):
        missing("the fault tests need root and iproute2 (network namespaces)")


@pytest.fixture(scope="module")
def bystander():
    """Another run on this host: its cluster's namespaces (a process in each), its run directory,
    its launch lock held. No fault of the runs under test may touch any of it."""
    name = f"flt-other-{os.getpid()}"
    env = {**os.environ, "RLAUNCH_CLUSTER_NAME": name, "RLAUNCH_NODES": "2", "RLAUNCH_START_RAY": "0",
           "RLAUNCH_LOCAL_MODE": "netns", "RLAUNCH_STATE_DIR": str(ROOT / "build" / name / "cluster")}
    subprocess.run([str(ROOT / "scripts" / "local-cluster"), "up"], env=env, check=True, capture_output=True)
    sleepers = [subprocess.Popen(["ip", "netns", "exec", f"rl-{name}-{r}", "sleep", "3600"]) for r in (0, 1)]
    other = run_dir(name)
    other.mkdir(parents=True, exist_ok=True)
    (other / "metrics.jsonl").write_text('{"step": 1}\n')
    from rlaunch.backends.local import backend as local

    lock = open(local.lock_path(name), "w")  # noqa: SIM115 - held for the module
    import fcntl

    fcntl.flock(lock, fcntl.LOCK_EX)
    state = {"name": name, "namespaces": namespaces(f"rl-{name}-"), "sleepers": sleepers, "dir": other}

    def untouched() -> None:
        assert namespaces(f"rl-{name}-") == state["namespaces"], "another run's namespaces changed"
        assert all(p.poll() is None for p in sleepers), "a process of another run was killed"
        assert (other / "metrics.jsonl").read_text() == '{"step": 1}\n', "another run's files changed"

    state["untouched"] = untouched
    yield state
    lock.close()
    for p in sleepers:
        p.kill()
        p.wait()
    subprocess.run([str(ROOT / "scripts" / "local-cluster"), "down"], env=env, capture_output=True)
    shutil.rmtree(other, ignore_errors=True)
    shutil.rmtree(ROOT / "build" / name, ignore_errors=True)


# ---------------------------------------------------------------- one run: lost worker, then resumed


@pytest.fixture(scope="module")
def lost_worker(bystander):
    """Two launches of one RUN_ID at once; the one that runs loses its worker after the first
    checkpoint; the same RUN_ID again, refused; RESUME=1 under a CPU-stress neighbour until its
    trainers are frozen after step 100 and the stall is named; RESUME=1 again to the end. What each
    saw, and when, measured as the recovery benchmark measures it (tests/bench/recovery.py: its smoke
    reads this run)."""
    run_id = f"flt-{os.getpid()}"
    down(run_id)
    first, second = Launch(f"RUN_ID={run_id}", f"SET={TRAIN}"), Launch(f"RUN_ID={run_id}", f"SET={TRAIN}")
    end = time.monotonic() + 120
    while first.alive() and second.alive() and time.monotonic() < end:
        time.sleep(0.1)
    refused, runs = (first, second) if not first.alive() else (second, first)
    refused.wait(60)
    plan = ROOT / "build" / run_id / "plan.txt"
    seen: dict = {}

    def before_kill() -> None:
        seen["plan_then"] = (plan.stat().st_mtime_ns, plan.read_text())
        seen["worker_ip"] = cluster_info(run_id)["nodes"][1]["ip"]

    def report() -> dict:  # each attempt's, before the next one writes its own
        return json.loads((run_dir(run_id) / "verification.json").read_text())

    resumed = finished = None
    try:
        lost = recovery.lose_worker(run_id, runs, SAVE_FREQ, before_kill)
        seen["plan_after"], seen["report_1"] = (plan.stat().st_mtime_ns, plan.read_text()), report()
        seen["namespaces_1"] = namespaces(f"rl-{run_id}-")
        again = make("launch", f"RUN_ID={run_id}", f"SET={TRAIN}")
        resumed = Launch(f"RUN_ID={run_id}", "RESUME=1", f"SET={TRAIN} train.stall_timeout_s={STALL_S}")
        back = recovery.resume_after(run_id, resumed, lost)
        # Frozen once step 101 is written: step 100's checkpoint is whole, the next attempt resumes there.
        stalled = recovery.stalled_attempt(run_id, resumed, FREEZE_AFTER + 1)
        seen["report_2"], seen["namespaces_2"] = report(), namespaces(f"rl-{run_id}-")
        seen["frozen_alive"] = [pid for pid in stalled["frozen"] if _alive(pid)]
        finished = Launch(f"RUN_ID={run_id}", "RESUME=1", f"SET={TRAIN}")
        finished.wait(DEADLINE_S)
        bench = {**lost, **back, **stalled}
        yield {"run_id": run_id, "refused": refused, "runs": runs, "killed_at": lost["killed_at"],
               "step_at_kill": lost["kill_step"], "plan": plan, "bystander": bystander, "again": again,
               "resumed": resumed, "frozen_at": stalled["frozen_at"], "frozen": stalled["frozen"],
               "finished": finished, "bench": {k: v for k, v in bench.items() if k in recovery.SCHEMA}, **seen}
    finally:
        for launch in (first, second, resumed, finished):
            if launch is not None and launch.alive():
                launch.interrupt()
                launch.wait(120)
        down(run_id)


def test_two_launches_of_one_run_id_at_once_one_runs_and_the_other_is_refused(lost_worker):
    refused, run_id = lost_worker["refused"], lost_worker["run_id"]
    assert refused.rlaunch_rc == 2, refused.output
    assert f"run {run_id}: another launch of it is running (pid" in refused.output, refused.output
    assert "nothing was written" in refused.output
    assert "plan for run" not in refused.output, "the refused launch rendered a plan"
    # The launch that ran kept its own plan: the refused one wrote nothing over it.
    assert lost_worker["plan_after"] == lost_worker["plan_then"]
    assert lost_worker["runs"].first("plan for run") is not None
    lost_worker["bystander"]["untouched"]()


def test_a_worker_killed_mid_run_is_named_and_every_node_freed(lost_worker):
    runs, run_id = lost_worker["runs"], lost_worker["run_id"]
    out = runs.output
    assert runs.rlaunch_rc == 75, out  # EX_TEMPFAIL: a lost node; RESUME=1 can continue the run
    loss = next(r for r in attempts(run_dir(run_id)) if r["event"] == "node_lost")
    assert loss["ip"] == lost_worker["worker_ip"], loss
    assert loss["rank"] == 1 and loss["rank_from"] == "launch order" and loss["declared_dead_at"], loss
    assert loss["reason"].startswith("UNEXPECTED_TERMINATION"), loss  # Ray's GCS: health check failed
    named = f"{loss['ip']} (rank 1), declared dead at {loss['declared_dead_at']}"
    assert f"node lost     attempt 1: {named}" in out, out  # the closing summary
    report = lost_worker["report_1"]
    assert report["passed"] is False
    first_failed = next(c for c in report["checks"] if not c["passed"])
    assert first_failed["name"] == "nodes stayed up" and named in first_failed["detail"], first_failed
    assert first_failed["node"] == loss["ip"]
    assert "took the cluster down, every node freed" in out, out
    assert lost_worker["namespaces_1"] == []
    killed = lost_worker["killed_at"]
    print(f"worker killed at step {lost_worker['step_at_kill']}: the launch exited {runs.ended - killed:.1f} s "
          f"later (Ray's GCS declared the node dead at {loss['declared_dead_at']}); "
          + runs.timeline(killed, "no longer answer", "rlaunch-nodewatch: node lost", "postflight: FAILED",
                          "job " + run_id + ": FAILED", "local: node lost", "every node freed"))
    lost_worker["bystander"]["untouched"]()


def test_the_same_run_id_is_refused_and_resume_continues_it_until_its_trainers_freeze(lost_worker):
    run_id = lost_worker["run_id"]
    run = run_dir(run_id)
    again = lost_worker["again"]
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"a new run id: run {run_id} already has {run}" in again.stderr
    assert f"`make launch RUN_ID={run_id} RESUME=1` continues the run from step {SAVE_FREQ}" in again.stderr

    resumed, frozen_at, frozen = lost_worker["resumed"], lost_worker["frozen_at"], lost_worker["frozen"]
    out = resumed.output
    assert resumed.rlaunch_rc == 75, out[-6000:]  # EX_TEMPFAIL: RESUME=1 continues
    assert f"rlaunch-job: attempt 2 of run {run_id}: resuming from step {SAVE_FREQ}" in out
    start = next(r for r in attempts(run) if r["event"] == "start" and r["attempt"] == 2)
    assert start["resume_step"] == SAVE_FREQ and 0 < start["steps_lost"] <= SAVE_FREQ, start
    stalled = next(r for r in attempts(run) if r["event"] == "stalled")
    named = resumed.first("rlaunch-nodewatch: stalled at step")
    assert named is not None and named - frozen_at <= STALL_S + 15, (named and named - frozen_at, out[-4000:])
    assert stalled["attempt"] == 2 and stalled["step"] > FREEZE_AFTER and stalled["timeout_s"] == STALL_S, stalled
    # Both nodes' trainers, frozen, dumped from their own node's Ray task: their stacks in the run directory.
    index = json.loads((Path(stalled["stacks"]) / "index.json").read_text())
    assert stalled["stacks"] == str(run / "stacks" / "attempt-2") and stalled["nodes"] == 2, stalled
    for node in index["nodes"]:
        workers = [p for p in node["processes"] if "RayTrainWorker" in p["cmdline"]]
        assert len(workers) == 1 and workers[0]["stack"], node
        text = (Path(stalled["stacks"]) / workers[0]["file"]).read_text()
        assert "py-spy dump --nonblocking\n" in text and "train_loop" in text, text[:2000]
    assert {n["ip"] for n in index["nodes"]} == {n["ip"] for n in cluster_nodes(run)}
    assert f"stalled       attempt 2: at step {stalled['step']}: no step for" in out, out  # the closing summary
    report = lost_worker["report_2"]
    first_failed = next(c for c in report["checks"] if not c["passed"])
    assert first_failed["name"] == "progress" and first_failed["detail"].startswith(
        f"stalled at step {stalled['step']}: no step for"), first_failed
    assert "local: the run stalled: took the cluster down, every node freed" in out, out
    assert f"`make launch RUN_ID={run_id} RESUME=1` continues the run from step {FREEZE_AFTER}" in out, out
    assert lost_worker["namespaces_2"] == [] and lost_worker["frozen_alive"] == []
    print(f"trainers frozen after step {FREEZE_AFTER} ({len(frozen)} processes): "
          + resumed.timeline(frozen_at, "rlaunch-nodewatch: stalled at step", "stopping the framework",
                             "local: the run stalled", "every node freed"))

    assert lost_worker["bench"]["false_stalls"] == 0, "a stall named before the freeze, under the stress"

    finished = lost_worker["finished"]
    out = finished.output
    assert finished.rlaunch_rc == 0, out[-6000:]
    assert f"rlaunch-job: attempt 3 of run {run_id}: resuming from step {FREEZE_AFTER}" in out
    assert steps(run / "metrics.jsonl") == list(range(1, 121)), "one metrics history, each step once"
    from rlaunch.verify.postflight import read_scalars

    rewards = read_scalars(run / "tensorboard")["train/reward"]
    assert [s for s, _ in rewards] == list(range(1, 121)), "TensorBoard: the redone steps replace the lost ones"
    assert {p.parent for p in (run / "tensorboard").rglob("events.out.tfevents.*")} == {run / "tensorboard"}
    report = json.loads((run / "verification.json").read_text())
    assert report["passed"] is True, [c for c in report["checks"] if not c["passed"]]
    assert [a["attempt"] for a in report["facts"]["attempts"]] == [1, 2, 3]
    progress = next(c for c in report["checks"] if c["name"] == "progress")
    assert progress["detail"].startswith("attempt 3: no stall in"), progress  # the default timeout
    assert "attempt       3: resumed from step 100" in out and "verification  passed" in out
    first_step = next(t for t, line in finished.lines if line.startswith("step "))
    print(f"resumed after the stall: {first_step - finished.started:.1f} s from `make launch RESUME=1` to the "
          f"first progress line; {progress['detail']}")
    lost_worker["bystander"]["untouched"]()


def cluster_nodes(run: Path) -> list[dict]:
    """The nodes preflight saw (the cluster is gone by now)."""
    return json.loads((run / "preflight.json").read_text())["nodes"]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def test_the_recovery_benchmark_runs_on_this_loss_resume_and_stall(lost_worker, tmp_path):
    """`make bench`'s recovery benchmark still runs (its smoke): the same scenario as this run, so the
    smoke takes this run's figures (RLAUNCH_BENCH_SAMPLE) instead of two launches of its own, and
    measures the false alarms itself; its JSON's keys and types are checked."""
    out = tmp_path / "recovery.json"
    proc = schema.smoke("recovery", out, 600, sample=lost_worker["bench"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert schema.problems(data, recovery.SCHEMA) == []
    assert data["save_freq"] == SAVE_FREQ and data["resumed"] is True and data["steps_lost"] <= SAVE_FREQ, data
    assert data["stall_rc"] == 75 and data["false_stalls"] == 0, data
    assert {case["measured"] for case in data["false_alarms"].values()} >= {True}, data["false_alarms"]
    print(proc.stdout.strip())


# ---------------------------------------------------------------- the other faults, one run each


@pytest.mark.full
def test_the_head_killed_mid_run_fails_naming_the_head_and_the_workers_leave(bystander):
    run_id = f"flt-h-{os.getpid()}"
    down(run_id)
    try:
        launch = Launch(f"RUN_ID={run_id}", f"SET={TRAIN}")
        wait_for_step(run_dir(run_id) / "metrics.jsonl", 1, DEADLINE_S, launch.alive)
        head_ip = cluster_info(run_id)["head_ip"]
        killed_at = kill_node(f"rl-{run_id}-0")
        launch.wait(300)
        out = launch.output
        assert launch.rlaunch_rc == 75, out
        assert f"local: node lost: {head_ip} (rank 0, the head), found without a raylet in rl-{run_id}-0" in out, out
        assert "took the cluster down, every node freed" in out
        assert namespaces(f"rl-{run_id}-") == [], "the workers left with the head"
        print(f"head killed: the launch exited {launch.ended - killed_at:.1f} s later")
    finally:
        down(run_id)
    bystander["untouched"]()


@pytest.mark.full
def test_a_worker_that_never_arrives_is_named_and_every_node_freed(bystander):
    run_id = f"flt-n-{os.getpid()}"
    down(run_id)
    try:
        launch = Launch(f"RUN_ID={run_id}", "SET=cluster.formation_timeout_s=90")  # the head alone: 10-40 s
        # cluster.json is written once the nodes' links are up, before any ray-up starts; the
        # head then takes 10 s and more to start, so the worker cannot have joined yet. Its machine
        # is cut off now: it never arrives.
        worker_ip = cluster_info(run_id, deadline_s=120)["nodes"][1]["ip"]
        subprocess.run(["ip", "-n", f"rl-{run_id}-1", "link", "set", "eth0", "down"], check=True)
        launch.wait(300)
        out = launch.output
        assert launch.rlaunch_rc == 3, out
        assert f"1 of 2 nodes missing (1 registered); not joined: {worker_ip}; rank(s) 1 never arrived" in out, out
        assert "the cluster did not form: took the cluster down, every node freed" in out, out
        assert namespaces(f"rl-{run_id}-") == []
        assert not run_dir(run_id).exists(), "nothing ran: the run id is still unused"
    finally:
        down(run_id)
    bystander["untouched"]()


@pytest.mark.full
def test_full_storage_when_a_checkpoint_is_written_is_named(bystander, tmp_path):
    run_id = f"flt-s-{os.getpid()}"
    storage = Path(f"/tmp/flt-s-{os.getpid()}")
    storage.mkdir()
    # Room for the plan, the logs and a few steps' metrics, not for a checkpoint (about 1 MiB).
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=900k", "tmpfs", str(storage)], check=True)
    try:
        launch = Launch(f"RUN_ID={run_id}", f"WORK_ROOT={storage}", "SET=train.steps=120 train.save_freq=5")
        launch.wait(DEADLINE_S)
        out = launch.output
        run = run_dir(run_id, storage=storage)
        assert launch.rlaunch_rc == 1, out
        assert f"rlaunch.rehearsal.train: storage full after step 5: the storage at {storage} is full" in out, out
        assert "removed the incomplete checkpoint-5 so the reports can be written" in out
        report = json.loads((run / "verification.json").read_text())
        first_failed = next(c for c in report["checks"] if not c["passed"])
        assert first_failed["name"] == "storage space" and f"the storage at {storage} is full" in \
            first_failed["detail"], first_failed
        assert "verification  FAILED: storage space" in out
    finally:
        down(run_id)
        subprocess.run(["umount", str(storage)], check=False)
        storage.rmdir()
    bystander["untouched"]()


@pytest.mark.full
def test_ctrl_c_during_make_launch_takes_the_cluster_down_and_says_so(bystander):
    run_id = f"flt-i-{os.getpid()}"
    down(run_id)
    try:
        launch = Launch(f"RUN_ID={run_id}", f"SET={TRAIN}")
        wait_for_step(run_dir(run_id) / "metrics.jsonl", 1, DEADLINE_S, launch.alive)
        pressed = launch.interrupt()
        launch.wait(120)
        out = launch.output
        print(f"Ctrl-C at step {last_step(run_dir(run_id) / 'metrics.jsonl')} (of the run so far): "
              + launch.timeline(pressed, "local: interrupted: stopping", "local: interrupted: took the cluster down"))
        assert launch.rlaunch_rc == 130, out
        assert f"local: interrupted: stopping run {run_id}" in out, out
        assert "local: interrupted: took the cluster down, every node freed" in out, out
        # From the checkpoint the run had when the nodes went (step 0 if it had none yet).
        assert re.search(rf"`make launch RUN_ID={run_id} RESUME=1` continues the run from step "
                         rf"(0 \(it has no checkpoint yet\)|\d+, its last checkpoint)", out), out[-3000:]
        assert "Traceback" not in out[out.index("local: interrupted"):], out
        assert namespaces(f"rl-{run_id}-") == []
        print(f"Ctrl-C: every node freed and the launch exited {launch.ended - pressed:.1f} s later")
    finally:
        down(run_id)
    bystander["untouched"]()

"""The rendered `run` section forms a real Ray cluster and runs the entrypoint once, on rank 0.

Two Linux network namespaces stand in for two SkyPilot nodes. Each runs the exact script SkyPilot
would run: SkyPilot's own builders (make_task_bash_script around build_task_bash_script) wrap the
rendered `run` with the task envs and the SKYPILOT_* variables as SkyPilot sets them, and append
SkyPilot's exit-status epilogue. HOME has a sky_workdir that is this repository, as the workdir
upload would make it. job.sh is a stub framework entrypoint that records where it ran, what the
cluster looked like from there, and then fails with 3, so the test also proves the head's exit
status reaches SkyPilot and the workers still leave on their own.

Recovery proof (a): the same scripts run the real job.sh of a managed rehearsal; a node dies during
training; the head exits 75 (recover_on_exit_codes) naming it; the same task runs again with the same
SKYPILOT_TASK_ID on two fresh namespaces, resumes from the last checkpoint on the "bucket" (a
directory that outlives both clusters) and passes postflight on the whole run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.skypilot import backend as sp
from needs import missing

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # ~30 s idle, 90 s on a loaded 2-core machine

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
TASK_ID = "sky-managed-2026-11-29-12-00-00-000000_run-test_7-0"
DEADLINE_S = 240

STUB_JOB = """#!/usr/bin/env bash
# Stub framework entrypoint: one line per call, from inside the cluster, then a failure (3).
set -Eeuo pipefail
read -r nodes seen <<<"$("${RLAUNCH_PYTHON}" - <<'PY'
import os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
@ray.remote(num_cpus=0)
def wandb_id():
    return os.environ.get("WANDB_RUN_ID", "unset")
on = lambda n: NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
print(len(alive), ",".join(sorted(set(ray.get([wandb_id.options(scheduling_strategy=on(n)).remote() for n in alive])))))
PY
)"
printf 'rank=%s ip=%s nodes=%s ray=%s wandb=%s on_nodes=%s\\n' "${SKYPILOT_NODE_RANK}" \\
  "$(hostname -I | awk '{print $1}')" "${nodes}" "${RAY_ADDRESS}" "${WANDB_RUN_ID}" "${seen}" >>"${STUB_LOG}"
exit 3
"""


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


class Namespaces:
    """A bridge without an address and one namespace per node on a random private /24."""

    def __init__(self, n: int):
        self.prefix = f"rsk{os.getpid() % 100000}"
        self.net = f"10.{random.randint(20, 219)}.{random.randint(1, 250)}"
        self.names = [f"{self.prefix}-{i}" for i in range(n)]
        self.ips = [f"{self.net}.{i + 1}" for i in range(n)]

    def up(self) -> None:
        bridge = f"{self.prefix}b"
        _ip("link", "add", bridge, "type", "bridge")
        _ip("link", "set", bridge, "up")
        for i, (ns, addr) in enumerate(zip(self.names, self.ips)):
            _ip("netns", "add", ns)
            _ip("link", "add", f"{self.prefix}v{i}", "type", "veth", "peer", "name", f"{self.prefix}p{i}")
            _ip("link", "set", f"{self.prefix}p{i}", "netns", ns)
            _ip("-n", ns, "link", "set", f"{self.prefix}p{i}", "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "set", f"{self.prefix}v{i}", "master", bridge)
            _ip("link", "set", f"{self.prefix}v{i}", "up")

    def pids(self, ns: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def down(self) -> None:
        pids = [p for ns in self.names for p in self.pids(ns)]
        for sig in ("TERM", "KILL"):
            if pids:
                subprocess.run(["kill", f"-{sig}", *map(str, pids)], capture_output=True)
                time.sleep(2)
            pids = [p for ns in self.names for p in self.pids(ns)]
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.prefix}b"], capture_output=True)


SCRIPT_PY = """
import json, sys
from sky.backends.task_codegen import UNSET_RAY_ENV_VARS, TaskCodeGen
from sky.skylet import log_lib
args = json.load(sys.stdin)
prefix = " && ".join(f"unset {var}" for var in UNSET_RAY_ENV_VARS)
body = TaskCodeGen.build_task_bash_script(args["run"], env_prefix=prefix)
print(json.dumps([log_lib.make_task_bash_script(body, env_vars=env) for env in args["envs"]]))
"""


def skypilot_scripts(run: str, envs: list[dict[str, str]], home: Path) -> list[str]:
    """The file SkyPilot runs on each node for the task's `run` (sky 0.14.1: TaskCodeGen, log_lib),
    built by SkyPilot itself in a child process with its own HOME (importing sky writes ~/.sky)."""
    home.mkdir(exist_ok=True)
    proc = subprocess.run([str(VENV_BIN / "python"), "-c", SCRIPT_PY],
                          input=json.dumps({"run": run, "envs": envs}), capture_output=True, text=True,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=120, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def nodes():
    if os.geteuid() != 0 or not shutil.which("ip"):
        missing("needs root and iproute2 (network namespaces)")
    if not (VENV_BIN / "ray").exists():
        missing("needs the launcher venv's ray (make setup)")
    fixture = Namespaces(2)
    try:
        fixture.up()
        yield fixture
    finally:
        fixture.down()
        for i in range(2):
            shutil.rmtree(f"/tmp/{fixture.prefix}-{i}", ignore_errors=True)


def test_run_section_forms_the_cluster_and_runs_the_entrypoint_once_on_rank_0(nodes, tmp_path):
    storage = tmp_path / "storage"
    spec = config.load("rehearsal", {"INFRA": "gcp", "SPOT": "1", "RUN_ID": "run-test"},
                       f"storage.mount={storage} framework.image=official")
    task = yaml.safe_load(artifacts.finish(spec, sp.BACKEND.render(spec))["task.yaml"])
    assert "workdir" in task  # the repository travels as the workdir: RLAUNCH_HOME is $PWD

    artifacts_dir = tmp_path / "artifacts"
    artifacts_dir.mkdir()
    (artifacts_dir / "job.sh").write_text(STUB_JOB)
    stub_log = tmp_path / "entrypoint.log"
    home = tmp_path / "home"
    home.mkdir()
    (home / "sky_workdir").symlink_to(ROOT)  # SkyPilot cds to ~/sky_workdir before `run`

    envs = _node_envs(task, nodes, artifacts_dir, TASK_ID, job_id="7", RLAUNCH_NUM_CPUS="1",
                      RLAUNCH_DEADLINE_S="180", STUB_LOG=str(stub_log))
    procs, logs = [], []
    for rank, (ns, script_text) in enumerate(zip(nodes.names, skypilot_scripts(task["run"], envs,
                                                                                 tmp_path / "sky-home"))):
        script = tmp_path / f"node{rank}.sh"
        script.write_text(script_text)
        log = tmp_path / f"node{rank}.log"
        logs.append(log)
        with log.open("w") as out:
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "/bin/bash", str(script)], stdout=out, stderr=subprocess.STDOUT,
                env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}))

    deadline = time.monotonic() + DEADLINE_S
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
    output = {i: log.read_text() for i, log in enumerate(logs)}
    assert codes == [3, 0], output  # the head returns job.sh's status; the worker leaves cleanly

    lines = stub_log.read_text().splitlines()
    wandb = "run-test-" + hashlib.sha256(TASK_ID.encode()).hexdigest()[:12]
    # Once, on rank 0, in a 2-node cluster; the W&B run id reached the Ray workers of both nodes.
    assert lines == [f"rank=0 ip={nodes.ips[0]} nodes=2 ray={nodes.ips[0]}:6379 wandb={wandb} on_nodes={wandb}"], \
        output
    assert "is gone; stopping this node's Ray" in output[1]
    owner = Path(spec.paths.run_dir) / "skypilot-task-id"
    assert owner.read_text().strip() == TASK_ID
    # ray-down on both nodes: nothing of rlaunch's Ray is left in either namespace.
    end = time.monotonic() + 20
    while any(nodes.pids(ns) for ns in nodes.names) and time.monotonic() < end:
        time.sleep(0.5)
    assert not any(nodes.pids(ns) for ns in nodes.names), output


# ---------------------------------------------------------------- recovery proof (a)

RECOVERY_TASK_ID = "sky-managed-2026-12-01-10-00-00-000000_run-recovery_8-0"
SAVE_FREQ = 20


def _node_envs(task: dict, nodes: Namespaces, artifacts_dir: Path, task_id: str, job_id: str = "8",
               **more: str) -> list[dict]:
    """Each node's env, as SkyPilot's task codegen sets it, with this machine standing in for the
    cloud VMs; `more` overrides or adds."""
    return [{
        **task["envs"],
        "SKYPILOT_NODE_IPS": "\n".join(nodes.ips), "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "0", "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_TASK_ID": task_id, "SKYPILOT_INTERNAL_JOB_ID": job_id,
        # This machine instead of a cloud VM: the venv's Ray and python, small nodes, and gloo on
        # the namespace's own interface (every namespace shares the host's name, mapped to 127.0.0.1).
        "RLAUNCH_ARTIFACTS": str(artifacts_dir), "RLAUNCH_PYTHON": str(VENV_BIN / "python"),
        "RLAUNCH_RAY": str(VENV_BIN / "ray"), "RLAUNCH_TEMP_DIR": f"/tmp/{nodes.prefix}-{rank}",
        "RLAUNCH_NUM_CPUS": "2", "RLAUNCH_OBJECT_STORE_BYTES": "80000000",
        "RLAUNCH_DEADLINE_S": "300", "RLAUNCH_HEAD_WATCH_S": "1", "GLOO_SOCKET_IFNAME": "eth0", **more,
    } for rank in range(2)]


def _run_nodes(task: dict, nodes: Namespaces, envs: list[dict], tmp_path: Path, home: Path, tag: str):
    """Each node runs the script SkyPilot builds around the task's `run`, as on a fresh cluster."""
    procs, logs = [], []
    scripts = skypilot_scripts(task["run"], envs, tmp_path / "sky-home")
    for rank, (ns, text) in enumerate(zip(nodes.names, scripts)):
        script = tmp_path / f"{tag}-node{rank}.sh"
        script.write_text(text)
        log = tmp_path / f"{tag}-node{rank}.log"
        logs.append(log)
        with log.open("w") as out:
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "/bin/bash", str(script)], stdout=out, stderr=subprocess.STDOUT,
                env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}))
    return procs, logs


def _fresh_nodes() -> Namespaces:
    fixture = Namespaces(2)
    fixture.up()
    return fixture


def _remove(nodes: Namespaces) -> None:
    nodes.down()
    for i in range(2):
        shutil.rmtree(f"/tmp/{nodes.prefix}-{i}", ignore_errors=True)


@pytest.mark.full  # resume after a loss: e2e/test_faults runs it on the local cluster
def test_a_managed_job_recovered_on_fresh_nodes_resumes_from_its_last_checkpoint(tmp_path):
    """SkyPilot managed-job recovery: a node dies mid-training, SkyPilot runs the same task again
    (same SKYPILOT_TASK_ID) on fresh nodes, and the run continues from its last checkpoint on the
    bucket: at most save_freq steps lost, postflight passing on the whole run."""
    from faults_support import kill_node, steps, wait_for_step

    if os.geteuid() != 0 or not shutil.which("ip"):
        missing("needs root and iproute2 (network namespaces)")
    storage = tmp_path / "storage"  # the bucket: it outlives every cluster of the managed job
    spec = config.load("rehearsal", {"INFRA": "gcp", "SPOT": "1", "RUN_ID": f"sky-rec-{os.getpid()}"},
                       f"storage.mount={storage} framework.image=official train.steps=120 "
                       f"train.save_freq={SAVE_FREQ}")
    files = artifacts.finish(spec, sp.BACKEND.render(spec))
    task = yaml.safe_load(files["task.yaml"])
    assert task["resources"]["job_recovery"]["recover_on_exit_codes"] == [75]
    artifacts_dir = tmp_path / "artifacts"  # the rendered files' file mount, on every node
    for rel, text in files.items():
        (artifacts_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (artifacts_dir / rel).write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    (home / "sky_workdir").symlink_to(ROOT)
    run_dir = Path(spec.paths.run_dir)

    nodes = _fresh_nodes()
    try:
        procs, logs = _run_nodes(task, nodes, _node_envs(task, nodes, artifacts_dir, RECOVERY_TASK_ID),
                                 tmp_path, home, "first")
        wait_for_step(run_dir / "metrics.jsonl", SAVE_FREQ + 5, 600, lambda: procs[0].poll() is None)
        lost_ip = nodes.ips[1]
        kill_node(nodes.names[1])  # preempted: the machine and everything on it gone
        head_rc = procs[0].wait(timeout=300)
        output = logs[0].read_text()
        assert head_rc == 75, output[-5000:]  # job.sh: a node was lost (recover_on_exit_codes)
        loss = next(json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()
                    if '"node_lost"' in line)
        assert (loss["ip"], loss["rank"], loss["rank_from"]) == (lost_ip, 1, "launch order"), loss
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        _remove(nodes)  # SkyPilot terminates the preempted cluster

    nodes = _fresh_nodes()  # the recovery: a new cluster, new addresses, the same task and bucket
    try:
        procs, logs = _run_nodes(task, nodes, _node_envs(task, nodes, artifacts_dir, RECOVERY_TASK_ID),
                                 tmp_path, home, "recovered")
        codes = [proc.wait(timeout=900) for proc in procs]
        output = {i: log.read_text() for i, log in enumerate(logs)}
        assert codes == [0, 0], output[0][-6000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        _remove(nodes)
    records = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    second = next(r for r in records if r["event"] == "start" and r["attempt"] == 2)
    assert second["resume_step"] == SAVE_FREQ and 0 < second["steps_lost"] <= SAVE_FREQ, second
    assert f"rlaunch-job: attempt 2 of run {spec.run.id}: resuming from step {SAVE_FREQ}" in output[0]
    assert steps(run_dir / "metrics.jsonl") == list(range(1, 121))
    report = json.loads((run_dir / "verification.json").read_text())
    assert report["passed"] is True, [c for c in report["checks"] if not c["passed"]]
    assert (run_dir / "skypilot-task-id").read_text().strip() == RECOVERY_TASK_ID
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert set(summary["worker_nodes"]) == set(nodes.ips), "trained on the fresh nodes"

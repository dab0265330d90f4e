"""The rendered `run` section forms a real Ray cluster and runs the entrypoint once, on rank 0.

Two Linux network namespaces stand in for two SkyPilot nodes. Each runs the exact script SkyPilot
would run: SkyPilot's own builders (make_task_bash_script around build_task_bash_script) wrap the
rendered `run` with the task envs and the SKYPILOT_* variables as SkyPilot sets them, and append
SkyPilot's exit-status epilogue. HOME has a sky_workdir that is this repository, as the workdir
upload would make it. job.sh is a stub framework entrypoint that records where it ran, what the
cluster looked like from there, and then fails with 3, so the test also proves the head's exit
status reaches SkyPilot and the workers still leave on their own.
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

from rlaunch import artifacts, config
from rlaunch.backends import skypilot as sp

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
        pytest.skip("needs root and iproute2 (network namespaces)")
    if not (VENV_BIN / "ray").exists():
        pytest.skip("needs the launcher venv's ray (make setup)")
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

    envs = []
    for rank in range(2):
        envs.append({
            **task["envs"],
            # As SkyPilot's task codegen sets them for each node.
            "SKYPILOT_NODE_IPS": "\n".join(nodes.ips), "SKYPILOT_NUM_NODES": "2",
            "SKYPILOT_NUM_GPUS_PER_NODE": "0", "SKYPILOT_NODE_RANK": str(rank),
            "SKYPILOT_TASK_ID": TASK_ID, "SKYPILOT_INTERNAL_JOB_ID": "7",
            # This machine instead of a cloud VM: the stub's artifacts, the venv's Ray, small nodes.
            "RLAUNCH_ARTIFACTS": str(artifacts_dir), "RLAUNCH_PYTHON": str(VENV_BIN / "python"),
            "RLAUNCH_RAY": str(VENV_BIN / "ray"), "RLAUNCH_TEMP_DIR": f"/tmp/{nodes.prefix}-{rank}",
            "RLAUNCH_NUM_CPUS": "1", "RLAUNCH_OBJECT_STORE_BYTES": "80000000",
            "RLAUNCH_DEADLINE_S": "180", "RLAUNCH_HEAD_WATCH_S": "1", "STUB_LOG": str(stub_log),
        })
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
    owner = Path(spec["paths"]["run_dir"]) / "skypilot-task-id"
    assert owner.read_text().strip() == TASK_ID
    # ray-down on both nodes: nothing of rlaunch's Ray is left in either namespace.
    end = time.monotonic() + 20
    while any(nodes.pids(ns) for ns in nodes.names) and time.monotonic() < end:
        time.sleep(0.5)
    assert not any(nodes.pids(ns) for ns in nodes.names), output

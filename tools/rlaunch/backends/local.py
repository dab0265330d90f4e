"""INFRA=local: a real multi-node Ray cluster on this machine, one node per network namespace.

The cluster comes from scripts/local-cluster (which runs scripts/ray-up in every namespace, the same
bootstrap SkyPilot nodes run); the job goes in through Ray's job API from inside the head's namespace,
because the bridge has no address on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .. import ROOT, SCRIPTS, artifacts, config
from ..errors import MissingPrerequisite
from .base import Backend

LOCAL_CLUSTER = SCRIPTS / "local-cluster"


def cluster_name(spec: dict) -> str:
    """Short and stable per run: namespace and link names have tight length limits."""
    return "r" + hashlib.sha256(spec["run"]["id"].encode()).hexdigest()[:6]


def state_dir(out: Path) -> Path:
    return out / "cluster"


def _cluster_env(spec: dict, out: Path) -> dict[str, str]:
    cluster = spec["cluster"]
    env = {
        "RLAUNCH_CLUSTER_NAME": cluster_name(spec),
        "RLAUNCH_NODES": str(cluster["nodes"]),
        "RLAUNCH_STATE_DIR": str(state_dir(out)),
        "RLAUNCH_RAY": str(Path(sys.executable).parent / "ray"),
        "RLAUNCH_DEADLINE_S": str(cluster["formation_timeout_s"]),
        "RLAUNCH_GPUS_PER_NODE": str(cluster["gpus_per_node"]),
    }
    # Ports only when changed from the defaults: in loopback mode local-cluster derives free ones
    # from the name.
    defaults = config.read_defaults()["cluster"]
    if cluster["ray_port"] != defaults["ray_port"]:
        env["RLAUNCH_RAY_PORT"] = str(cluster["ray_port"])
    if cluster["dashboard_port"] != defaults["dashboard_port"]:
        env["RLAUNCH_DASHBOARD_PORT"] = str(cluster["dashboard_port"])
    if cluster["cpus_per_node"]:
        env["RLAUNCH_NUM_CPUS"] = str(cluster["cpus_per_node"])
    return env


def _job_env(spec: dict, info: dict) -> dict[str, str]:
    return {
        "RLAUNCH_HOME": str(ROOT), "RLAUNCH_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "tools"), "PYTHONUNBUFFERED": "1",
        # Every actor of the job connects to this cluster, even with other Ray clusters on the host.
        "RAY_ADDRESS": f"{info['head_ip']}:{info['ray_port']}",
        # All namespaces share the host's name, which /etc/hosts maps to 127.0.0.1: without this,
        # Gloo ranks advertise loopback and never reach each other across nodes.
        "GLOO_SOCKET_IFNAME": "eth0" if info["mode"] == "netns" else "lo",
    }


class Local(Backend):
    name = "local"

    def render(self, spec: dict) -> dict[str, str]:
        return artifacts.common(spec)

    def check(self, spec: dict, files: dict[str, str]) -> list[str]:
        from .. import frameworks

        return [frameworks.get(spec["framework"]["name"]).loader_check(spec, files)]

    def plan(self, spec: dict, files: dict[str, str]) -> list[str]:
        out = spec["run"]["out"]
        return [
            f"scripts/local-cluster up   ({spec['cluster']['nodes']} nodes, one network namespace each; "
            f"one node on 127.0.0.1 without root)",
            f"ray job submit {spec['run']['id']}: bash {out}/job.sh   (from the head's namespace)",
            f"ray job logs --follow {spec['run']['id']}",
            f"then: make status / make logs / make down RUN_ID={spec['run']['id']}",
        ]

    def _exec_head(self, spec: dict, out: Path, argv: list[str], **kw) -> subprocess.CompletedProcess:
        env = {**os.environ, **_cluster_env(spec, out)}
        return subprocess.run([str(LOCAL_CLUSTER), "exec", "0", "--", *argv], env=env, check=False, **kw)

    def _info(self, out: Path) -> dict:
        info_path = state_dir(out) / "cluster.json"
        if not info_path.exists():
            raise MissingPrerequisite("a local cluster", f"none is up for {out} (run `make launch`)")
        return json.loads(info_path.read_text())

    def _address(self, out: Path) -> str:
        info = self._info(out)
        return f"http://{info['head_ip']}:{info['dashboard_port']}"

    def _job(self, spec: dict, out: Path, *args: str) -> int:
        argv = [sys.executable, "-m", "rlaunch", "job", *args, f"--address={self._address(out)}",
                f"--submission_id={spec['run']['id']}"]
        return self._exec_head(spec, out, argv).returncode

    def launch(self, spec: dict, out: Path) -> int:
        if not LOCAL_CLUSTER.exists():
            raise MissingPrerequisite("scripts/local-cluster", "the repository is incomplete")
        nodes = spec["cluster"]["nodes"]
        if nodes > 1 and (os.geteuid() != 0 or shutil.which("ip") is None):
            raise MissingPrerequisite(
                f"root and `ip` for a {nodes}-node local cluster",
                "network namespaces need CAP_NET_ADMIN and iproute2: run as root (sudo make launch), "
                "or NODES=1 for a one-node run on 127.0.0.1")
        if spec["cluster"]["gpus_per_node"] > 0 and shutil.which("nvidia-smi") is None:
            raise MissingPrerequisite(
                "GPUs", f"{spec['framework']['name']} with cluster.gpus_per_node="
                f"{spec['cluster']['gpus_per_node']} needs NVIDIA GPUs and this machine has none "
                "(no nvidia-smi); run the CPU rehearsal (PRESET=rehearsal) or pick INFRA=gcp|aws|kuberay|...")
        env = {**os.environ, **_cluster_env(spec, out)}
        up = subprocess.run([str(LOCAL_CLUSTER), "up"], env=env, check=False)
        if up.returncode != 0:
            print(f"local: the cluster did not form (exit {up.returncode}); `make down RUN_ID="
                  f"{spec['run']['id']}` removes what was created", file=sys.stderr)
            return up.returncode
        entry = f"bash {out / 'job.sh'}"
        rc = self._job(spec, out, "submit", f"--entrypoint={entry}",
                       f"--env_json={json.dumps(_job_env(spec, self._info(out)))}", f"--secrets={','.join(spec['secrets'])}")
        if rc != 0:
            return rc
        rc = self._job(spec, out, "follow")
        self._summary(spec, out)
        return rc

    def _summary(self, spec: dict, out: Path) -> None:
        run_dir = Path(spec["paths"]["run_dir"])
        from ..summary import closing_summary

        print(closing_summary(spec, run_dir, out))

    def status(self, spec: dict, out: Path) -> int:
        env = {**os.environ, **_cluster_env(spec, out)}
        rc = subprocess.run([str(LOCAL_CLUSTER), "status"], env=env, check=False).returncode
        if (state_dir(out) / "cluster.json").exists():
            rc = self._job(spec, out, "status") or rc
        return rc

    def logs(self, spec: dict, out: Path) -> int:
        return self._job(spec, out, "follow")

    def down(self, spec: dict, out: Path) -> int:
        env = {**os.environ, **_cluster_env(spec, out)}
        return subprocess.run([str(LOCAL_CLUSTER), "down"], env=env, check=False).returncode

    def dashboard(self, spec: dict, out: Path) -> int:
        print(f"local: Ray dashboard at {self._address(out)} (inside the head's network namespace: "
              f"scripts/local-cluster exec 0 -- curl {self._address(out)})")
        return 0


BACKEND = Local()

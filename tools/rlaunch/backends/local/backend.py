"""INFRA=local: a real multi-node Ray cluster on this machine, one node per network namespace.

The cluster comes from scripts/local-cluster (which runs scripts/ray-up in every namespace, the same
bootstrap SkyPilot nodes run); the job goes in through Ray's job API from inside the head's namespace,
because the bridge has no address on the host. The cluster is named after the run id, and
local-cluster finds it on the host from that name alone (namespaces rl-<run_id>-*, its host dir under
/tmp), so status/logs/down need no build/. The run directory (reports, logs/job.log) is on the
repository's build/storage, the local "shared storage".

A run id is used once: a launch holds /tmp/rl<hash>.lock (the cluster's name hash) while it runs, so a
second launch of the same RUN_ID is refused at once, and a RUN_ID whose run directory exists is
refused unless RESUME=1, which continues it from its last checkpoint on a fresh cluster. When the
launch cannot go on, it frees every node itself: a cluster that did not form, a lost node (named
from Ray's GCS by the job's node watch, or, for the head, from the host), a stall (named by the job's
stall watch, its evidence in the run directory), Ctrl-C.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT, SCRIPTS, progress
from rlaunch.backends.base import Answer, Backend, LaunchPlan, Place, Run, RunHandle
from rlaunch.backends.local import forward
from rlaunch.config import load as config
from rlaunch.errors import EXIT_NODE_LOST, ConfigError, MissingPrerequisite, RlaunchError
from rlaunch.config import code, inputs, topology
from rlaunch.job import attempts, checkpoints, data, phases
from rlaunch.plan import artifacts, jobenv, tracking
from rlaunch.registry import frameworks
from rlaunch.verify.summary import closing_summary

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

LOCAL_CLUSTER = SCRIPTS / "local-cluster"
LIST_ASKED = "scripts/local-cluster list (namespaces rl-* in `ip netns list`, /tmp/rl*/cluster.json)"


def cluster_name(run_id: str) -> str:
    """The run id itself (local-cluster takes 40 of [a-z0-9-], as run ids are): `ip netns` shows
    rl-<run_id>-0, and the cluster is found again from the id alone."""
    return run_id


def state_dir(out: Path | None, run_id: str) -> Path:
    """The logs of the nodes' ray-up, beside the artifacts (build/<run_id>/cluster)."""
    return (out or ROOT / "build" / run_id) / "cluster"


def _cluster_env(spec: Spec, out: Path | None) -> dict[str, str]:
    cluster = spec.cluster
    env = {
        "RLAUNCH_CLUSTER_NAME": cluster_name(spec.run.id),
        "RLAUNCH_NODES": str(cluster.nodes),
        "RLAUNCH_STATE_DIR": str(state_dir(out, spec.run.id)),
        "RLAUNCH_RAY": str(Path(sys.executable).parent / "ray"),
        "RLAUNCH_DEADLINE_S": str(cluster.formation_timeout_s),
        "RLAUNCH_GPUS_PER_NODE": str(cluster.gpus_per_node),
        **spec.derived.ray_health_env,  # cluster.health_check: the head's GCS reads it (ray-up)
    }
    # Ports only when changed from the defaults: in loopback mode local-cluster derives free ones
    # from the name.
    defaults = config.read_defaults()["cluster"]
    if cluster.ray_port != defaults["ray_port"]:
        env["RLAUNCH_RAY_PORT"] = str(cluster.ray_port)
    if cluster.dashboard_port != defaults["dashboard_port"]:
        env["RLAUNCH_DASHBOARD_PORT"] = str(cluster.dashboard_port)
    if cluster.cpus_per_node:
        env["RLAUNCH_NUM_CPUS"] = str(cluster.cpus_per_node)
    if spec.train.rehearse:
        # The rehearsal's Ray (the same pin) from its own venv, whose Python every Ray worker then
        # runs; each node declares the GPUs verl schedules on (topology.gpus_per_node).
        env["RLAUNCH_RAY"] = str(_rehearsal_bin(spec) / "ray")
        env["RLAUNCH_NUM_GPUS"] = env["RLAUNCH_GPUS_PER_NODE"] = str(topology.gpus_per_node(spec))
    return env


def _handle_env(run: RunHandle) -> dict[str, str]:
    """What local-cluster needs to find a cluster that is up (status, info, exec, down): its name;
    everything else it reads from the cluster's host dir."""
    return {"RLAUNCH_CLUSTER_NAME": run.name,
            "RLAUNCH_STATE_DIR": str(state_dir(Path(run.out) if run.out else None, run.run_id))}


class _Cluster:
    """scripts/local-cluster for one cluster, with the environment that names it (and, for `up`,
    shapes it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, *args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[Any]:
        if not LOCAL_CLUSTER.exists():
            raise MissingPrerequisite("scripts/local-cluster", "the repository is incomplete")
        return subprocess.run([str(LOCAL_CLUSTER), *args], env={**os.environ, **self.env, **(env or {})},
                              check=False, **kw)

    def up(self) -> bool:
        return self.run("info", capture_output=True).returncode == 0

    def info(self, run_id: str) -> dict[str, Any]:
        """cluster.json of the run's cluster, from the host (local-cluster info)."""
        proc = self.run("info", capture_output=True, text=True)
        if proc.returncode != 0:
            raise MissingPrerequisite(f"a local cluster for run {run_id}",
                                      f"none is up on this host ({_last_line(proc.stderr)}); `make launch` forms one")
        info: dict[str, Any] = json.loads(proc.stdout)
        return info

    def job(self, run_id: str, *args: str) -> int:
        """`rlaunch job ARGS` from the head's namespace, against the cluster's job API."""
        info = self.info(run_id)
        argv = [sys.executable, "-m", "rlaunch", "job", *args,
                f"--address=http://{info['head_ip']}:{info['dashboard_port']}", f"--submission_id={run_id}"]
        return self.run("exec", "0", "--", *argv).returncode


def _rehearsal_tmp(info: dict[str, Any]) -> str:
    path = Path(info["host_dir"]) / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def _rehearsal_bin(spec: Spec) -> Path:
    python: Path | None = frameworks.get(spec.framework.name).rehearsal_python()
    if python is None:
        raise ConfigError("train.rehearse", True, f"framework {spec.framework.name} has no rehearsal")
    return python.parent


def _stage_code(spec: Spec) -> None:
    """CODE's pack (the plan's hash, packed again) into the host's storage at paths.code_dir."""
    packed = code.of(spec)
    if packed is not None:
        copied = code.stage(packed, spec.paths.code_dir)
        print(f"local: code {packed.hash[:12]} {'staged' if copied else 'already'} at {spec.paths.code_dir}")


def _job_env(spec: Spec, info: dict[str, Any]) -> dict[str, str]:
    # CODE first on every Ray process's path: the job's runtime env reaches its workers on every node.
    path = [p for p in (spec.paths.code_dir, str(ROOT / "tools")) if p]
    env = {
        "RLAUNCH_HOME": str(ROOT), "RLAUNCH_PYTHON": sys.executable,
        "PYTHONPATH": ":".join(path), "PYTHONUNBUFFERED": "1",
        # Every actor of the job connects to this cluster, even with other Ray clusters on the host.
        "RAY_ADDRESS": f"{info['head_ip']}:{info['ray_port']}",
        # All namespaces share the host's name, which /etc/hosts maps to 127.0.0.1: without this,
        # Gloo ranks advertise loopback and never reach each other across nodes.
        "GLOO_SOCKET_IFNAME": "eth0" if info["mode"] == "netns" else "lo",
        **tracking.wandb_env(spec),
    }
    if spec.train.rehearse:
        # The entrypoint's python3 and the prepare step: the rehearsal's venv.
        env["PATH"] = f"{_rehearsal_bin(spec)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        # job.sh exports the framework's env to the driver only; verl's workers (the CPU platform
        # module in VERL_USE_EXTERNAL_MODULES) are Ray's, started by the nodes' raylets.
        env = jobenv.job_env(spec, env)
        # vLLM's IPC sockets and verl's checkpoint locks go to tempfile.gettempdir(): under the
        # cluster's host dir, which `make down` removes, not loose in /tmp.
        env["TMPDIR"] = _rehearsal_tmp(info)
    if info.get("nodes"):  # the node watch names a lost node by its rank: the IPs in rank order
        env["RLAUNCH_NODE_IPS"] = ",".join(n["ip"] for n in info["nodes"])
    return env


# After a lost node (postflight has run) or Ctrl-C (the job was stopped) nothing is left to shut
# down gracefully: KILL at once, every second of idle nodes is paid for.
FAST_GRACE_S = "0"


def _resume_hint(spec: Spec) -> str:
    """`make launch RUN_ID=x RESUME=1` continues it from step N (its last complete checkpoint)."""
    try:
        found, _ = checkpoints.latest(spec, Path(spec.paths.run_dir))
    except (OSError, KeyError, ValueError):
        found = None
    where = f"step {found.step}, its last checkpoint" if found else "step 0 (it has no checkpoint yet)"
    return f"`make launch RUN_ID={spec.run.id} RESUME=1` continues the run from {where}"


class RunInUse(RlaunchError):
    """Another launch of the same run id holds it (exit 2: nothing was written)."""


def lock_path(run_id: str) -> Path:
    """/tmp/rl<6 hex of sha1(name)>.lock, beside local-cluster's host dir of the same cluster."""
    return Path(f"/tmp/rl{hashlib.sha1(cluster_name(run_id).encode()).hexdigest()[:6]}.lock")


def _first_diff(old: object, new: object, prefix: str = "") -> tuple[str, object, object] | None:
    """The first dotted key whose value differs between two specs (None: the same)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_diff(old.get(key), new.get(key), f"{prefix}{key}.")
            if found:
                return found
        return None
    return None if old == new else (prefix.rstrip("."), old, new)


# The head's ray-up logs `ray-up: 1/2 nodes joined, ...` on each change while the cluster forms.
JOINED = re.compile(r"ray-up: (?P<n>\d+)/(?P<of>\d+) nodes joined")


def _read_lines(stream: Iterable[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _read_from(path: Path, offset: int) -> tuple[str, int]:
    """What was appended to path since offset (complete lines only), and the new offset."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return "", offset
    end = data.rfind(b"\n") + 1
    return data[:end].decode(errors="replace"), offset + end


class Local(Backend):
    name = "local"

    @contextlib.contextmanager
    def claim(self, spec: Spec, resume: bool = False) -> Iterator[None]:
        """The run is this launch's while it runs: a second launch of the same RUN_ID is refused at
        once, a used one is refused unless RESUME=1, which must continue it with the same config."""
        run_id, run_dir = spec.run.id, Path(spec.paths.run_dir)
        path = lock_path(run_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
                raise RunInUse(f"run {run_id}: another launch of it is running ({holder}; lock {path}): "
                               "wait for it to end, or stop it (Ctrl-C, `make down RUN_ID="
                               f"{run_id}`); nothing was written") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, since {attempts.now_iso()}\n".encode(), 0)
            self._check_reuse(spec, run_dir, resume)
            left = _Cluster(_cluster_env(spec, None)) if resume else None
            if left is not None and left.up():
                print(f"local: RESUME=1: taking down what is left of run {run_id}'s cluster first: "
                      "the run continues on fresh nodes")
                left.run("down", env={"RLAUNCH_STOP_GRACE_S": FAST_GRACE_S})
            yield
        finally:
            os.close(fd)  # releases the lock; the empty file stays (removing it would race)

    def _check_reuse(self, spec: Spec, run_dir: Path, resume: bool) -> None:
        run_id = spec.run.id
        history = attempts.summary(attempts.read(run_dir))["attempts"] if run_dir.is_dir() else []
        if run_dir.is_dir() and not resume:
            last = ""
            if history and history[-1]["nodes_lost"]:
                last = f" (attempt {history[-1]['attempt']} lost node {history[-1]['nodes_lost'][0].get('ip')})"
            elif history and history[-1].get("stalled"):
                last = f" (attempt {history[-1]['attempt']} stalled at step {history[-1]['stalled'].get('step')})"
            elif history and history[-1].get("exit_code") is not None:
                last = f" (attempt {history[-1]['attempt']} ended with exit code {history[-1]['exit_code']})"
            raise ConfigError("RUN_ID", run_id, f"a new run id: run {run_id} already has {run_dir}{last}; "
                              + _resume_hint(spec))
        if not resume:
            return
        if not run_dir.is_dir():
            raise ConfigError("RESUME", "1", f"a run to continue: run {run_id} has no {run_dir} "
                              "(it never started); launch it without RESUME=1")
        try:
            old = json.loads((run_dir / "spec.json").read_text())
        except (OSError, ValueError):
            return  # the job never kept its spec: nothing to compare with
        # Compared as spec.json holds it; keys starting with "_" are annotations, not config, and
        # train.stall_timeout_s may change (after a false stall: RESUME=1 with a longer one).
        new = json.loads(artifacts.spec_json(spec))
        for tree in (old, new):
            tree.get("train", {}).pop("stall_timeout_s", None)
        diff = _first_diff({k: v for k, v in old.items() if not k.startswith("_")},
                           {k: v for k, v in new.items() if not k.startswith("_")})
        if diff:
            key, was, now = diff
            raise ConfigError("RESUME", "1", f"the config run {run_id} started with, to continue it: "
                              f"{key} was {was!r}, now {now!r} (launch a new RUN_ID to change it)")

    def render(self, spec: Spec) -> dict[str, str]:
        return artifacts.common(spec)

    def plan(self, spec: Spec, files: dict[str, str]) -> list[str]:
        out = spec.run.out
        staged = [f"stage CODE into {spec.paths.code_dir} (kept as it is when there: the name is the hash)"]
        converted = [f"data.prepare into {spec.pins.source.get('prepared')} (kept when its SHA256SUMS stamp matches)"]
        return [
            *(staged if spec.paths.code_dir else []),
            *(converted if spec.pins.source.get("prepared") else []),
            f"scripts/local-cluster up   ({spec.cluster.nodes} nodes, one network namespace each "
            f"(as root, or through passwordless sudo); one node on 127.0.0.1 without either)",
            f"ray job submit {spec.run.id}: bash {out}/job.sh   (from the head's namespace)",
            f"ray job logs --follow {spec.run.id}",
            f"then: make status / make logs / make down RUN_ID={spec.run.id}",
        ]

    def inputs_now(self, spec: Spec, files: dict[str, str]) -> list[str]:
        """The host store's stamps answer at once: each input's SHA256SUMS.stamp against a listing of it
        (rlaunch.job.data.check_stamp, what --check-stamp runs: no file read)."""
        lines = []
        for item in inputs.of(spec):
            why, count, _ = data.check_stamp(Path(item.dir))
            if not why:
                lines.append(f"{item.what}: prepared ({count} files match its {inputs.STAMP}): nothing to prepare")
                continue
            if spec.train.rehearse:
                then = "job.sh makes it before preflight"
            elif item.key == "data.prepare":
                then = "make launch runs data.prepare first, on this machine, before any node starts"
            else:  # nothing on INFRA=local fetches a model or dataset: the nodes' preflight would stop
                where = shlex.quote(item.dir)
                made = (f"{' '.join(item.fetch)} --out={where}" if item.fetch else
                        f"--adopt={where} --what={item.what}" if not count else
                        f"--check={where} --what={item.what}")  # a full check stamps what still matches
                then = f"preflight stops without it: `.venv/bin/python -m rlaunch.job.data {made}` first"
            lines.append(f"{item.what}: not prepared: {why}: {then}")
        return lines

    def resource_name(self, infra: str, run_id: str) -> str:
        return cluster_name(run_id)

    def launch(self, plan: LaunchPlan) -> int:
        spec, out = plan.spec, plan.out
        nodes = spec.cluster.nodes
        if nodes > 1 and (shutil.which("ip") is None or not (os.geteuid() == 0 or _passwordless_sudo())):
            raise MissingPrerequisite(
                f"root and `ip` for a {nodes}-node local cluster",
                "network namespaces need CAP_NET_ADMIN and iproute2: run as root (sudo make launch), "
                "or as a user with passwordless sudo (local-cluster then uses it for the namespaces "
                "and runs Ray as you), or NODES=1 for a one-node run on 127.0.0.1")
        if spec.cluster.gpus_per_node > 0 and shutil.which("nvidia-smi") is None:
            raise MissingPrerequisite(
                "GPUs", f"{spec.framework.name} with cluster.gpus_per_node="
                f"{spec.cluster.gpus_per_node} needs NVIDIA GPUs and this machine has none "
                "(no nvidia-smi); run the CPU rehearsal (PRESET=rehearsal) or pick INFRA=gcp|aws|kuberay|...")
        upload(spec)
        _stage_code(spec)  # before Ray starts: every namespace sees the host's storage
        prepare_data(spec)  # in CODE, on DATA: both there now
        submitted, run_id = False, spec.run.id
        cluster = _Cluster(_cluster_env(spec, out))
        try:
            formed = time.time()
            rc = self._form(spec, out)
            formation = (formed, time.time())
            if rc != 0:
                print(f"local: the cluster did not form (exit {rc}; each node's ray-up log: "
                      f"{state_dir(out, run_id) / 'logs'})", file=sys.stderr)
                self._free(cluster, run_id, "the cluster did not form")
                return rc
            entry = f"bash {out / 'job.sh'}"
            submitted = True
            env = {**_job_env(spec, cluster.info(run_id)),
                   phases.ENV: phases.launch_env(plan.started or formed, plan.planned or formed, formation, time.time())}
            rc = cluster.job(run_id, "submit", f"--entrypoint={entry}", f"--env_json={json.dumps(env)}",
                             f"--secrets={','.join(spec.secrets)}")
            if rc != 0:
                return rc
            rc = cluster.job(run_id, "follow")
        except KeyboardInterrupt:
            return self._interrupted(spec, cluster, submitted)
        if rc != 0:
            stalled = self._stalled(spec)
            if stalled:
                self._free(cluster, run_id, "the run stalled")
                self._summary(spec, out)
                print(f"local: stalled {stalled}", file=sys.stderr)
                print(f"local: {_resume_hint(spec)}", file=sys.stderr)
                return EXIT_NODE_LOST
            lost = self._lost_nodes(spec, cluster)
            if lost:
                # Every node freed first: the summary reads the run directory, which outlives them.
                self._free(cluster, run_id, "a node was lost")
                self._summary(spec, out)
                for line in lost:
                    print(f"local: node lost: {line}", file=sys.stderr)
                print(f"local: {_resume_hint(spec)}", file=sys.stderr)
                return EXIT_NODE_LOST
        self._summary(spec, out)
        return rc

    def _stalled(self, spec: Spec) -> str:
        """After a failed follow: the stall this attempt's stall watch named ('' if none)."""
        history = attempts.summary(attempts.read(Path(spec.paths.run_dir)))["attempts"]
        found = history[-1].get("stalled") if history else None
        return attempts.describe_stall(found) if found else ""

    def _lost_nodes(self, spec: Spec, cluster: _Cluster) -> list[str]:
        """After a failed follow: the nodes this attempt lost, as the job's node watch recorded them
        from Ray's GCS, or, with the head gone (and the watch with it), as the host sees them."""
        run_dir = Path(spec.paths.run_dir)
        history = attempts.summary(attempts.read(run_dir))["attempts"]
        recorded = history[-1]["nodes_lost"] if history else []
        lines = [attempts.describe_loss(loss) for loss in recorded]
        if recorded or not cluster.up():
            return lines
        status = cluster.run("status", capture_output=True, text=True)
        seen = {loss.get("ip") for loss in recorded}
        for row in status.stdout.splitlines():
            parts = row.split()
            if len(parts) == 4 and parts[0].isdigit() and parts[3] == "no" and parts[2] not in seen:
                rank = int(parts[0])
                role = "the head" if rank == 0 else "a worker"
                lines.append(f"{parts[2]} (rank {rank}, {role}), found without a raylet in {parts[1]} at "
                             f"{attempts.now_iso()}" + (": the job's driver and node watch ran there"
                                                         if rank == 0 else ""))
        return lines

    def _free(self, cluster: _Cluster, run_id: str, why: str) -> bool:
        """Take the cluster down at once (every node freed), or print the exact command that does."""
        down = f"make down RUN_ID={run_id}"
        try:
            proc = cluster.run("down", env={"RLAUNCH_STOP_GRACE_S": FAST_GRACE_S}, capture_output=True, text=True)
        except KeyboardInterrupt:
            print(f"local: {why}; interrupted while taking the cluster down: it may be left up, run `{down}`",
                  file=sys.stderr)
            return False
        if proc.returncode == 0:
            print(f"local: {why}: took the cluster down, every node freed ({_last_line(proc.stdout)})",
                  file=sys.stderr)
            return True
        print(f"local: {why}; the cluster could not be taken down ({_last_line(proc.stderr)}): run `{down}`",
              file=sys.stderr)
        return False

    def _interrupted(self, spec: Spec, cluster: _Cluster, submitted: bool) -> int:
        """Ctrl-C: stop the job, free every node, and say which of the two happened."""
        run_id = spec.run.id
        print(f"\nlocal: interrupted: stopping run {run_id} (Ctrl-C again leaves the cluster up)",
              file=sys.stderr)
        try:
            if submitted and cluster.up():
                cluster.job(run_id, "stop")
        except KeyboardInterrupt:
            print(f"local: interrupted again: the cluster of run {run_id} is left up; run "
                  f"`make down RUN_ID={run_id}`", file=sys.stderr)
            return 130
        except MissingPrerequisite:
            pass
        if self._free(cluster, run_id, "interrupted") and Path(spec.paths.run_dir).is_dir():
            print(f"local: {_resume_hint(spec)}", file=sys.stderr)
        return 130

    def _form(self, spec: Spec, out: Path) -> int:
        """`local-cluster up`, its output relayed above one progress line: nodes joined out of
        expected (from the head's ray-up log) and the time against the formation deadline."""
        if not LOCAL_CLUSTER.exists():
            raise MissingPrerequisite("scripts/local-cluster", "the repository is incomplete")
        env = {**os.environ, **_cluster_env(spec, out)}
        head_log = state_dir(out, spec.run.id) / "logs" / "node-0.log"
        head_log.unlink(missing_ok=True)  # `up` writes it afresh; an old one would show old counts
        proc = subprocess.Popen([str(LOCAL_CLUSTER), "up"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
        joined, offset = "", 0
        with progress.Wait(f"cluster {cluster_name(spec.run.id)}", spec.cluster.formation_timeout_s,
                           f"starting Ray on {spec.cluster.nodes} node(s)") as wait:
            while True:
                try:
                    line = lines.get(timeout=0.25)
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                if line:
                    wait.echo(line.rstrip("\n"))
                text, offset = _read_from(head_log, offset)
                for found in JOINED.finditer(text):
                    joined = f"{found['n']}/{found['of']} nodes joined"
                wait.update(joined or None)
        return proc.wait()

    def _summary(self, spec: Spec, out: Path) -> None:
        print(closing_summary(spec.run.id, spec.framework.name, spec.infra.name, Path(spec.paths.run_dir), out))

    # --- a run that is up, or was: the host answers ---------------------------------------------

    def runs(self, place: Place) -> Answer:
        proc = _Cluster({}).run("list", capture_output=True, text=True)
        if proc.returncode != 0:
            raise MissingPrerequisite("an answer from scripts/local-cluster list", _last_line(proc.stderr))
        runs = [_run(json.loads(line)) for line in proc.stdout.splitlines() if line.strip()]
        return Answer(LIST_ASKED, tuple(runs))

    def find(self, run: RunHandle) -> Answer:
        name = run.name
        asked = f"scripts/local-cluster for {name} (namespaces rl-{name}-* in `ip netns list`, its /tmp/rl* host dir)"
        return Answer(asked, tuple(r for r in self.runs(run.place).runs if r.run_id == name))

    def run_dirs(self, run: RunHandle) -> list[Path]:
        """The run's directories on the local shared storage (build/storage/runs/<name>/<run_id>)."""
        wanted = Path(run.run_dir) if run.run_dir else None
        found = [wanted] if wanted is not None and wanted.is_dir() else []
        runs = Path(run.place.storage) / "runs"
        found += [d for d in sorted(runs.glob(f"*/{run.run_id}")) if d.is_dir() and d != wanted]
        return found

    def status(self, run: RunHandle) -> int:
        cluster = _Cluster(_handle_env(run))
        proc = cluster.run("status", capture_output=True, text=True)
        if proc.returncode != 3:  # 3: not up
            print(proc.stdout, end="")
            print(proc.stderr, end="", file=sys.stderr)
            return cluster.job(run.run_id, "status") or proc.returncode
        dirs = self.run_dirs(run)
        print(f"local: no cluster of run {run.run_id} on this host ({_last_line(proc.stderr)})")
        for run_dir in dirs:
            print(f"local: run directory {run_dir}: {_verdict(run_dir)}")
        return 0 if dirs else 1

    def logs(self, run: RunHandle) -> int:
        cluster = _Cluster(_handle_env(run))
        if cluster.up():
            return cluster.job(run.run_id, "follow")
        # The cluster is gone: the job's log stayed in the run directory.
        for run_dir in self.run_dirs(run):
            log = run_dir / "logs" / "job.log"
            if log.is_file():
                print(f"local: no cluster of run {run.run_id} is up; its log from {log}:", file=sys.stderr)
                sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))
                return 0
        print(f"local: no cluster of run {run.run_id} on this host and no logs/job.log in a run "
              f"directory under {Path(run.place.storage) / 'runs'}", file=sys.stderr)
        return 1

    def down(self, run: RunHandle) -> int:
        # local-cluster removes what the host has under the run's name, and says so when nothing is there.
        cluster = _Cluster(_handle_env(run))
        up, started = cluster.up(), time.time()
        rc = cluster.run("down").returncode
        dirs = self.run_dirs(run)
        run_dir = dirs[0] if dirs else None
        if rc == 0 and up and run_dir is not None and (run_dir / phases.FILE).is_file():
            # The run's last phase: its cluster taken down (verification.json's phases gain it).
            phases.mark(run_dir, "down", "start", started)
            phases.mark(run_dir, "down", "end")
            phases.report(run_dir, quiet=True)
        return rc

    def dashboard(self, run: RunHandle, port: int | None = None) -> int:
        """Forward 127.0.0.1:<port> on the host to the head's dashboard until Ctrl-C: the nodes stay
        off the host's network. On loopback the dashboard already listens on 127.0.0.1."""
        info = _Cluster(_handle_env(run)).info(run.run_id)
        target_port = int(info["dashboard_port"])
        run_id = run.run_id

        def banner(url: str, answer: bytes) -> str:
            try:
                version = " (Ray " + json.loads(answer).get("ray_version", "?") + ")"
            except ValueError:
                version = ""
            return (f"local: Ray dashboard of run {run_id}{version}: open {url}\n"
                    f"local: forwarding to {info['head_ip']}:{target_port} in the head's network "
                    "namespace; Ctrl-C stops it")

        if info["mode"] != "netns":
            url = f"http://127.0.0.1:{target_port}"
            try:
                answer = forward.http_get(f"{url}/api/version")
            except OSError as err:
                raise MissingPrerequisite(f"an answer from {url}/api/version ({err})",
                                          "the cluster's head is not serving it: `make status`") from None
            print(banner(url, answer).splitlines()[0] + " (loopback: no forward needed)")
            return 0
        head_ns = info["nodes"][0]["ns"]
        return forward.forward(head_ns, info["head_ip"], target_port,
                               target_port if port is None else port, "/api/version", banner)


def upload(spec: Spec) -> None:
    """DATA= a file or directory of this machine: copied into the local storage once, before any node
    starts (rlaunch.job.data.upload: atomic; one already there and intact is kept)."""
    source = spec.pins.source
    if source.get("kind") != "local":
        return
    done = data.upload(Path(source["local"]), Path(source["dir"]), source["sha256"])
    print(f"local: dataset {source['local']} -> {done['dir']}: "
          + (f"{done['copied']} file{'s' if done['copied'] > 1 else ''} copied" if done["copied"]
             else "already there, nothing copied"))


def prepare_data(spec: Spec) -> None:
    """data.prepare: its output made once on the local storage (one whose SHA256SUMS stamp matches is kept)."""
    source = spec.pins.source
    if not source.get("prepared"):
        return
    out = Path(source["prepared"])
    if not data.check_stamp(out)[0]:
        print(f"local: data.prepare's output {out} is there (its SHA256SUMS stamp matches), nothing converted")
        return
    done = data.run_prepare(shlex.split(source["prepare"]), Path(source["dir"]), out, Path(spec.paths.code_dir))
    print(f"local: data.prepare `{source['prepare']}` -> {done['dir']} ({done['files']} files)")


def _passwordless_sudo() -> bool:
    """sudo works here without a prompt and may keep the environment, as scripts/local-cluster asks it."""
    if not (shutil.which("sudo") and shutil.which("setpriv")):
        return False
    probe = subprocess.run(["sudo", "-n", "--preserve-env", "true"], stdin=subprocess.DEVNULL,
                           capture_output=True, check=False, timeout=30)
    return probe.returncode == 0


def _run(entry: dict[str, Any]) -> Run:
    nodes, alive = entry["nodes"], entry["alive"]
    if alive < 0:
        state = "unknown (needs root)"
    elif alive == nodes:
        state = "up"
    elif alive:
        state = f"degraded ({alive}/{nodes} alive)"
    else:
        state = "stopped (no raylet)"
    if not entry["record"]:
        state += ", no host record"
    where = (f"namespaces rl-{entry['name']}-*" if entry["mode"] == "netns" else "one node on 127.0.0.1")
    return Run(run_id=entry["name"], infra="local", state=state, where=where, nodes=nodes,
               gpus_per_node=entry["gpus_per_node"], created=entry["created"], kind=entry["mode"])


def _verdict(run_dir: Path) -> str:
    try:
        report = json.loads((run_dir / "verification.json").read_text())
    except (OSError, ValueError):
        return "no verification.json (the job did not reach postflight)"
    if report.get("passed"):
        return "verification passed"
    failed = [c.get("name", "?") for c in report.get("checks", []) if not c.get("passed")]
    return "verification FAILED: " + ", ".join(failed)


def _last_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else "no output"


BACKEND = Local()

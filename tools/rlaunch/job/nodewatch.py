"""The job's node watch: runs the framework entrypoint and watches every node of the Ray cluster in
Ray's own node table (the GCS). A node that leaves during training is named, from what Ray recorded
(IP, rank, when the GCS declared it dead, and why), in <run_dir>/attempts.jsonl, and the framework
is stopped at once instead of waiting for a collective's timeout (NCCL's default is 10 minutes,
Ray Train's process group 30): the job then fails within seconds of Ray's own verdict.

A framework can fail before the GCS declares the node dead (gloo sees its peer's connection reset
at once). When the entrypoint exits non-zero, each node's raylet is probed (a TCP connect to its
node manager port); one that no longer answers is waited for, up to RLAUNCH_CONFIRM_S, until the
GCS declares it dead, so the failure is still named after the node, not after its symptom.

Beside it, the stall watch (rlaunch.job.stall, with --spec): after this attempt's first step, no new
step in the framework's own outputs for the run's stall timeout is a stall. It is named
(`stalled at step S: no step for N s (median step M s, timeout T s)`), the evidence is kept under
<run_dir>/stacks/attempt-N/ (rlaunch.verify.stacks: every framework process's Python stack on every
node, nvidia-smi, the last lines of their logs; at most RLAUNCH_STACKS_TIMEOUT_S), recorded in
attempts.jsonl, and the framework is stopped: exit 75, as for a lost node, so a restart resumes from
the last checkpoint. When the watch ends, what it saw (steps, median step, the gap nearest its
timeout) is recorded too.

Usage: python -m rlaunch.job.nodewatch --run-dir DIR [--spec SPEC] -- CMD [ARGS...]
Env:
  RAY_ADDRESS           the cluster's GCS, host:port (set on the head by every launch path); unset:
                        CMD runs unwatched, and this says so
  RLAUNCH_NODE_IPS, SKYPILOT_NODE_IPS
                        node IPs in rank order (newline, comma or space separated): a lost node's
                        rank; without them the head is rank 0 and the others follow in join order
  RLAUNCH_WATCH_POLL_S  seconds between looks at the node table (default 0.5)
  RLAUNCH_CONFIRM_S     after CMD failed: how long to wait for the GCS to declare an unreachable
                        node dead (default 30)
  RLAUNCH_GCS_GRACE_S   the GCS not answering for this long counts as losing the head (default 20)
  RLAUNCH_STACKS_TIMEOUT_S  after a stall: how long collecting the evidence may take (default 90)
Exit: CMD's exit code; 75 when a node was lost or the run stalled (EX_TEMPFAIL: the run can resume on
  a new cluster); 2 bad arguments.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.config import ckptsize, specjson
from rlaunch.errors import EXIT_NODE_LOST
from rlaunch.job import attempts, stall

PROG = "rlaunch-nodewatch"
STOP_GRACE_S = 5.0


def say(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = -1
    if value <= 0:
        say(f"{name}={raw!r} is not allowed: need a number of seconds > 0; using {default}")
        return default
    return value


def node_ips() -> list[str]:
    raw = os.environ.get("RLAUNCH_NODE_IPS") or os.environ.get("SKYPILOT_NODE_IPS") or ""
    return [ip for ip in re.split(r"[\s,]+", raw) if ip]


# ---------------------------------------------------------------- Ray's node table


def connect(address: str) -> Any:
    """A GCS client, as scripts/ray-up polls it: no driver, no job, about a second to import."""
    from ray import _raylet

    inner = getattr(_raylet, "InnerGcsClient", None)
    if inner is not None and hasattr(inner, "standalone"):
        return inner.standalone(address, None, 2000)
    return _raylet.GcsClient(address=address)  # type: ignore[attr-defined]  # ray's _raylet.pyi lacks it


def _hex(node_id: object) -> str:
    return node_id.hex() if isinstance(node_id, (bytes, bytearray)) else str(node_id)


def _reason(info: Any) -> str:
    death = getattr(info, "death_info", None)
    code = getattr(death, "reason", 0)
    try:
        from ray.core.generated import common_pb2

        name = common_pb2.NodeDeathInfo.Reason.Name(code)
    except (ImportError, ValueError, AttributeError):
        name = str(code)
    message = getattr(death, "reason_message", "") or ""
    return f"{name}: {message}" if message else name


def nodes(client: Any) -> dict[str, dict[str, Any]]:
    """node id -> what Ray records of it: ip, port, alive, head, started/ended (epoch s), reason."""
    reply = client.get_all_node_info(timeout=2)
    infos = reply.values() if hasattr(reply, "values") else reply.node_info_list
    out = {}
    for n in infos:
        out[_hex(n.node_id)] = {
            "node_id": _hex(n.node_id), "ip": n.node_manager_address, "port": int(n.node_manager_port),
            "alive": n.state == 0, "head": bool(getattr(n, "is_head_node", False)),
            "start": (n.start_time_ms or 0) / 1000, "end": (n.end_time_ms or 0) / 1000,
            "reason": "" if n.state == 0 else _reason(n),
        }
    return out


def ranks(known: dict[str, dict[str, Any]], ips: list[str]) -> dict[str, tuple[int, str]]:
    """node id -> (rank, how it was known): the launch's IP order, else the head then join order."""
    out = {}
    order = sorted(known.values(), key=lambda n: (not n["head"], n["start"]))
    for i, node in enumerate(order):
        if node["ip"] in ips:
            out[node["node_id"]] = (ips.index(node["ip"]), "launch order")
        else:
            out[node["node_id"]] = (i, "head first, then join order")
    return out


def loss_record(node: dict[str, Any], rank: tuple[int, str] | None, detected: float) -> dict[str, Any]:
    return {"event": "node_lost", "ip": node["ip"], "rank": rank[0] if rank else None,
            "rank_from": rank[1] if rank else None, "node_id": node["node_id"], "head": node["head"],
            "declared_dead_at": attempts.now_iso(node["end"]) if node.get("end") else None,
            "reason": node.get("reason") or "", "detected_at": attempts.now_iso(detected)}


def reachable(node: dict[str, Any], timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((node["ip"], node["port"]), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------- the framework process


def _tree(pid: int) -> list[Any]:
    try:
        import psutil  # Ray's own dependency: wherever Ray runs, this does

        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except Exception:  # noqa: BLE001 - gone already, or no psutil: the child alone
        return []


def stop(child: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """TERM the framework and everything it started, KILL what is left after grace_s. A stopped
    process (a frozen one) is continued after the TERM, so it can take it."""
    procs = _tree(child.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        targets = procs or [child]
        for proc in targets:
            for each in (sig, signal.SIGCONT):
                try:
                    proc.send_signal(each)
                except Exception:  # noqa: BLE001 - exited meanwhile
                    pass
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            # The child is gone; its descendants get the same grace, then KILL.
            end = time.monotonic() + grace_s
            while any(_alive(p) for p in procs) and time.monotonic() < end:
                time.sleep(0.2)
            if not any(_alive(p) for p in procs):
                return


def _alive(proc: Any) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != "zombie")
    except Exception:  # noqa: BLE001
        return False


class Watch:
    def __init__(self, run_dir: Path, address: str):
        self.run_dir, self.address = Path(run_dir), address
        self.poll_s = _float_env("RLAUNCH_WATCH_POLL_S", 0.5)
        self.confirm_s = _float_env("RLAUNCH_CONFIRM_S", 30.0)
        self.gcs_grace_s = _float_env("RLAUNCH_GCS_GRACE_S", 20.0)
        self.ips = node_ips()
        self.client = None
        self.known: dict[str, dict[str, Any]] = {}  # every node seen alive during this attempt
        self.failing_since: float | None = None

    def look(self) -> list[dict[str, Any]]:
        """Poll the node table once: the nodes seen alive before that are now dead."""
        try:
            if self.client is None:
                self.client = connect(self.address)
            table = nodes(self.client)
        except Exception as err:  # noqa: BLE001 - the GCS may be briefly busy
            self.client = None
            self.failing_since = self.failing_since or time.monotonic()
            self.gcs_error = str(err).strip().splitlines()[-1][:200] if str(err).strip() else type(err).__name__
            return []
        self.failing_since = None
        lost = [n for nid, n in table.items() if not n["alive"] and nid in self.known and self.known[nid]["alive"]]
        for nid, n in table.items():
            if n["alive"] or nid in self.known:
                self.known[nid] = n
        return lost

    def gcs_gone(self) -> dict[str, Any] | None:
        if self.failing_since is None or time.monotonic() - self.failing_since < self.gcs_grace_s:
            return None
        head = next((n for n in self.known.values() if n["head"]), None) or \
            {"node_id": "", "ip": self.address.rsplit(":", 1)[0], "head": True, "start": 0, "end": 0}
        return {**head, "alive": False, "end": 0,
                "reason": f"the GCS at {self.address} stopped answering for {self.gcs_grace_s:.0f} s "
                          f"({getattr(self, 'gcs_error', '')})"}

    def record(self, lost: list[dict[str, Any]], detected: float) -> None:
        table = ranks(self.known, self.ips)
        attempt = attempts.current(self.run_dir)
        for node in lost:
            rec = {**loss_record(node, table.get(node["node_id"]), detected), "attempt": attempt}
            try:
                attempts.append(self.run_dir, rec)
            except OSError as err:
                say(f"could not record the loss in {self.run_dir / attempts.FILE}: {err}")
            say(f"node lost: {attempts.describe_loss(rec)}")

    def confirm(self) -> list[dict[str, Any]]:
        """After the framework failed: nodes whose raylet no longer answers, once the GCS says so."""
        suspects = [n for n in self.known.values() if n["alive"] and not reachable(n)]
        if not suspects:
            return []
        say(f"{', '.join(n['ip'] for n in suspects)} no longer answer(s); waiting up to "
            f"{self.confirm_s:.0f} s for Ray's GCS to declare it")
        end = time.monotonic() + self.confirm_s
        while time.monotonic() < end:
            lost = self.look()
            if lost:
                return lost
            time.sleep(self.poll_s)
        return [{**n, "alive": False, "end": 0,
                 "reason": f"its raylet {n['ip']}:{n['port']} stopped answering; the GCS had not declared "
                           f"it dead after {self.confirm_s:.0f} s"} for n in suspects]


STACKS_S = 90.0


def stall_watch(spec_path: Path | None, run_dir: Path, started: float) -> stall.Watch | None:
    """The stall watch for this attempt (None: no spec, no step source, or train.stall_timeout_s=-1)."""
    if spec_path is None:
        return None
    try:
        spec = specjson.read(spec_path)
        source = stall.source(spec, run_dir)
        if source is None:
            say(f"{spec.framework.name} declares no step source: running without the stall watch")
            return None
        write_s = 0.0
        if not stall.policy(spec).off and spec.train.stall_timeout_s == 0:
            est = ckptsize.of(spec, offline=True)
            write_s = est.write_s(spec.derived.ray_nodes) if not isinstance(est, str) else 0.0
        starts = [r for r in attempts.read(run_dir) if r.get("event") == "start"]
        resume = int(starts[-1].get("resume_step") or 0) if starts else 0
        return stall.Watch(source, stall.policy(spec, write_s), resume_step=resume, started=started)
    except Exception as err:  # noqa: BLE001 - the watch must never stop the run it watches
        say(f"running without the stall watch: {type(err).__name__}: {err}")
        return None


def evidence(spec_path: Path, run_dir: Path, attempt: int, driver: int) -> dict[str, Any]:
    """rlaunch.verify.stacks into <run_dir>/stacks/attempt-N, bounded; what it wrote (or why not)."""
    out = Path(run_dir) / "stacks" / f"attempt-{attempt}"
    limit = _float_env("RLAUNCH_STACKS_TIMEOUT_S", STACKS_S)
    argv = [sys.executable, "-m", "rlaunch.verify.stacks", "--spec", str(spec_path), "--out", str(out),
            "--driver-pid", str(driver), "--timeout", str(max(limit - 10, 5))]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit, check=False)
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        if done.returncode != 0 and not found:
            found = {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]}
    except subprocess.TimeoutExpired:
        found = {"error": f"not finished after {limit:.0f} s"}
    except (OSError, ValueError) as err:
        found = {"error": f"{type(err).__name__}: {err}"}
    return {"stacks": str(out), "evidence_s": round(time.monotonic() - started, 1), **found}


def stalled(record: dict[str, Any], child: subprocess.Popen[bytes], run_dir: Path, spec_path: Path,
            seen: dict[str, Any] | None = None) -> int:
    """Name the stall, keep its evidence, stop the framework: 75."""
    detected = time.time()
    say(stall.describe(record))
    attempt = attempts.current(run_dir)
    say(f"keeping the evidence in {Path(run_dir) / 'stacks' / f'attempt-{attempt}'} (stacks of every "
        "framework process on every node, their logs' last lines)")
    found = evidence(spec_path, run_dir, attempt, child.pid)
    rec = {"event": "stalled", "attempt": attempt, **record, "detected_at": attempts.now_iso(detected), **found,
           "watch": seen or {}}  # what the watch saw before: the gap nearest its timeout until then
    try:
        attempts.append(run_dir, rec)
    except OSError as err:
        say(f"could not record the stall in {Path(run_dir) / attempts.FILE}: {err}")
    what = f"{found.get('processes', 0)} stacks from {found.get('nodes', 0)} node(s)" if "error" not in found \
        else f"the evidence is incomplete: {found['error']}"
    say(f"stopping the framework (pid {child.pid}): it stalled; {what} in {found['stacks']}")
    if child.poll() is None:
        stop(child)
    return EXIT_NODE_LOST


def record_watch(run_dir: Path, progress: stall.Watch | None) -> None:
    if progress is None:
        return
    try:
        attempts.append(run_dir, {"event": "progress", "attempt": attempts.current(run_dir), **progress.summary()})
    except OSError:
        pass


def run(cmd: list[str], run_dir: Path, spec_path: Path | None = None) -> int:
    address = os.environ.get("RAY_ADDRESS", "")
    address = re.sub(r"^(ray|https?)://", "", address)
    started = time.monotonic()
    child = subprocess.Popen(cmd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    progress = stall_watch(spec_path, run_dir, started)
    watch: Watch | None = None
    if not address or address == "auto":
        say("RAY_ADDRESS is not host:port: running without the node watch")
    else:
        watch = Watch(run_dir, address)
    lost: list[dict[str, Any]] = []
    while (rc := child.poll()) is None:
        if watch is not None:
            lost = watch.look()
            gone = watch.gcs_gone()
            if gone:
                lost = [gone]
            if lost:
                break
        found = progress.look() if progress is not None else None
        if found is not None and spec_path is not None:
            return stalled(found, child, run_dir, spec_path, progress.summary() if progress is not None else None)
        time.sleep(watch.poll_s if watch is not None else 0.5)
    if progress is not None and rc is not None:
        progress.look()  # the last steps it wrote before exiting
        progress.close()
        record_watch(run_dir, progress)
    if watch is None:
        return rc if rc is not None else child.wait()
    if not lost and rc not in (None, 0):
        lost = watch.confirm()
    if not lost:
        return rc if rc is not None else child.wait()
    detected = time.time()
    watch.record(lost, detected)
    if child.poll() is None:
        say(f"stopping the framework (pid {child.pid}): the run cannot go on without "
            f"{'that node' if len(lost) == 1 else 'those nodes'}")
        stop(child)
    return EXIT_NODE_LOST


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print(__doc__.split("Usage:")[1].split("\n")[0].strip(), file=sys.stderr)
        return 2
    sep = argv.index("--")
    parser = cmdline.parser(PROG)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--spec", type=Path, help="the run's spec.json: with it, the stall watch")
    args = parser.parse_args(argv[:sep])
    cmd = argv[sep + 1:]
    if not cmd:
        print(f"{PROG}: no command after --", file=sys.stderr)
        return 2
    return run(cmd, args.run_dir, args.spec)


if __name__ == "__main__":
    sys.exit(main())

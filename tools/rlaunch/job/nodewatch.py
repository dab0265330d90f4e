"""The job's node watch: runs the framework entrypoint and watches every node of the Ray cluster in
Ray's own node table (the GCS). A node that leaves during training is named, from what Ray recorded
(IP, rank, when the GCS declared it dead, and why), in <run_dir>/attempts.jsonl, and the framework
is stopped at once instead of waiting for a collective's timeout (NCCL's default is 10 minutes,
Ray Train's process group 30): the job then fails within seconds of Ray's own verdict.

A framework can fail before the GCS declares the node dead (gloo sees its peer's connection reset
at once). When the entrypoint exits non-zero, each node's raylet is probed (a TCP connect to its
node manager port); one that no longer answers is waited for, up to RLAUNCH_CONFIRM_S, until the
GCS declares it dead, so the failure is still named after the node, not after its symptom.

Usage: python -m rlaunch.job.nodewatch --run-dir DIR -- CMD [ARGS...]
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
Exit: CMD's exit code; 75 when a node was lost (EX_TEMPFAIL: the run can resume on a new cluster);
  2 bad arguments.
"""

from __future__ import annotations

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
from rlaunch.errors import EXIT_NODE_LOST
from rlaunch.job import attempts

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
    """TERM the framework and everything it started, KILL what is left after grace_s."""
    procs = _tree(child.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        targets = procs or [child]
        for proc in targets:
            try:
                proc.send_signal(sig)
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


def run(cmd: list[str], run_dir: Path) -> int:
    address = os.environ.get("RAY_ADDRESS", "")
    address = re.sub(r"^(ray|https?)://", "", address)
    child = subprocess.Popen(cmd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    if not address or address == "auto":
        say("RAY_ADDRESS is not host:port: running without the node watch")
        return child.wait()
    watch = Watch(run_dir, address)
    lost: list[dict[str, Any]] = []
    while (rc := child.poll()) is None:
        lost = watch.look()
        gone = watch.gcs_gone()
        if gone:
            lost = [gone]
        if lost:
            break
        time.sleep(watch.poll_s)
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
    args = parser.parse_args(argv[:sep])
    cmd = argv[sep + 1:]
    if not cmd:
        print(f"{PROG}: no command after --", file=sys.stderr)
        return 2
    return run(cmd, args.run_dir)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""ray-up's talk with the head's GCS: the head's formation poll and a worker's join.

scripts/ray-up is the orchestrator (inputs, `ray start` of the head, the state file, the lock, the
exit codes); it runs this file with the interpreter of RLAUNCH_RAY (RLAUNCH_RAY_PYTHON) on nodes
that may not have rlaunch installed, so it needs only the standard library and that Ray. It asks
the GCS directly, with no driver and no job: `ray status` costs 3-4 s a call.

Usage:
  ray_up.py cluster HOST PORT NODES GPUS CPUS DEADLINE IPS START
      The head's formation poll, about twice a second, until NODES alive nodes with GPUS GPUs and
      CPUS CPUs in total are registered; then prints "NODES GPUS CPUS" on stdout. Each change, and
      every 30 s without one, is logged on stderr. IPS: the expected nodes' IPs, comma-separated
      (those missing are named); DEADLINE and START: epoch seconds.
  ray_up.py join HOST PORT DEADLINE -- RAY_START_ARGS...
      A worker's `ray start`. Ray's own start waits for the head's raylet by polling every 2 s,
      after a second of imports. This loads Ray's CLI at once (while the head starts), polls the
      GCS every 0.2 s until the head's raylet is registered, then runs `ray start RAY_START_ARGS`
      in this process, so the worker's raylet starts within a fraction of a second of the head's.
      Ray's `ray start` gives a new raylet 30 s to register (a constant in ray/_private/node.py),
      then fails, leaving the raylet running. On a host or GCS too busy for that (many nodes
      starting at once), the raylet registers later: join then waits up to LATE_S, until the
      deadline, for this node (--node-ip-address) to be alive in the GCS, and counts it as joined;
      it stops waiting as soon as that raylet has exited.
Exit: 0 formed (join: `ray start`'s own status); 2 bad arguments; 3 the deadline passed (the line
  before says what was missing); 5 this python cannot use the Ray it needs.

Written for the Ray of configs/versions.yaml (`ray`), whose GCS client is private:
ray._raylet.InnerGcsClient.standalone(address, cluster_id, timeout_ms) and its
get_all_node_info(timeout) -> {NodeID: GcsNodeInfo}. A Ray without them fails at once (exit 5),
never at the deadline; tests/unit/test_ray_up.py checks them against the pinned Ray.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

POLL_S = 0.5  # the head's formation poll
JOIN_POLL_S = 0.2  # a worker's wait for the head's raylet
QUIET_S = 30.0  # say the formation state again after this long without a change
CONNECT_MS = 2000  # one connection attempt (the client's own default waits 40 s)
RPC_S = 2  # one node-table request
LATE_S = 90.0  # join: how long a raylet whose `ray start` gave up may still take to register
EXIT_USAGE, EXIT_DEADLINE, EXIT_NO_RAY = 2, 3, 5


def log(msg: str) -> None:
    print(f"ray-up: {msg}", file=sys.stderr, flush=True)


class Totals(NamedTuple):
    nodes: int
    gpus: float
    cpus: float

    def covers(self, want: "Totals") -> bool:
        return self.nodes >= want.nodes and self.gpus >= want.gpus and self.cpus >= want.cpus


def totals(nodes: Iterable[Any]) -> Totals:
    resources = [dict(n.resources_total) for n in nodes]
    return Totals(len(resources), sum(r.get("GPU", 0) for r in resources),
                  sum(r.get("CPU", 0) for r in resources))


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class Ray(NamedTuple):
    """What this file uses of the pinned Ray, loaded once, before any wait."""

    connect: Callable[[str], Any]  # address -> GCS client
    alive: int  # GcsNodeState.ALIVE
    cli: Callable[[], Any] | None  # what the `ray` executable runs (join only)


def load_ray(with_cli: bool) -> Ray:
    """Import Ray's GCS client (about a second); ImportError or AttributeError when it cannot."""
    from ray._raylet import InnerGcsClient
    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    standalone = InnerGcsClient.standalone
    cli = None
    if with_cli:
        from ray.scripts.scripts import main as cli
    return Ray(lambda address: standalone(address, None, CONNECT_MS),
               GcsNodeInfo.GcsNodeState.Value("ALIVE"), cli)


class Gcs:
    """The head's GCS, connected when its port answers and again after any error."""

    def __init__(self, host: str, port: int, ray: Ray, port_open: Callable[[str, int], bool] = port_open):
        self.host, self.port, self.ray, self._port_open = host, port, ray, port_open
        self.client: Any = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def alive_nodes(self) -> list | None:
        """The alive nodes, or None while nothing listens on the port; an error (the GCS may still
        be starting) drops the connection and propagates."""
        try:
            if self.client is None:
                if not self._port_open(self.host, self.port):
                    return None
                self.client = self.ray.connect(self.address)
            return [n for n in self.client.get_all_node_info(timeout=RPC_S).values() if n.state == self.ray.alive]
        except Exception:
            self.client = None
            raise


def wait_formed(gcs: Gcs, want: Totals, deadline: float, expected_ips: list[str], start: float,
                clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> int:
    """Poll until the alive nodes cover `want` (print "nodes gpus cpus", return 0) or the deadline
    passes (say what is missing, return 3)."""
    nodes: list = []
    seen: Totals | None = None
    said, answered, err = 0.0, False, None
    while True:
        now_answered = False
        try:
            got = gcs.alive_nodes()
            if got is not None:
                nodes, now_answered, answered, err = got, True, True, None
        except Exception as e:  # the GCS may still be starting: retry until the deadline
            err = e
        have = totals(nodes)
        # Each change, and every 30 s without one: a wait of minutes (cloud nodes) shows it is alive.
        if now_answered and (have != seen or clock() - said >= QUIET_S):
            seen, said = have, clock()
            log(f"{have.nodes}/{want.nodes} nodes joined, {have.gpus:g} GPUs, {have.cpus:g} CPUs registered "
                f"(at {clock() - start:.1f} s of {deadline - start:.0f} s)")
        if have.covers(want):
            print(have.nodes, f"{have.gpus:g}", f"{have.cpus:g}", flush=True)
            return 0
        if clock() >= deadline:
            break
        sleep(max(0.0, min(POLL_S, deadline - clock())))
    if not answered:
        log(f"the head's GCS {gcs.address} never answered{f' ({err})' if err else ''}")
        return EXIT_DEADLINE
    joined = {n.node_manager_address for n in nodes}
    missing = [ip for ip in expected_ips if ip not in joined]
    ranks = ", ".join(str(list(expected_ips).index(ip)) for ip in missing)
    where = f"; not joined: {' '.join(missing)}; rank(s) {ranks} never arrived" if missing else ""
    log(f"{max(want.nodes - have.nodes, 0)} of {want.nodes} nodes missing ({have.nodes} registered){where}; "
        f"GPUs {have.gpus:g}/{want.gpus:g}, CPUs {have.cpus:g}/{want.cpus:g}")
    return EXIT_DEADLINE


def wait_head(gcs: Gcs, deadline: float, clock: Callable[[], float] = time.time,
              sleep: Callable[[float], None] = time.sleep) -> int:
    """Poll until the head's raylet is registered alive (0) or the deadline passes (3)."""
    while True:
        try:
            nodes = gcs.alive_nodes()
            if nodes is not None and any(n.is_head_node for n in nodes):
                return 0
        except Exception:  # the GCS may still be starting: retry until the deadline
            pass
        if clock() >= deadline:
            what = "did not register its raylet" if gcs.client is not None else "was not reachable"
            log(f"the head {gcs.address} {what} before the deadline")
            return EXIT_DEADLINE
        sleep(max(0.0, min(JOIN_POLL_S, deadline - clock())))


def raylet_running() -> bool:
    """Whether a raylet this process started (`ray start` runs in it) still runs: a child of ours
    named raylet that is not a zombie (/proc; True where there is no /proc to ask)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            name, fields = text.split(" (", 1)[1].rsplit(") ", 1)[0], text.rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if name == "raylet" and fields[1] == str(os.getpid()) and fields[0] != "Z":
            return True
    return False


def wait_registered(gcs: Gcs, ip: str, deadline: float, clock: Callable[[], float] = time.time,
                    sleep: Callable[[float], None] = time.sleep, running: Callable[[], bool] = raylet_running) -> bool:
    """Poll until a node at `ip` is alive in the GCS (True), or the deadline passes or the raylet is
    gone (False: it crashed, e.g. waiting for its own agents on a host too busy for them)."""
    while True:
        try:
            nodes = gcs.alive_nodes()
            if nodes and any(n.node_manager_address == ip for n in nodes):
                return True
        except Exception:  # a GCS that busy may fail a request: retry until the deadline
            pass
        if clock() >= deadline or not running():
            return False
        sleep(max(0.0, min(JOIN_POLL_S, deadline - clock())))


def node_ip(start_args: list[str]) -> str:
    for i, arg in enumerate(start_args):
        if arg.startswith("--node-ip-address="):
            return arg.split("=", 1)[1]
        if arg == "--node-ip-address" and i + 1 < len(start_args):
            return start_args[i + 1]
    return ""


STARTUP_TIMEOUT = "timed out during startup"  # node.py's message when its 30 s are up


def join(gcs: Gcs, ray: Ray, start_args: list[str], deadline: float, clock: Callable[[], float] = time.time,
         sleep: Callable[[float], None] = time.sleep, running: Callable[[], bool] = raylet_running) -> int:
    """`ray start START_ARGS` in this process: its exit code; a start that gave up on its raylet
    is a join if the raylet then registers (see LATE_S)."""
    sys.argv = ["ray", "start", *start_args]
    try:
        rc = ray.cli()
    except SystemExit as done:  # click's way out
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception as err:  # noqa: BLE001 - only Ray's startup timeout is waited out
        ip = node_ip(start_args)
        if STARTUP_TIMEOUT not in str(err) or not ip:
            raise
        started = clock()
        log(f"`ray start` gave up after Ray's 30 s wait for this node's raylet ({ip}); waiting up to "
            f"{LATE_S:.0f} s more for it to register")
        if wait_registered(gcs, ip, min(deadline, started + LATE_S), clock, sleep, running):
            log(f"the raylet of {ip} registered {clock() - started:.1f} s later: joined")
            return 0
        log(f"the raylet of {ip} did not register within {clock() - started:.0f} s"
            + ("" if running() else " (it exited: see its raylet.out)"))
        return 1
    return rc if isinstance(rc, int) else 0


def usage_error(msg: str) -> int:
    print(f"ray_up.py: {msg}\n{__doc__.split('Usage:', 1)[1].split('Exit:', 1)[0].rstrip()}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str]) -> int:
    mode, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if mode == "cluster" and len(args) == 8:
            host, port, nodes, gpus, cpus, deadline, ips, start = args
            want = Totals(int(nodes), float(gpus), float(cpus))
            port_n, deadline_s, start_s = int(port), float(deadline), float(start)
        elif mode == "join" and len(args) >= 4 and args[3] == "--":
            host, port, deadline = args[:3]
            port_n, deadline_s = int(port), float(deadline)
        else:
            return usage_error(f"bad arguments {argv!r}")
    except ValueError as err:
        return usage_error(f"bad arguments {argv!r}: {err}")
    # Import first: a python without a usable Ray fails here, at once, not at the deadline.
    try:
        ray = load_ray(with_cli=mode == "join")
    except (ImportError, AttributeError) as err:  # no retry can mend this one
        log(f"{sys.executable} cannot use Ray's {'CLI' if mode == 'join' else 'GCS client'}: {err}")
        return EXIT_NO_RAY
    gcs = Gcs(host, port_n, ray)
    if mode == "cluster":
        return wait_formed(gcs, want, deadline_s, [ip for ip in ips.split(",") if ip], start_s)
    rc = wait_head(gcs, deadline_s)
    if rc:
        return rc
    return join(gcs, ray, args[4:], deadline_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

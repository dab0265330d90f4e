"""Preflight's collective: one process per node joins a small all-reduce over the backend and the
network settings the framework will use, with a deadline of seconds, so a run that cannot connect
its nodes fails before training instead of hanging in process-group init (Ray Train waits 1800 s,
NCCL 600 s or more).

Settings, as the job will have them: Gloo on CPU, Gloo and NCCL together where there are GPUs
(`cpu:gloo,cuda:nccl`, as verl builds its groups); GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME from the
job's env (the framework adapter's env and the job's runtime env reach the probes as they reach the
job); the master on the rank-0 node's Ray address with a free port there, as Ray Train and verl do.
Where a variable is unset, each node takes the interface of its route to the head; when every node
names it alike, preflight exports it for the job (`exports` in preflight.json: job.sh applies it
to the driver and, through the job's runtime env, to every Ray worker; see `job_env`).

Steps, each under the deadline: every node resolves its interface and address and listens there;
every node connects to every other node's listener from its own address (so a failure names the
node, the interface it tried and the peer it could not reach); only then the real all-reduce.

CLI (used by job.sh): python -m rlaunch.verify.collective exports PREFLIGHT.json
  prints NUL-separated NAME=VALUE pairs to export: the chosen interface variables and, inside a
  Ray job, RAY_JOB_CONFIG_JSON_ENV_VAR with them added to the job's runtime env (it carries the
  job's secrets: it only ever travels through this pipe, never a file or an argument).
Env: RLAUNCH_COLLECTIVE_TIMEOUT_S (default 20): the deadline of the whole collective check.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypedDict

from rlaunch import cmdline
from rlaunch.verify import cluster
from rlaunch.verify.report import check

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

DEFAULT_TIMEOUT_S = 20.0
CONNECT_S = 5.0  # one TCP connect between two nodes
VARS = {"gloo": "GLOO_SOCKET_IFNAME", "nccl": "NCCL_SOCKET_IFNAME"}
JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # how Ray's job supervisor hands the driver its runtime env


# ---------------------------------------------------------------- on every node
# Shipped by value with preflight (standard library, torch and Ray only).


def _interfaces() -> dict[str, dict[str, Any]]:
    """name -> {"ipv4": [addresses, in the kernel's order], "up": bool}."""
    try:
        import psutil

        stats = psutil.net_if_stats()
        return {name: {"ipv4": [a.address for a in addrs if a.family == socket.AF_INET],
                       "up": bool(stats.get(name) and stats[name].isup)}
                for name, addrs in psutil.net_if_addrs().items()}
    except ImportError:  # Ray's default install has psutil; a bare one may not: the primary address
        out = {}
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _, name in socket.if_nameindex():
                packed = struct.pack("256s", name.encode()[:15])
                try:
                    addr = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), 0x8915, packed)[20:24])  # SIOCGIFADDR
                except OSError:
                    addr = None
                flags = struct.unpack("H", fcntl.ioctl(sock.fileno(), 0x8913, packed)[16:18])[0]  # SIOCGIFFLAGS
                out[name] = {"ipv4": [addr] if addr else [], "up": bool(flags & 1)}
        return out


def _route_interface(head_ip: str, interfaces: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """(interface, source address) of this node's route to the head; ("", why) when there is none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((head_ip, 9))  # UDP: the kernel picks the route and the source, sends nothing
        except OSError as err:
            return "", f"no route to the head {head_ip} ({err.strerror or err})"
        source = sock.getsockname()[0]
    for name, info in interfaces.items():
        if source in info["ipv4"]:
            return name, source
    return "", f"the route to the head {head_ip} leaves from {source}, on no interface listed here"


def _match(value: str, backend: str, interfaces: dict[str, dict[str, Any]]) -> str:
    """The interface a backend takes for its variable's value (first listed wins); "" if none.
    Gloo: exact names, comma-separated. NCCL: prefixes, '=' for exact names, '^' to exclude."""
    names = [n for n in interfaces if interfaces[n]["ipv4"]]
    if backend == "gloo":
        return next((v for v in value.split(",") if v in interfaces), "")
    exclude, exact = value.startswith("^"), False
    text = value.lstrip("^")
    if text.startswith("="):
        exact, text = True, text[1:]
    wanted = [w for w in text.split(",") if w]

    def hit(name: str, want: str) -> bool:
        return name == want if exact else name.startswith(want)

    if exclude:
        return next((n for n in names if not any(hit(n, w) for w in wanted)), "")
    return next((n for w in wanted for n in names if hit(n, w)), "")


def _resolve(backend: str, head_ip: str, interfaces: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What this node's backend will use: {"var", "value", "set", "iface", "addr"} or {"error"}."""
    var = VARS[backend]
    value = os.environ.get(var, "")
    out = {"var": var, "value": value, "set": bool(value)}
    if value:
        iface = _match(value, backend, interfaces)
        if not iface:
            have = ", ".join(f"{n} ({', '.join(i['ipv4']) or 'no IPv4'})" for n, i in interfaces.items())
            return {**out, "error": f"{var}={value} names no interface here (has: {have})"}
    else:
        iface, why = _route_interface(head_ip, interfaces)
        if not iface:
            return {**out, "error": f"{var} unset and {why}"}
    info = interfaces[iface]
    out["iface"] = iface
    if not info["up"]:
        return {**out, "error": f"interface {iface} ({var}) is down"}
    if not info["ipv4"]:
        return {**out, "error": f"interface {iface} ({var}) has no IPv4 address"}
    out["addr"] = info["ipv4"][0]
    return out


class Member:
    """One node's side of the collective (a Ray actor pinned to that node)."""

    def __init__(self) -> None:
        self.listeners: dict[str, socket.socket] = {}

    def prepare(self, head_ip: str, backends: list[str]) -> dict[str, Any]:
        import ray

        interfaces = _interfaces()
        out = {"node_ip": ray.util.get_node_ip_address(), "interfaces": interfaces, "backends": {}}
        for backend in backends:
            got = _resolve(backend, head_ip, interfaces)
            if "addr" in got and got["addr"] not in self.listeners:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind((got["addr"], 0))
                    sock.listen(64)
                except OSError as err:
                    sock.close()
                    got["error"] = f"cannot listen on {got['addr']} ({got['iface']}): {err.strerror or err}"
                else:
                    self.listeners[got["addr"]] = sock
                    threading.Thread(target=_accept, args=(sock,), daemon=True).start()
            if "addr" in got and got["addr"] in self.listeners:
                got["port"] = self.listeners[got["addr"]].getsockname()[1]
            out["backends"][backend] = got
        return out

    def probe(self, own: dict[str, Any], peers: list[dict[str, Any]], timeout_s: float) -> dict[str, str]:
        """Connect from `own` address to each peer's listener: peer label -> "ok" or the error."""

        def one(peer: dict[str, Any]) -> tuple[str, str]:
            return peer["label"], _connect(own["addr"], peer["addr"], peer["port"], timeout_s)

        with ThreadPoolExecutor(max_workers=max(1, len(peers))) as pool:
            return dict(pool.map(one, peers))

    def free_port(self, addr: str) -> int:
        with socket.socket() as sock:  # Ray Train's and verl's way: a free port on the master's address
            sock.bind((addr, 0))
            return int(sock.getsockname()[1])

    def all_reduce(self, settings: dict[str, str], master: str, port: int, rank: int, world: int,
                   gpus: bool, timeout_s: float) -> dict[str, Any]:
        import torch
        import torch.distributed as dist

        os.environ.update(settings)  # the interface variables, read when the process group forms
        started = time.monotonic()
        dist.init_process_group("cpu:gloo,cuda:nccl" if gpus else "gloo", init_method=f"tcp://{master}:{port}",
                                rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
        try:
            cpu = torch.ones(1)
            dist.all_reduce(cpu)
            out = {"gloo": float(cpu.item())}
            if gpus:
                cuda = torch.ones(1, device="cuda")
                dist.all_reduce(cuda)
                torch.cuda.synchronize()
                out["nccl"] = float(cuda.item())
        finally:
            dist.destroy_process_group()
        out["seconds"] = round(time.monotonic() - started, 2)
        return out


def _accept(sock: socket.socket) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        conn.close()


def _connect(src: str, dst: str, port: int, timeout_s: float) -> str:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.bind((src, 0))  # as the backend does: from the interface's own address
        sock.connect((dst, port))
        return "ok"
    except socket.timeout:
        return f"no answer from {dst}:{port} within {timeout_s:g} s"
    except OSError as err:
        return f"{err.strerror or err} ({dst}:{port})"
    finally:
        sock.close()


# ---------------------------------------------------------------- on the driver (pure parts)

LOCAL_ERRORS = ("Network is unreachable", "No route to host", "Cannot assign requested address")


def blame(results: dict[str, dict[str, str]]) -> tuple[str, str, str] | None:
    """(node, peer, error) for the failed pair to report; None when every pair connected.

    The node to name: one whose own kernel refused (no route, interface gone), else the node that
    failed with the most peers (a node cut off fails with all of them; its peers with it alone)."""
    failed = [(a, b, e) for a, row in results.items() for b, e in row.items() if e != "ok"]
    if not failed:
        return None
    local = [f for f in failed if any(s in f[2] for s in LOCAL_ERRORS)]
    if local:
        return local[0]
    count: dict[str, int] = {}
    for a, b, _ in failed:
        count[a] = count.get(a, 0) + 1
        count[b] = count.get(b, 0) + 1
    worst = max(count, key=lambda n: count[n])
    return next(f for f in failed if f[0] == worst) if any(f[0] == worst for f in failed) else \
        next((b, a, e) for a, b, e in failed if b == worst)


def exports(prepared: dict[str, dict[str, Any]], backends: list[str]) -> tuple[dict[str, str], list[str]]:
    """The interface variables to export (unset in the job and picked alike on every node), and
    problems (picked differently on some node: one variable cannot name both)."""
    out, problems = {}, []
    for backend in backends:
        picks = {label: p["backends"][backend] for label, p in prepared.items()}
        if any(p["set"] for p in picks.values()):
            continue
        names = {p.get("iface") for p in picks.values()}
        if len(names) == 1 and None not in names:
            name = names.pop()
            out[VARS[backend]] = name if backend == "gloo" else f"={name}"  # NCCL: '=' is an exact match
        elif None not in names:
            shown = ", ".join(f"{p['iface']} on {label}" for label, p in picks.items())
            problems.append(f"{VARS[backend]} unset and the nodes reach the head through differently named "
                            f"interfaces ({shown}): one value cannot name them all; set it in the job's env "
                            "(e.g. a prefix list for NCCL) or give the nodes one interface name")
    return out, problems


def job_env(exported: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What job.sh exports: the variables, and inside a Ray job the job's runtime env with them
    added, so the framework's own ray.init() hands them to every Ray worker it starts."""
    env = os.environ if environ is None else environ
    out = {k: v for k, v in exported.items() if k not in env}
    raw = env.get(JOB_CONFIG)
    if out and raw:
        config = json.loads(raw)
        runtime_env = config.get("runtime_env") or {}
        env_vars = runtime_env.setdefault("env_vars", {})
        for key, value in out.items():
            env_vars.setdefault(key, value)
        config["runtime_env"] = runtime_env
        out[JOB_CONFIG] = json.dumps(config)
    return out


# ---------------------------------------------------------------- on the driver (Ray)


class Result(TypedDict, total=False):
    """What run returns (preflight's report keeps all but the checks under "network"); every key is
    optional to the type because a preflight that reached no cluster reports none of them."""
    checks: list[dict[str, Any]]
    exports: dict[str, str]  # for job.sh: the interface variables picked alike on every node
    interfaces: dict[str, dict[str, dict[str, Any]]]  # node -> backend -> its var, value, iface, addr, error
    backend: str
    seconds: float


def _label(node: dict[str, Any]) -> str:
    return str(node["ip"])


def run(spec: Spec, nodes: list[dict[str, Any]], env: dict[str, str], timeout_s: float | None = None) -> Result:
    """The collective on the connected cluster: {"checks", "exports", "interfaces", "seconds"}."""
    import ray

    timeout_s = float(timeout_s or os.environ.get("RLAUNCH_COLLECTIVE_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
    started = time.monotonic()
    deadline = started + timeout_s
    gpus = spec.cluster.gpus_per_node > 0
    backends = ["gloo", "nccl"] if gpus else ["gloo"]
    # A KubeRay CPU-only head holds no GPUs: the NCCL world is the GPU nodes.
    members_of = [n for n in nodes if n["gpus"] > 0] if gpus else list(nodes)
    head = next((n for n in nodes if n["is_head"]), nodes[0])
    result: Result = {"checks": [], "exports": {}, "interfaces": {}, "backend": "cpu:gloo,cuda:nccl" if gpus else "gloo"}
    if len(members_of) < 1:
        result["checks"].append(check("collective", False, "no node to run it on"))
        return result
    actor_cls = ray.remote(Member)
    actors = {}
    for n in members_of:
        options = cluster.pinned(n["node_id"], env, num_gpus=1 if gpus else 0, max_restarts=0)
        actors[_label(n)] = actor_cls.options(**options).remote()

    def left() -> float:
        return max(0.1, deadline - time.monotonic())

    def gather(refs: dict[str, object], what: str) -> tuple[dict[str, Any], dict[str, Any]]:
        done, errors = cluster.gather(refs, left(), f"no answer to {what} within the {timeout_s:g} s deadline")
        return done, {label: why[:400] for label, why in errors.items()}

    try:
        prepared, errors = gather({k: a.prepare.remote(head["ip"], backends) for k, a in actors.items()},
                                  "the interface lookup")
        result["interfaces"] = {k: {b: {x: v[x] for x in ("var", "value", "iface", "addr", "error") if x in v}
                                    for b, v in p["backends"].items()} for k, p in prepared.items()}
        if errors:
            label, why = next(iter(errors.items()))
            result["checks"].append(check("collective", False, f"cannot start its process there: {why}", node=label))
            return result
        for backend in backends:
            for k, p in prepared.items():
                got = p["backends"][backend]
                if len(prepared) > 1 and str(got.get("addr", "")).startswith("127."):
                    got["error"] = (f"interface {got['iface']} ({got['var']}={got['value'] or 'unset'}) has the "
                                    f"loopback address {got['addr']}: the other nodes cannot reach it")
            bad = [(k, p["backends"][backend]) for k, p in prepared.items() if "error" in p["backends"][backend]]
            if bad:
                label, got = bad[0]
                result["checks"].append(check("collective", False, got["error"], node=label))
                return result
        chosen, problems = exports(prepared, backends)
        if problems:
            result["checks"].append(check("collective", False, problems[0]))
            return result
        result["exports"] = chosen
        for backend in backends:
            peers = {k: {"label": k, "addr": p["backends"][backend]["addr"], "port": p["backends"][backend]["port"]}
                     for k, p in prepared.items()}
            probed, errors = gather({k: actors[k].probe.remote(peers[k], [v for j, v in peers.items() if j != k],
                                                               min(CONNECT_S, left()))
                                     for k in actors}, f"the {backend} connection probe")
            matrix = {k: probed.get(k) or {j: errors[k] for j in peers if j != k} for k in peers}
            culprit = blame(matrix)
            if culprit:
                node, peer, why = culprit
                mine, theirs = prepared[node]["backends"][backend], prepared[peer]["backends"][backend]
                result["checks"].append(check(
                    "collective", False,
                    f"{backend} on {mine['iface']} ({mine['addr']}, {mine['var']}="
                    f"{mine['value'] or chosen.get(mine['var'], '') + ' picked'}) cannot reach peer {peer} "
                    f"at {theirs['addr']} ({theirs['iface']}): {why}", node=node))
                return result
        # Rank 0 on the head (the GPU node first where the head has none), as the frameworks place it.
        labels = sorted(actors, key=lambda k: k != _label(head))
        master = labels[0]
        port = ray.get(actors[master].free_port.remote(master), timeout=left())

        def settings(k: str) -> dict[str, str]:  # what the job will have: its own value, or the export
            return {VARS[b]: prepared[k]["backends"][b]["value"] or chosen.get(VARS[b], "") for b in backends}

        reduced, errors = gather({k: actors[k].all_reduce.remote(settings(k), master, port, rank, len(labels), gpus,
                                                                 max(1.0, left() - 1))
                                  for rank, k in enumerate(labels)}, "the all-reduce")
        if errors:
            label, why = next(iter(errors.items()))
            result["checks"].append(check("collective", False, f"all-reduce over {result['backend']} "
                                          f"(master {master}:{port}): {why}", node=label))
            return result
        wrong = [(k, r) for k, r in reduced.items() if any(r.get(b) != float(len(labels)) for b in backends)]
        if wrong:
            result["checks"].append(check("collective", False, f"all-reduce summed {wrong[0][1]} instead of "
                                          f"{len(labels)}", node=wrong[0][0]))
            return result
        where = ", ".join(f"{VARS[b]}={prepared[master]['backends'][b]['value'] or chosen[VARS[b]]}"
                          f"{'' if prepared[master]['backends'][b]['set'] else ' (picked: route to the head)'}"
                          for b in backends)
        result["checks"].append(check("collective", True, f"all-reduce over {result['backend']} on "
                                      f"{len(labels)} nodes in {time.monotonic() - started:.1f} s; {where}"))
        return result
    finally:
        for actor in actors.values():
            ray.kill(actor, no_restart=True)
        result["seconds"] = round(time.monotonic() - started, 1)


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.verify.collective", __doc__.split("CLI (used by job.sh): ")[1])
    parser.add_argument("command", choices=["exports"])
    parser.add_argument("report", metavar="PREFLIGHT.json")
    args = parser.parse_args(argv)
    try:
        report = json.loads(open(args.report, encoding="utf-8").read())
    except (OSError, ValueError) as err:
        print(f"collective: cannot read {args.report}: {err}", file=sys.stderr)
        return 2
    for key, value in job_env(report.get("network", {}).get("exports", {})).items():
        sys.stdout.write(f"{key}={value}\0")
    return 0


if __name__ == "__main__":
    sys.exit(main())

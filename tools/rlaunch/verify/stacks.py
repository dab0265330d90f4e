"""A stalled run's evidence: the Python stack of every framework process on every node, each node's
nvidia-smi where it has one, and the last lines of each process's log, written under one directory
(rlaunch.job.nodewatch runs this when the stall watch names a stall, before it stops the framework).

One Ray task pinned to every alive node (rlaunch.verify.cluster: no CPU asked, so a stalled run that
holds every CPU still lets it run) finds the framework's processes there: everything its node's
raylet started (Ray's workers and actors, and what they started: a rollout engine, its workers),
less Ray's own agents and idle workers; on the head, also the job's driver (--driver-pid) and what it
started. Each is dumped with py-spy, which Ray installs for `ray stack` (`py-spy dump --nonblocking`:
the process is read, not paused, so a frozen one is dumped too); every call has a deadline. The same
code runs on every infrastructure: only Ray and py-spy on the nodes are needed.

Writes into --out: index.json (per node: its processes, each with its stack's file, or why none), one
<node-ip>/<pid>-<name>.txt per process (command line, stack, its log's last lines), <node-ip>/
nvidia-smi.txt. Prints one JSON line: {"nodes": answered, "processes": dumped, "index": path, ...}.

Usage: python -m rlaunch.verify.stacks --spec SPEC --out DIR [--driver-pid PID] [--timeout S]
Env: RAY_ADDRESS, the cluster's; unset: only this machine's driver and what it started.
Exit: 0 written (a node or a process without a stack is recorded, not an error); 2 bad arguments;
  3 no cluster at RAY_ADDRESS (index.json says so).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import cmdline
from rlaunch.config import specjson
from rlaunch.verify import cluster
from rlaunch.verify.report import write_json

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROG = "rlaunch-stacks"
TAIL_LINES = 40
PYSPY_S = 15.0
# Ray's and rlaunch's own processes under a raylet (a Ray job's supervisor runs job.sh there): not the
# framework's.
RAY_OWN = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::JobSupervisor", "dashboard/agent.py",
           "runtime_env/agent", "log_monitor.py", "ray/_private/", "gcs_server", "monitor.py", "ray_client_server",
           "rlaunch.verify.stacks", "rlaunch.job.nodewatch", "rlaunch.job.phases")


# ---------------------------------------------------------------- on each node (shipped by value)


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process this node's /proc shows."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry)] = (ppid, cmd)
    return out


def _descendants(root: int, table: dict[int, tuple[int, str]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return sorted(out)


def _raylet(table: dict[int, tuple[int, str]]) -> int | None:
    """This task's raylet: the nearest ancestor whose command is a raylet."""
    pid, hops = os.getpid(), 0
    while pid in table and hops < 64:
        pid, hops = table[pid][0], hops + 1
        if pid in table and os.path.basename(table[pid][1].split(" ")[0]) == "raylet":
            return pid
    return None


def _python(cmd: str) -> bool:
    """A Python process (what py-spy can read): a Ray worker (ray::...) or a python* executable."""
    word = cmd.split(" ")[0]
    return cmd.startswith("ray::") or bool(re.match(r"python[\d.]*$", os.path.basename(word)))


def _logs_dir(raylet_cmd: str) -> str:
    found = re.search(r"--log_dir=(\S+)", raylet_cmd) or re.search(r"--session_dir=(\S+)", raylet_cmd)
    if not found:
        return ""
    path = found.group(1)
    return path if path.rstrip("/").endswith("logs") else os.path.join(path, "logs")


def _tail(path: str, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - 64 * 1024, 0))
            return "\n".join(fh.read().decode(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"(not readable: {err})"


def _run(argv: list[str], timeout_s: float) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False, f"{argv[0]}: no answer within {timeout_s:.0f} s"
    except OSError as err:
        return False, f"{argv[0]}: {err}"
    text = done.stdout.strip() or done.stderr.strip()
    if done.returncode != 0:
        return False, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
    return True, text


def node_evidence(ctx: dict[str, Any]) -> dict[str, Any]:
    """On one node: the framework's processes, each one's stack and log tail; nvidia-smi."""
    table = _proc_table()
    me = os.getpid()
    raylet = _raylet(table)
    pids = [p for p in (_descendants(raylet, table) if raylet else []) if p != me and p not in _descendants(me, table)]
    pids = [p for p in pids if not any(mark in table[p][1] for mark in ctx["ray_own"]) and _python(table[p][1])]
    driver = ctx.get("driver_pid") or 0
    if ctx.get("is_head") and driver and driver in table:
        pids += [driver] + _descendants(driver, table)
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    logs = _logs_dir(table[raylet][1]) if raylet else ""
    out: dict[str, Any] = {"hostname": socket.gethostname(), "raylet": raylet, "processes": [], "logs_dir": logs}
    deadline = time.monotonic() + ctx["budget_s"]

    def dump(pid: int) -> tuple[bool, str]:
        if time.monotonic() > deadline:
            return False, f"not dumped: the node's {ctx['budget_s']:.0f} s were spent"
        if not os.path.exists(pyspy):
            return False, f"no py-spy on this node ({pyspy}; Ray's `ray[default]` installs it)"
        return _run([pyspy, "dump", "--nonblocking", "--pid", str(pid)], ctx["pyspy_s"])

    pids = sorted(set(pids))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:  # each dump waits on its own process
        stacks = dict(zip(pids, pool.map(dump, pids)))
    for pid in pids:
        cmd = table.get(pid, (0, ""))[1]
        entry: dict[str, Any] = {"pid": pid, "cmdline": cmd[:500]}
        entry["ok"], entry["stack"] = stacks[pid]
        tails = {}
        if logs and os.path.isdir(logs):
            for name in sorted(os.listdir(logs)):
                if re.search(rf"-{pid}\.(out|err)$", name):
                    tails[os.path.join(logs, name)] = _tail(os.path.join(logs, name), ctx["tail_lines"])
        if pid == driver and ctx.get("driver_log"):
            tails[ctx["driver_log"]] = _tail(ctx["driver_log"], ctx["tail_lines"])
        entry["logs"] = tails
        out["processes"].append(entry)
    if shutil.which("nvidia-smi"):
        ok, text = _run(["nvidia-smi"], ctx["pyspy_s"])
        out["nvidia_smi"] = text if ok else f"nvidia-smi failed: {text}"
    return out


# ---------------------------------------------------------------- on the head


def _name(cmd: str) -> str:
    word = cmd.split(" ")[0]
    if re.match(r".*python[\d.]*$", word) and " -m " in f" {cmd} ":
        word = cmd.split(" -m ", 1)[1].split(" ")[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(word))[:60] or "process"


def write(out: Path, nodes: list[dict[str, Any]], found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The files under `out` and index.json; the summary line's fields."""
    index: dict[str, Any] = {"collected_at": time.time(), "nodes": []}
    dumped = answered = 0
    for node in nodes:
        result = found.get(node["node_id"], {"error": "no result"})
        row: dict[str, Any] = {"ip": node["ip"], "head": node["is_head"]}
        if "error" in result:
            row["error"] = result["error"]
            index["nodes"].append(row)
            continue
        answered += 1
        where = out / node["ip"]
        where.mkdir(parents=True, exist_ok=True)
        row.update(hostname=result.get("hostname"), processes=[])
        for proc in result["processes"]:
            path = where / f"{proc['pid']}-{_name(proc['cmdline'])}.txt"
            parts = [f"# pid {proc['pid']} on {node['ip']}: {proc['cmdline']}",
                     "# py-spy dump --nonblocking" + ("" if proc["ok"] else " failed"), proc["stack"]]
            for log, text in proc.get("logs", {}).items():
                parts += [f"\n# the last lines of {log}", text]
            path.write_text("\n".join(parts) + "\n", encoding="utf-8")
            dumped += bool(proc["ok"])
            row["processes"].append({"pid": proc["pid"], "file": str(path.relative_to(out)), "stack": proc["ok"],
                                     "cmdline": proc["cmdline"][:200]})
        if result.get("nvidia_smi"):
            (where / "nvidia-smi.txt").write_text(result["nvidia_smi"] + "\n", encoding="utf-8")
            row["nvidia_smi"] = f"{node['ip']}/nvidia-smi.txt"
        index["nodes"].append(row)
    write_json(out / "index.json", index)
    return {"nodes": answered, "of_nodes": len(nodes), "processes": dumped,
            "files": sum(len(n.get("processes", [])) for n in index["nodes"]), "index": str(out / "index.json"),
            **({"errors": {n["ip"]: n["error"] for n in index["nodes"] if "error" in n}}
               if any("error" in n for n in index["nodes"]) else {})}


def collect(spec: Spec, out: Path, driver_pid: int, timeout_s: float) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    log = Path(spec.paths.log_dir) / "train.log"
    if cluster.address() == "auto":
        # No cluster named (the job runs outside Ray): this machine's driver and what it started.
        ctx = {"is_head": True, "driver_pid": driver_pid, "driver_log": str(log), "ray_own": RAY_OWN,
               "pyspy_s": PYSPY_S, "tail_lines": TAIL_LINES, "budget_s": max(timeout_s - 5, 5)}
        here = {"node_id": "local", "ip": socket.gethostname(), "is_head": True}
        return {**write(out, [here], {"local": node_evidence(ctx)}), "ray": "RAY_ADDRESS not set: this machine only"}
    try:
        with cluster.joined(timeout_s):
            cluster.ship_by_value(sys.modules[__name__])
            nodes = cluster.alive_nodes()
            refs = {}
            import ray

            remote = ray.remote(node_evidence)
            for node in nodes:
                ctx = {"is_head": node["is_head"], "driver_pid": driver_pid, "driver_log": str(log),
                       "ray_own": RAY_OWN, "pyspy_s": PYSPY_S, "tail_lines": TAIL_LINES,
                       "budget_s": max(timeout_s - 10, 5)}
                refs[node["node_id"]] = remote.options(**cluster.pinned(node["node_id"], {}, max_retries=0)).remote(ctx)
            done, errors = cluster.gather(refs, timeout_s, f"no answer within {timeout_s:.0f} s", cancel=True)
    except (ConnectionError, TimeoutError) as err:
        write_json(out / "index.json", {"error": cluster.unreachable(err)})
        return {"error": cluster.unreachable(err), "index": str(out / "index.json")}
    return write(out, nodes, {**done, **{k: {"error": v} for k, v in errors.items()}})


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser(PROG, __doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--driver-pid", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        spec = specjson.read(args.spec)
    except (OSError, ValueError) as err:
        print(f"{PROG}: --spec {args.spec}: {err}", file=sys.stderr)
        return 2
    started = time.monotonic()
    result = collect(spec, args.out, args.driver_pid, args.timeout)
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result, sort_keys=True), flush=True)
    return 3 if "error" in result and "nodes" not in result else 0


if __name__ == "__main__":
    sys.exit(main())

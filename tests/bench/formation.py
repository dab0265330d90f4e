#!/usr/bin/env python3
"""Cluster formation benchmark: 3 network-namespace nodes started together, median of N runs.

Styles, each on fresh namespaces from scripts/local-cluster (RLAUNCH_START_RAY=0), torn down after:
  rlaunch     scripts/ray-up on every node at once; done when the head's ray-up reports 3/3 nodes
  pinned      the shape of a real cluster, where each node has CPUs of its own: 2 nodes, each
              pinned to its own core with taskset, scripts/ray-up on both at once (its limit: the
              pinned head's own `ray start`, as for rlaunch)
  seed_verl   tests/bench/seed_style/verl.sh (workers `sleep 15`, head polls `ray status` every 10 s)
  seed_areal  tests/bench/seed_style/areal.sh (workers `sleep 10`, head polls `ray status` every 5 s)
  head_alone  `ray start --head` in the head's namespace with no other node starting
The limit is the head's own `ray start --head` inside the rlaunch runs (ray-up records it): no
cluster can form before its head is up, and it is measured under the same load as the formation.
head_alone is reported too, for comparison. For the rlaunch runs it also reads, from the GCS log,
when the head's raylet and the last worker registered: Ray starts a worker's raylet only once the
head's is registered, so the gap between the two is the part of formation no script can overlap
with the head's start. Targets: rlaunch within 1.15x of the limit (3 nodes and the pinned 2), and at
least 1.3x faster than each seed style. formation.json holds the 3-node numbers at its top level and
the pinned run under "pinned_2_nodes": {"limit_s", "rlaunch_s", "ratio"}, and "scale": {"2", "4", "8"}:
rlaunch, the seeds' styles and Ray's floor (the GCS registering the last worker) at each node
count, to show whether anything serialises as the cluster grows (target: rlaunch within 1.1x of
the floor at every size).

Usage: tests/bench/formation.py        (as root, with iproute2; after `make setup`)
Env:
  RLAUNCH_BENCH_RUNS        runs per style, >= 1 (default 3; the issue asks for >= 3)
  RLAUNCH_BENCH_STYLES      space-separated subset of the styles (default: all five)
  RLAUNCH_BENCH_NODES       nodes of the formation, >= 2 (default 3)
  RLAUNCH_BENCH_SCALE       node counts of "scale" (default "2 4 8"; smoke: none, the run above
                            stands for it): rlaunch, the seeds' styles and Ray's floor at each size
  RLAUNCH_BENCH_SCALE_RUNS  runs per style and size (default 1)
  RLAUNCH_BENCH_SMOKE       1: check the benchmark still runs: one run of rlaunch's style on 2 nodes
                            (unless the knobs above say otherwise), then the JSON's keys and types
  RLAUNCH_BENCH_DEADLINE_S  give up on one formation after this long (default 240)
  RLAUNCH_BENCH_OUT         result file (default build/bench/formation.json)
  RLAUNCH_BENCH_STRICT      1: exit 1 when a target is missed (default 0: report only)
  RLAUNCH_RAY               ray executable (default: <repo>/.venv/bin/ray, else `ray`)
Exit: 0 done (targets are reported, not enforced unless strict), 1 a target missed (strict) or
  the JSON lacks a key or type (smoke), 2 bad input or no root / ip, 3 the rlaunch style failed to form.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import owned  # noqa: E402 - tests/bench/, just put on the path
from schema import NUM, OPT, check  # noqa: E402

SCRIPTS = REPO / "scripts"
SEEDS = Path(__file__).resolve().parent / "seed_style"
STYLES = ("rlaunch", "seed_verl", "seed_areal", "head_alone", "pinned")
SCALE_STYLES = ("rlaunch", "seed_verl", "seed_areal")  # at each size of RLAUNCH_BENCH_SCALE
PINNED_NODES = 2  # one core each on a 2-core host
# Every style gets the same small nodes: the host has 2 cores shared by 3 nodes.
NODE_CPUS, NODE_OBJECT_STORE = 1, 80_000_000


def die(msg: str, code: int = 2) -> None:
    print(f"formation: {msg}", file=sys.stderr)
    sys.exit(code)


def log(msg: str) -> None:
    print(f"formation: {msg}", file=sys.stderr, flush=True)


SCHEMA = {
    "nodes": int, "runs": int, "limit_s": NUM, "rlaunch_s": NUM, "seed_verl_s": OPT, "seed_areal_s": OPT,
    "head_alone_s": OPT, "head_registered_s": OPT, "workers_registered_s": OPT, "rlaunch_over_limit": NUM,
    "rlaunch_over_head_alone": OPT, "seed_verl_over_rlaunch": OPT, "seed_areal_over_rlaunch": OPT,
    "pinned_2_nodes": {"limit_s": OPT, "rlaunch_s": OPT, "ratio": OPT}, "scale": dict,
    "not_formed": dict, "samples": dict, "loadavg_start": list, "loadavg_end": list, "cpus": int,
    "targets_met": dict,
}


def read_env() -> dict:
    smoke = os.environ.get("RLAUNCH_BENCH_SMOKE", "0")
    if smoke not in ("0", "1"):
        die(f"RLAUNCH_BENCH_SMOKE='{smoke}' is not allowed: need 0 or 1")
    runs = os.environ.get("RLAUNCH_BENCH_RUNS", "1" if smoke == "1" else "3")
    if not runs.isdigit() or int(runs) < 1:
        die(f"RLAUNCH_BENCH_RUNS='{runs}' is not allowed: need an integer >= 1")
    deadline = os.environ.get("RLAUNCH_BENCH_DEADLINE_S", "240")
    if not deadline.isdigit() or int(deadline) < 10:
        die(f"RLAUNCH_BENCH_DEADLINE_S='{deadline}' is not allowed: need an integer >= 10")
    nodes = os.environ.get("RLAUNCH_BENCH_NODES", "2" if smoke == "1" else "3")
    if not nodes.isdigit() or int(nodes) < 2:
        die(f"RLAUNCH_BENCH_NODES='{nodes}' is not allowed: need an integer >= 2")
    styles = os.environ.get("RLAUNCH_BENCH_STYLES", "rlaunch" if smoke == "1" else " ".join(STYLES)).split()
    bad = [s for s in styles if s not in STYLES]
    if bad or not styles:
        die(f"RLAUNCH_BENCH_STYLES='{' '.join(styles)}' is not allowed: need some of {', '.join(STYLES)}")
    strict = os.environ.get("RLAUNCH_BENCH_STRICT", "0")
    if strict not in ("0", "1"):
        die(f"RLAUNCH_BENCH_STRICT='{strict}' is not allowed: need 0 or 1")
    ray = os.environ.get("RLAUNCH_RAY") or str(REPO / ".venv" / "bin" / "ray")
    ray = shutil.which(ray) or shutil.which("ray")
    if not ray:
        die("RLAUNCH_RAY: no ray executable found (run make setup)")
    if os.geteuid() != 0 or not shutil.which("ip"):
        die("needs root and iproute2's ip: the benchmark runs 3 network-namespace nodes")
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or REPO / "build" / "bench" / "formation.json")
    scale = os.environ.get("RLAUNCH_BENCH_SCALE", "" if smoke == "1" else "2 4 8").split()
    if any(not n.isdigit() or not 2 <= int(n) <= 16 for n in scale):
        die(f"RLAUNCH_BENCH_SCALE='{' '.join(scale)}' is not allowed: need node counts from 2 to 16")
    scale_runs = os.environ.get("RLAUNCH_BENCH_SCALE_RUNS", "1")
    if not scale_runs.isdigit() or int(scale_runs) < 1:
        die(f"RLAUNCH_BENCH_SCALE_RUNS='{scale_runs}' is not allowed: need an integer >= 1")
    return {"runs": int(runs), "deadline": int(deadline), "styles": styles, "ray": ray, "out": out,
            "strict": strict == "1", "smoke": smoke == "1", "nodes": int(nodes),
            "scale": [int(n) for n in scale], "scale_runs": int(scale_runs)}


class Cluster:
    """Fresh namespaces (3, or `nodes`) from scripts/local-cluster, no Ray; `down` removes everything."""

    def __init__(self, name: str, cfg: dict, nodes: int):
        self.env = {**os.environ, "RLAUNCH_CLUSTER_NAME": name, "RLAUNCH_NODES": str(nodes),
                    "RLAUNCH_START_RAY": "0", "RLAUNCH_LOCAL_MODE": "netns", "RLAUNCH_STOP_GRACE_S": "5",
                    "RLAUNCH_STATE_DIR": str(REPO / "build" / "bench" / "clusters" / name),
                    "RLAUNCH_RAY": cfg["ray"]}
        self.name = name
        owned.claim("cluster", name)
        subprocess.run([str(SCRIPTS / "local-cluster"), "up"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL)
        info = json.loads((Path(self.env["RLAUNCH_STATE_DIR"]) / "cluster.json").read_text())
        self.nodes = info["nodes"]
        self.ips = [n["ip"] for n in self.nodes]

    def spawn(self, rank: int, argv: list[str], env: dict, log_path: Path, pin: bool = False) -> subprocess.Popen:
        node = self.nodes[rank]
        if pin:  # every process of the node (Ray's daemons inherit the affinity) on one core of its own
            argv = ["taskset", "-c", str(rank % (os.cpu_count() or 1)), *argv]
        # Same node environment for every style: auth and usage stats off, small nodes.
        full = {**self.env, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **env}
        with open(log_path, "wb") as f:
            return subprocess.Popen(["ip", "netns", "exec", node["ns"], *argv], env=full,
                                    stdout=f, stderr=subprocess.STDOUT)

    def node_args(self, rank: int) -> str:
        node = self.nodes[rank]
        return (f"--node-ip-address={node['ip']} --temp-dir={node['temp_dir']} "
                f"--num-cpus={NODE_CPUS} --object-store-memory={NODE_OBJECT_STORE}")

    def down(self) -> None:
        done = subprocess.run([str(SCRIPTS / "local-cluster"), "down"], env=self.env, check=False,
                              stdout=subprocess.DEVNULL)
        if done.returncode == 0:  # keep the records for a manual `down` (or the next run's) if it failed
            shutil.rmtree(self.env["RLAUNCH_STATE_DIR"], ignore_errors=True)
            owned.release("cluster", self.name)


# The GCS logs every registration, e.g. "[2026-11-29 13:40:40,908 I 1 2] (gcs_server)
# gcs_node_manager.cc:111: Registering new node. node_id=... node_name=10.1.2.1 ..." (local time).
REGISTERED = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*Registering new node\..*\bnode_name=(\S+)")


def registrations(gcs_log: Path, t0_wall: float) -> dict[str, float]:
    """Seconds after t0_wall at which the GCS registered each node, by node name (IP); {} if unreadable."""
    try:
        text = gcs_log.read_text(errors="replace")
    except OSError:
        return {}
    seen: dict[str, float] = {}
    for line in text.splitlines():
        m = REGISTERED.match(line)
        if m:
            t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp() + int(m[2]) / 1000
            seen.setdefault(m[3], round(t - t0_wall, 2))
    return seen


def wait_head(procs: list[subprocess.Popen], t0: float, deadline: float) -> float | None:
    """Seconds from t0 until the head (procs[0]) exits 0; None if it failed or ran out of time."""
    try:
        rc = procs[0].wait(timeout=max(1.0, deadline - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        return None
    took = time.monotonic() - t0
    return took if rc == 0 else None


def reap(procs: list[subprocess.Popen]) -> None:
    # The cluster's `down` killed whatever still ran in the namespaces; collect the exit codes.
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_rlaunch(c: Cluster, cfg: dict, logs: Path, pin: bool = False) -> dict:
    procs, t0, t0_wall = [], time.monotonic(), time.time()
    style = "pinned" if pin else "rlaunch"
    for rank, node in enumerate(c.nodes):
        env = {"RLAUNCH_NODE_RANK": str(rank), "RLAUNCH_NODE_IPS": ",".join(c.ips),
               "RLAUNCH_NODE_IP": node["ip"], "RLAUNCH_TEMP_DIR": node["temp_dir"],
               "RLAUNCH_NUM_CPUS": str(NODE_CPUS), "RLAUNCH_OBJECT_STORE_BYTES": str(NODE_OBJECT_STORE),
               "RLAUNCH_DEADLINE_S": str(cfg["deadline"])}
        procs.append(c.spawn(rank, [str(SCRIPTS / "ray-up")], env, logs / f"{style}-{rank}.log", pin=pin))
    took = wait_head(procs, t0, cfg["deadline"])
    limit = None
    state = Path(c.nodes[0]["temp_dir"]) / "rlaunch-ray.state"
    if state.exists():
        for line in state.read_text().splitlines():
            if line.startswith("ray_start_s="):
                limit = float(line.split("=", 1)[1])
    regs = registrations(Path(c.nodes[0]["temp_dir"]) / "session_latest" / "logs" / "gcs_server.out", t0_wall)
    workers = [regs.get(ip) for ip in c.ips[1:]]
    if pin:
        return {"pinned": took, "limit_pinned": limit, "procs": procs}
    return {"rlaunch": took, "limit": limit, "head_registered": regs.get(c.ips[0]),
            "workers_registered": None if None in workers else max(workers), "procs": procs}


def run_seed(c: Cluster, cfg: dict, logs: Path, style: str) -> dict:
    script = SEEDS / ("verl.sh" if style == "seed_verl" else "areal.sh")
    procs, t0 = [], time.monotonic()
    for rank in range(len(c.nodes)):
        env = {"SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": "\n".join(c.ips),
               "SKYPILOT_NUM_NODES": str(len(c.nodes)), "SEED_RAY": cfg["ray"], "SEED_RAY_ARGS": c.node_args(rank)}
        procs.append(c.spawn(rank, [str(script)], env, logs / f"{style}-{rank}.log"))
    return {style: wait_head(procs, t0, cfg["deadline"]), "procs": procs}


def run_head_alone(c: Cluster, cfg: dict, logs: Path) -> dict:
    argv = [cfg["ray"], "start", "--head", "--port=6379", "--include-dashboard=true",
            "--dashboard-host=0.0.0.0", "--disable-usage-stats", *c.node_args(0).split()]
    t0 = time.monotonic()
    procs = [c.spawn(0, argv, {}, logs / "head_alone-0.log")]
    return {"head_alone": wait_head(procs, t0, cfg["deadline"]), "procs": procs}


def one(style: str, run: int, cfg: dict, logs: Path, nodes: int) -> dict:
    name = f"bench-f{os.getpid() % 100000}-{nodes}-{run}{STYLES.index(style)}"
    c = Cluster(name, cfg, PINNED_NODES if style == "pinned" else nodes)
    result: dict = {"procs": []}
    try:
        if style in ("rlaunch", "pinned"):
            result = run_rlaunch(c, cfg, logs, pin=style == "pinned")
        elif style == "head_alone":
            result = run_head_alone(c, cfg, logs)
        else:
            result = run_seed(c, cfg, logs, style)
    finally:
        c.down()
        reap(result.get("procs", []))
    result.pop("procs", None)
    return result


def median(values: list) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 2) if got else None


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def measure(cfg: dict, styles: list[str], nodes: int, runs: int, logs: Path) -> dict[str, list]:
    """Each style `runs` times on `nodes` fresh namespace nodes: every figure's samples, by name."""
    samples: dict[str, list] = {k: [] for k in (*styles, "limit")}
    for run in range(runs):
        for style in styles:
            log(f"{nodes} nodes, run {run + 1}/{runs}: {style} (load {loadavg()[0]})")
            got = one(style, run, cfg, logs, nodes)
            for key, value in got.items():
                samples.setdefault(key, []).append(None if value is None else round(value, 2))
            log("  " + ", ".join(f"{k} {v:.1f} s" if v else f"{k} {'did not form' if k in STYLES else 'n/a'}"
                                 for k, v in got.items()))
    return samples


def scale_entry(samples: dict[str, list], runs: int) -> dict:
    """One size of "scale": rlaunch, the seeds' styles and Ray's floor (the GCS registering the
    last worker, read from the rlaunch runs' GCS log), medians."""
    m = {k: median(v) for k, v in samples.items()}
    return {"runs": runs, "rlaunch_s": m.get("rlaunch"), "floor_s": m.get("workers_registered"),
            "limit_s": m.get("limit"), "seed_verl_s": m.get("seed_verl"), "seed_areal_s": m.get("seed_areal"),
            "rlaunch_over_floor": ratio(m.get("rlaunch"), m.get("workers_registered")),
            "seed_verl_over_rlaunch": ratio(m.get("seed_verl"), m.get("rlaunch")),
            "seed_areal_over_rlaunch": ratio(m.get("seed_areal"), m.get("rlaunch")),
            "not_formed": {k: sum(v is None for v in vals) for k, vals in samples.items() if k in STYLES}}


def main() -> int:
    # TERM (e.g. from CI) should tear the current cluster down like Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    cfg = read_env()
    owned.sweep("formation")
    logs = cfg["out"].parent / "formation-logs"
    logs.mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    samples = measure(cfg, cfg["styles"], cfg["nodes"], cfg["runs"], logs)
    m = {k: median(v) for k, v in samples.items()}
    scale_styles = [st for st in cfg["styles"] if st in SCALE_STYLES]
    # Smoke: the summary of the run above stands for the scale (one formation is enough to check).
    scale = {str(n): scale_entry(measure(cfg, scale_styles, n, cfg["scale_runs"], logs), cfg["scale_runs"])
             for n in cfg["scale"]} if not cfg["smoke"] else {str(cfg["nodes"]): scale_entry(samples, cfg["runs"])}
    result = {
        "nodes": cfg["nodes"], "runs": cfg["runs"],
        "limit_s": m.get("limit"), "rlaunch_s": m.get("rlaunch"),
        "seed_verl_s": m.get("seed_verl"), "seed_areal_s": m.get("seed_areal"),
        "head_alone_s": m.get("head_alone"),
        "head_registered_s": m.get("head_registered"), "workers_registered_s": m.get("workers_registered"),
        "rlaunch_over_limit": ratio(m.get("rlaunch"), m.get("limit")),
        "rlaunch_over_head_alone": ratio(m.get("rlaunch"), m.get("head_alone")),
        "seed_verl_over_rlaunch": ratio(m.get("seed_verl"), m.get("rlaunch")),
        "seed_areal_over_rlaunch": ratio(m.get("seed_areal"), m.get("rlaunch")),
        "pinned_2_nodes": {"limit_s": m.get("limit_pinned"), "rlaunch_s": m.get("pinned"),
                           "ratio": ratio(m.get("pinned"), m.get("limit_pinned"))},
        "scale": scale,
        "not_formed": {k: sum(v is None for v in vals) for k, vals in samples.items()},
        "samples": samples,
        "loadavg_start": load_start, "loadavg_end": loadavg(), "cpus": os.cpu_count(),
    }
    checks = {
        "rlaunch within 1.15x of the limit": (result["rlaunch_over_limit"] or 99) <= 1.15,
        "pinned 2 nodes within 1.15x of the pinned head's start": (result["pinned_2_nodes"]["ratio"] or 99) <= 1.15,
        "1.3x faster than seed verl": (result["seed_verl_over_rlaunch"] or 0) >= 1.3,
        "1.3x faster than seed AReaL": (result["seed_areal_over_rlaunch"] or 0) >= 1.3,
    }
    for n, entry in scale.items():
        checks[f"{n} nodes: rlaunch within 1.1x of Ray's registration floor"] = (entry["rlaunch_over_floor"] or 99) <= 1.1
    if "seed_verl" not in cfg["styles"]:
        checks.pop("1.3x faster than seed verl")
    if "seed_areal" not in cfg["styles"]:
        checks.pop("1.3x faster than seed AReaL")
    if "pinned" not in cfg["styles"]:
        checks.pop("pinned 2 nodes within 1.15x of the pinned head's start")
    if "rlaunch" not in cfg["styles"]:
        checks.pop("rlaunch within 1.15x of the limit")
    result["targets_met"] = checks
    cfg["out"].parent.mkdir(parents=True, exist_ok=True)
    cfg["out"].write_text(json.dumps(result, indent=2) + "\n")

    def fmt(v):
        return "n/a" if v is None else f"{v:.1f} s"

    print(f"formation of {cfg['nodes']} nodes, median of {cfg['runs']} runs (load {load_start[0]} -> "
          f"{result['loadavg_end'][0]} on {os.cpu_count()} CPUs):")
    print(f"  limit (head's ray start) {fmt(result['limit_s'])}   head alone {fmt(result['head_alone_s'])}")
    print(f"  rlaunch ray-up           {fmt(result['rlaunch_s'])}   x{result['rlaunch_over_limit']} of the limit, "
          f"x{result['rlaunch_over_head_alone']} of the head alone")
    if result["head_registered_s"] and result["workers_registered_s"]:
        print(f"  registered: the head's raylet at {fmt(result['head_registered_s'])}, the last worker at "
              f"{fmt(result['workers_registered_s'])} (Ray starts no worker raylet before the head's registers)")
    pinned = result["pinned_2_nodes"]
    print(f"  2 nodes, a core each     {fmt(pinned['rlaunch_s'])}   x{pinned['ratio']} of the pinned head's "
          f"own start ({fmt(pinned['limit_s'])})")
    print(f"  seed verl style          {fmt(result['seed_verl_s'])}   x{result['seed_verl_over_rlaunch']} of rlaunch")
    print(f"  seed AReaL style         {fmt(result['seed_areal_s'])}   x{result['seed_areal_over_rlaunch']} of rlaunch")
    for n, entry in scale.items():
        print(f"  {n:>2} nodes: rlaunch {fmt(entry['rlaunch_s'])}, floor {fmt(entry['floor_s'])} "
              f"(x{entry['rlaunch_over_floor']}), seed verl {fmt(entry['seed_verl_s'])}, "
              f"seed AReaL {fmt(entry['seed_areal_s'])}")
    for name, ok in checks.items():
        print(f"  {'met ' if ok else 'MISS'} {name}")
    print(f"  -> {cfg['out']}")
    if "rlaunch" in cfg["styles"] and m.get("rlaunch") is None:
        return 3
    if cfg["smoke"] and check(cfg["out"], SCHEMA, "formation"):
        return 1
    return 1 if cfg["strict"] and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Launch benchmark: seconds from the command to the first training step of the 2-node local
rehearsal, rlaunch's `make launch` against the bare path, in the same run, alternating.

  rlaunch  `scripts/rlaunch launch RUN_ID=<id> SET=train.steps=S` (make launch's front door) from the
           command to the first row of metrics.jsonl (polled on the host). The run's own phases
           (verification.json "phases", rlaunch.job.phases) say where each second went. Then
           `make down`, timed (down_s).
  bare     what a person types without rlaunch, on the same kind of nodes: fresh namespaces from
           scripts/local-cluster (no Ray), `ray start --head` in the head's, then `ray start
           --address` in the others, then `ray job submit` of the same trainer with the same files
           (the rendered trl.json of an rlaunch plan of its own run id) and the env the trainer needs
           (RAY_ADDRESS, PYTHONPATH, GLOO_SOCKET_IFNAME): no plan, no preflight, no postflight.
ratio = rlaunch_first_step_s / bare_first_step_s (target <= 1.3). checks names what each of rlaunch's
own steps cost, from its phases: plan, preflight, the job's start, and formation against the bare
`ray start`s.

Usage: tests/bench/launch.py        (as root, with iproute2; after `make setup`)
Env:
  RLAUNCH_BENCH_RUNS        runs per path, >= 1 (default 2; smoke 1); the medians are reported
  RLAUNCH_BENCH_STEPS       train.steps of every run (default 4)
  RLAUNCH_BENCH_SMOKE       1: check the benchmark still runs (one run per path), then the JSON's keys
  RLAUNCH_BENCH_OUT         result file (default build/bench/launch.json)
  RLAUNCH_BENCH_SAMPLE      smoke only: a JSON file with rlaunch's path as measure() measured it in an
                            end-to-end test's own launch of the rehearsal (tests/e2e/conftest.py):
                            the smoke then runs the bare path only
  RLAUNCH_BENCH_STRICT      1: exit 1 when the target is missed (default 0)
Exit: 0 done, 1 the target missed (strict) or the JSON lacks a key or type (smoke), 2 bad input or no
  root / ip, 3 a path failed to reach its first step.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402 - tests/bench/, just put on the path
import owned  # noqa: E402
from formation import Cluster  # noqa: E402
from recovery import first_row_after  # noqa: E402
from schema import NUM, OPT, check  # noqa: E402
from faults_support import Launch, run_dir  # noqa: E402
from rlaunch.job import phases as phases_module  # noqa: E402

DEADLINE_S = 900
# A few steps cannot learn: the rehearsal's learning thresholds off, every other check as always.
NO_LEARNING = "verify.reward_last_min=0 verify.reward_gain_min=-1 verify.greedy_min=0"
PY = Path(os.environ.get("RLAUNCH_VENV", REPO / ".venv")) / "bin" / "python"
RAY = PY.parent / "ray"
SCHEMA = {
    "rlaunch_first_step_s": NUM, "bare_first_step_s": NUM, "ratio": NUM, "runs": int, "steps": int,
    "phases": dict, "checks": dict, "samples": dict, "down_s": OPT, "bare_formation_s": NUM,
    "bare_submit_to_first_step_s": NUM,
    "loadavg_start": list, "loadavg_end": list, "cpus": int, "targets_met": dict,
}


die, log, env_int = (partial(f, "launch-bench") for f in (common.die, common.log, common.env_int))
loadavg = common.loadavg


def first_row(metrics: Path, t0: float, deadline_s: float, alive) -> float:
    """Seconds after t0 at which metrics.jsonl has its first step (recovery's poll, every 0.1 s)."""
    return round(first_row_after(metrics, 0, deadline_s - (time.time() - t0), alive) - t0, 2)


def rlaunch_run(run_id: str, steps: int) -> dict:
    t0 = time.time()
    launch = Launch(f"RUN_ID={run_id}", f"SET=train.steps={steps} {NO_LEARNING}")
    try:
        got = measure(run_id, t0, launch.alive, launch.wait, lambda: launch.ended)
    except (RuntimeError, AssertionError):
        log(launch.tail())
        raise
    t1 = time.time()
    down = owned.take_down("run", run_id)
    return {**got, "down_s": round(time.time() - t1, 2) if down else None}


def measure(run_id: str, t0: float, alive, wait, ended, preset: str = "rehearsal") -> dict:
    """rlaunch's path of one launch started at t0 (a rehearsal of `preset`): the first step (polled
    on the shared storage while alive()), then wait(deadline) for its exit code (0, else a
    RuntimeError) and ended() its time, and the phases of its verification.json."""
    first = first_row(run_dir(run_id, preset) / "metrics.jsonl", t0, DEADLINE_S, alive)
    rc = wait(DEADLINE_S)
    if rc != 0:
        raise RuntimeError(f"make launch RUN_ID={run_id} exited {rc}")
    report = json.loads((run_dir(run_id, preset) / "verification.json").read_text())
    return {"first_step_s": first, "launch_s": round(ended() - t0, 2), "phases": report.get("phases", {}),
            "down_s": None}


def bare_run(run_id: str) -> dict:
    """The bare path: ray start on fresh namespaces, then ray job submit of the same trainer."""
    from rlaunch.plan import jobenv
    from rlaunch.config.spec import Spec

    spec = Spec.read(REPO / "build" / run_id / "spec.json")
    c = Cluster(run_id, {"ray": str(RAY)}, spec.cluster.nodes)
    head = c.nodes[0]
    procs: list[subprocess.Popen] = []
    logs = REPO / "build" / "bench" / "launch-logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        def node(rank: int) -> list[str]:
            n = c.nodes[rank]
            args = [f"--node-ip-address={n['ip']}", f"--temp-dir={n['temp_dir']}", "--disable-usage-stats"]
            if spec.cluster.cpus_per_node:
                args.append(f"--num-cpus={spec.cluster.cpus_per_node}")
            return args

        t0 = time.time()
        head_proc = c.spawn(0, [str(RAY), "start", "--head", "--port=6379", "--dashboard-host=0.0.0.0",
                                *node(0)], {}, logs / f"{run_id}-0.log")
        if head_proc.wait(timeout=DEADLINE_S) != 0:
            raise RuntimeError(f"bare: ray start --head failed (log {logs / f'{run_id}-0.log'})")
        workers = [c.spawn(r, [str(RAY), "start", f"--address={head['ip']}:6379", *node(r)], {},
                           logs / f"{run_id}-{r}.log") for r in range(1, len(c.nodes))]
        for w in workers:
            if w.wait(timeout=DEADLINE_S) != 0:
                raise RuntimeError(f"bare: a worker's ray start failed (logs in {logs})")
        formed = round(time.time() - t0, 2)
        submitted = time.time()
        env = {**jobenv.job_env(spec), "PYTHONPATH": str(REPO / "tools"), "PYTHONUNBUFFERED": "1",
               "RAY_ADDRESS": f"{head['ip']}:6379", "GLOO_SOCKET_IFNAME": "eth0"}
        command = [str(PY), "-m", "rlaunch.rehearsal.train", "--config", str(REPO / "build" / run_id / "trl.json")]
        procs.append(c.spawn(0, [str(RAY), "job", "submit", f"--address=http://{head['ip']}:8265",
                                 "--submission-id", run_id, "--runtime-env-json", json.dumps({"env_vars": env}),
                                 "--", *command], {}, logs / f"{run_id}-job.log"))
        first = first_row(run_dir(run_id) / "metrics.jsonl", t0, DEADLINE_S, lambda: procs[0].poll() is None)
        return {"first_step_s": first, "formation_s": formed,
                "submit_to_first_step_s": round(t0 + first - submitted, 2)}
    finally:
        c.down()
        for p in procs:  # `ray job submit` follows the job's log until the cluster is gone
            if p.poll() is None:
                p.kill()
            p.wait()


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def main() -> int:
    # TERM (e.g. from CI) unwinds like Ctrl-C: the `finally` below takes every cluster down.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if os.geteuid() != 0 or not shutil.which("ip"):
        die("needs root and iproute2's ip: both paths run a 2-node network-namespace cluster")
    smoke = os.environ.get("RLAUNCH_BENCH_SMOKE", "0")
    strict = os.environ.get("RLAUNCH_BENCH_STRICT", "0")
    for name, value in (("RLAUNCH_BENCH_SMOKE", smoke), ("RLAUNCH_BENCH_STRICT", strict)):
        if value not in ("0", "1"):
            die(f"{name}='{value}' is not allowed: need 0 or 1")
    runs = env_int("RLAUNCH_BENCH_RUNS", 1 if smoke == "1" else 2, 1)
    steps = env_int("RLAUNCH_BENCH_STEPS", 4, 1)
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or REPO / "build" / "bench" / "launch.json")
    sample = os.environ.get("RLAUNCH_BENCH_SAMPLE", "")
    if sample and smoke != "1":
        die("RLAUNCH_BENCH_SAMPLE is for the smoke run only (RLAUNCH_BENCH_SMOKE=1): a full run measures its own")
    owned.sweep("launch-bench")
    load_start = loadavg()
    samples: dict[str, list] = {"rlaunch": [], "bare": []}
    if sample:  # rlaunch's path as an end-to-end test launched and measured it (tests/e2e/conftest.py)
        samples["rlaunch"].append(json.loads(Path(sample).read_text()))
        log(f"rlaunch's path: from {sample}")
    ids = []
    try:
        for i in range(runs):
            rid, bid = f"bench-l{os.getpid()}-{i}", f"bench-b{os.getpid()}-{i}"
            ids += [bid] if sample else [rid, bid]
            if not sample:
                owned.claim("run", rid)
            owned.claim("cluster", bid)
            # The bare run's files: an rlaunch plan of its own id (its trl.json and spec.json).
            planned = subprocess.run([str(REPO / "scripts" / "rlaunch"), "plan", f"RUN_ID={bid}",
                                      f"SET=train.steps={steps} {NO_LEARNING}"], cwd=REPO, capture_output=True, text=True)
            if planned.returncode != 0:
                raise RuntimeError(f"make plan RUN_ID={bid}: {planned.stderr.strip()[-500:]}")
            order = (("rlaunch", rid), ("bare", bid)) if i % 2 == 0 else (("bare", bid), ("rlaunch", rid))
            if sample:
                order = (("bare", bid),)
            for path, run_id in order:
                log(f"run {i + 1}/{runs}: {path}")
                got = rlaunch_run(run_id, steps) if path == "rlaunch" else bare_run(run_id)
                samples[path].append(got)
                log(f"  first step after {got['first_step_s']:.1f} s")
    except (RuntimeError, AssertionError, OSError, ValueError, subprocess.SubprocessError) as err:
        log(f"a path failed: {err}")
        return 3
    finally:
        for run_id in ids:
            kind = "run" if run_id.startswith("bench-l") else "cluster"
            if owned.take_down(kind, run_id):
                owned.release(kind, run_id)
            shutil.rmtree(run_dir(run_id), ignore_errors=True)
            shutil.rmtree(REPO / "build" / run_id, ignore_errors=True)
    rl = median([s["first_step_s"] for s in samples["rlaunch"]])
    bare = median([s["first_step_s"] for s in samples["bare"]])
    bare_formation = median([s["formation_s"] for s in samples["bare"]])
    seen = {k for s in samples["rlaunch"] for k in s["phases"].get("phases", {})}
    names = [k for k in phases_module.ORDER if k in seen]
    phases = {k: median([s["phases"].get("phases", {}).get(k) for s in samples["rlaunch"]]) for k in names}
    # What rlaunch does that the bare path does not, each from the run's own phases. The job's start
    # is set against the bare submit's own way to the first step (the same trainer: its start varies).
    bare_submit = median([s["submit_to_first_step_s"] for s in samples["bare"]])
    ours = [phases.get("job_start"), phases.get("inputs") or 0.0, phases.get("first_step")]
    checks = {
        "plan (config, inputs, image and memory checks)": phases.get("plan"),
        "formation beyond the bare ray starts (ray-up's wait for every node)":
            round(phases["formation"] - bare_formation, 2) if phases.get("formation") is not None else None,
        "job start (submit, attempts record, the plan kept in the run directory) beyond the bare submit":
            round(sum(ours) - bare_submit, 2) if None not in ours and bare_submit is not None else None,
        "preflight on every node": phases.get("preflight"),
    }
    result = {
        "rlaunch_first_step_s": rl, "bare_first_step_s": bare, "ratio": round(rl / bare, 3),
        "runs": runs, "steps": steps, "phases": phases, "checks": checks, "bare_formation_s": bare_formation,
        "bare_submit_to_first_step_s": bare_submit,
        "down_s": median([s["down_s"] for s in samples["rlaunch"]]), "samples": samples,
        "loadavg_start": load_start, "loadavg_end": loadavg(), "cpus": os.cpu_count(),
    }
    result["targets_met"] = {"first step <= 1.3x the bare path": result["ratio"] <= 1.3}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"time to the first step, 2-node local rehearsal, median of {runs} (load {load_start[0]} -> "
          f"{result['loadavg_end'][0]} on {os.cpu_count()} CPUs):")
    print(f"  rlaunch {rl:.1f} s, bare ray start + ray job submit {bare:.1f} s: x{result['ratio']}")
    print("  rlaunch's phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items() if v is not None))
    for name, cost in checks.items():
        print(f"  cost of {name}: " + (f"{cost:.1f} s" if cost is not None else "not measured"))
    print(f"  make down {result['down_s']} s")
    for name, ok in result["targets_met"].items():
        print(f"  {'met ' if ok else 'MISS'} {name}")
    print(f"  -> {out}")
    if smoke == "1" and check(out, SCHEMA, "launch"):
        return 1
    return 1 if strict == "1" and not all(result["targets_met"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())

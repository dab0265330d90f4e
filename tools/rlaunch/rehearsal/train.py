"""Ray job driver for the CPU rehearsal: TRL's GRPOTrainer inside Ray Train's TorchTrainer.

Usage: python -m rlaunch.rehearsal.train --config CONFIG.json   (keys and defaults: below)

Runs as a Ray job driver. One Ray Train worker per Ray node (STRICT_SPREAD), gloo on CPU and NCCL
on GPU. Settings reach the workers only through the train loop config: env vars on the driver do
not reach raylets started earlier. In a submitted job, the job's runtime_env must make `rlaunch`
importable on every node (`env_vars.PYTHONPATH` or `working_dir`) and carry the env below.

Writes into run_dir (shared storage, read by postflight): metrics.jsonl, tensorboard/,
checkpoint/final/, eval.json, reward.png, train_summary.json (and ray-train/, Ray Train's own).
With smoke=true (SMOKE=1), at step 1: rank 0 saves model, tokenizer and optimizer state to
checkpoint/step-1/, every rank reloads them from there into its live model and optimizer (after
checking they are what it holds), and rank 0 runs a validation pass (greedy on the held-out prompts)
on the reloaded files: validation.json, reload.json. train_summary.json has each node's peak memory
(RSS; GPU memory reserved on GPU) and the measured s/step.
Prints a progress line every `progress_every` steps. Keys starting with "_" are ignored.
Beside this driver: the keys in rlaunch.rehearsal.settings, each worker's loop in
rlaunch.rehearsal.worker, the names above in rlaunch.rehearsal.layout.

Resumes by itself: with save_freq > 0 it checkpoints every save_freq steps (checkpoint/checkpoint-N,
HF Trainer's layout, the last 2 kept), and a start that finds a complete one in run_dir continues
from it (model, optimizer, scheduler, each rank's RNG, the data order) in the same histories:
metrics.jsonl keeps the steps up to the checkpoint and goes on from there, and TensorBoard's
directory gets a purge mark at the next step, so the steps done again replace the lost ones.

Env:
  RAY_ADDRESS          cluster to join (set by `ray job submit`); unset: ray.init() starts a local Ray
  GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE
                       outside a submitted job, forwarded to the workers with RAY_ADDRESS and
                       PYTHONPATH (default: unset)
  RAY_TRAIN_ENABLE_PRINT_PATCH  default here 0 (Ray's default 1 leaks bytecode dumps into logs)

Exit: 0 done; 1 training failed (a full storage is named, with what it left free); 2 bad config,
or fewer usable Ray nodes than num_workers by node_wait_s.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from rlaunch import cmdline
from rlaunch.job import attempts, checkpoints
from rlaunch.progress import seconds
from rlaunch.rehearsal import plot, tiny
from rlaunch.rehearsal.layout import (CHECKPOINTS, EVAL, METRICS, OUTPUTS, PLOT, RAY_TRAIN, SUMMARY, TENSORBOARD,
                                      WORKERS)
from rlaunch.rehearsal.settings import ConfigError, RehearsalConfig, load_config
from rlaunch.rehearsal.worker import train_loop
from rlaunch.verify.postflight import storage_full

PROG = "rlaunch.rehearsal.train"


def die(msg: str, code: int = 1) -> NoReturn:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


# Needed by worker processes before any train loop code runs: the collective backends read the
# socket settings when the process group forms, and Ray Train's helper actors read RAY_ADDRESS
# (with several Ray clusters on one host they cannot guess which one is theirs).
FORWARDED_ENV = ("RAY_ADDRESS", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE")


def _connect() -> None:
    """Join RAY_ADDRESS if set, else start a local Ray. A submitted job's runtime_env already
    carries PYTHONPATH and the socket settings to the workers; a plain driver passes its own."""
    import ray

    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:  # set by the Ray job supervisor
        ray.init()
        return
    tools_dir = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (tools_dir, os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, **{k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}}
    ray.init(runtime_env={"env_vars": env})


def _eligible_nodes(cfg: RehearsalConfig) -> list[str]:
    import ray

    need = {"CPU": cfg.cpus_per_worker, **({"GPU": 1} if cfg.use_gpu else {})}
    return [
        n["NodeManagerAddress"]
        for n in ray.nodes()
        if n["Alive"] and all(n["Resources"].get(k, 0) >= v for k, v in need.items())
    ]


def wait_for_nodes(cfg: RehearsalConfig) -> list[str]:
    """Poll until num_workers nodes can each host a worker; STRICT_SPREAD would otherwise hang."""
    deadline = time.monotonic() + cfg.node_wait_s
    while True:
        nodes = _eligible_nodes(cfg)
        if len(nodes) >= cfg.num_workers:
            return nodes
        if time.monotonic() > deadline:
            die(
                f"num_workers={cfg.num_workers} needs that many Ray nodes with "
                f"{cfg.cpus_per_worker} CPU{' and 1 GPU' if cfg.use_gpu else ''} each; "
                f"{len(nodes)} after {cfg.node_wait_s:.0f} s ({', '.join(nodes) or 'none'})",
                code=2,
            )
        time.sleep(0.5)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / METRICS
    if not path.exists():
        return []
    # A line may be half-written while rank 0 appends; skip it, the next poll sees it whole.
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def progress_line(row: dict[str, Any], target: int, rate: float | None = None) -> str:
    """`step S/T reward ... t Ns`, then `| X s/step, ETA Y` once a rate is known. rlaunch's log view
    (rlaunch.progress) turns these lines into one live bar on a terminal."""
    def num(key: str) -> str:
        val = row.get(key)
        return "nan" if val is None else f"{val:.3g}"

    line = (f"step {row['step']}/{target} reward {num('reward')} loss {num('loss')} "
            f"grad_norm {num('grad_norm')} t {row.get('time_s', 0):.0f}s")
    if rate is not None:
        line += f" | {rate:.3g} s/step, ETA {seconds(max(0, target - row['step']) * rate)}"
    return line


def step_rate(rows: list[dict[str, Any]], window: int = 20) -> float | None:
    """Seconds per step over the last `window` rows (recent speed, so the ETA follows changes)."""
    timed = [r for r in rows[-window - 1:] if r.get("time_s") is not None and r.get("step") is not None]
    if len(timed) < 2 or timed[-1]["step"] <= timed[0]["step"]:
        return None
    return float((timed[-1]["time_s"] - timed[0]["time_s"]) / (timed[-1]["step"] - timed[0]["step"]))


# Slow steps print a line at least this often (after the first step), not only every progress_every.
PROGRESS_SILENCE_S = 30.0


def follow_progress(cfg: RehearsalConfig, stop: threading.Event, clock: Callable[[], float] = time.monotonic,
                    start_step: int = 0) -> None:
    """Print a line every progress_every steps (and at least every PROGRESS_SILENCE_S while steps
    are slow) from metrics.jsonl, which rank 0 writes on shared storage; worker stdout on other
    nodes is prefixed and interleaved, so the driver speaks."""
    run_dir = Path(cfg.run_dir)
    printed, last_print = start_step, None
    while True:
        finished = stop.wait(1.0)
        rows = read_metrics(run_dir)
        if rows and last_print is None:
            last_print = clock()  # the silence clock starts with the first step
        if rows and rows[-1].get("step", 0) > printed:
            due = [i for i, r in enumerate(rows) if r.get("step", 0) > printed and
                   (r["step"] % cfg.progress_every == 0 or r["step"] == cfg.steps)]
            if not due and last_print is not None and clock() - last_print >= PROGRESS_SILENCE_S:
                due = [len(rows) - 1]
            for i in due:
                print(progress_line(rows[i], cfg.steps, step_rate(rows[:i + 1])), flush=True)
                printed, last_print = rows[i]["step"], clock()
        if finished:
            return


def _mean(values: list[float | None]) -> float | None:
    given = [v for v in values if v is not None]
    return sum(given) / len(given) if given else None


def summarize(cfg: RehearsalConfig, duration_s: float) -> dict[str, Any]:
    run_dir = Path(cfg.run_dir)
    rows = read_metrics(run_dir)
    if not (run_dir / WORKERS).is_file():
        # Rank 0 wrote it wherever Ray placed it; the driver only sees it through shared storage.
        raise RuntimeError(f"{run_dir / WORKERS} missing after training: run_dir must be storage "
                           "that every node shares")
    workers = json.loads((run_dir / WORKERS).read_text())
    rewards = [r.get("reward") for r in rows]
    tenth = max(1, len(rows) // 10)
    return {
        "steps": rows[-1]["step"] if rows else 0,
        "target_steps": cfg.steps,
        "num_workers": cfg.num_workers,
        "worker_nodes": workers["worker_nodes"],
        "worker_node_ids": workers["worker_node_ids"],
        "backend": workers["backend"],
        "reward_first": _mean(rewards[:tenth]),
        "reward_last": _mean(rewards[-tenth:]),
        "duration_s": round(duration_s, 1),
    }


def measurements(cfg: RehearsalConfig) -> dict[str, Any]:
    """What the run measured, for the smoke report: steady s/step (from the end of step 1, which a
    smoke run spends saving, reloading and validating, to the last), each node's peak memory, and
    the interface variables each worker had."""
    run_dir = Path(cfg.run_dir)
    workers = json.loads((run_dir / WORKERS).read_text())
    timed = [r for r in read_metrics(run_dir) if r.get("time_s") is not None and r.get("step") is not None]
    rate = ((timed[-1]["time_s"] - timed[0]["time_s"]) / (timed[-1]["step"] - timed[0]["step"])
            if len(timed) > 1 and timed[-1]["step"] > timed[0]["step"] else None)
    peaks: dict[str, dict[str, Any]] = {}
    for ip, peak in zip(workers["worker_nodes"], workers.get("peak_memory") or []):
        peaks.setdefault(ip, peak)
    return {"s_per_step": None if rate is None else round(rate, 4), "peak_memory": peaks,
            "worker_env": workers.get("worker_env", []), "smoke": cfg.smoke}


def clear_outputs(run_dir: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove this trainer's outputs (but `keep`) from an earlier attempt so nothing stale is verified."""
    for name in (n for n in OUTPUTS if n not in keep):
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def resume_point(cfg: RehearsalConfig) -> tuple[int, Path] | None:
    """The newest complete checkpoint-N in run_dir (step, path), or None: start at step 0."""
    found, skipped = checkpoints.trl_latest(Path(cfg.run_dir), cfg.num_workers)
    for note in skipped:
        print(f"not resuming from {note}", flush=True)
    return (found.step, Path(found.path)) if found else None


def continue_outputs(run_dir: Path, step: int) -> float:
    """Outputs for a run resumed at `step`: the final ones of an earlier attempt go, metrics.jsonl
    keeps its steps up to `step` (the later ones are done again), TensorBoard gets a purge mark at
    step + 1 in the same directory. Returns the training seconds those kept steps had taken."""
    clear_outputs(run_dir, keep=(METRICS, TENSORBOARD))
    kept = [r for r in read_metrics(run_dir) if isinstance(r.get("step"), int) and r["step"] <= step]
    tmp = run_dir / f".{METRICS}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
    tmp.replace(run_dir / METRICS)
    from torch.utils.tensorboard import SummaryWriter

    # TensorBoard drops the events at and after purge_step that earlier files of this directory hold.
    SummaryWriter(log_dir=str(run_dir / TENSORBOARD), purge_step=step + 1).close()
    return float(kept[-1].get("time_s") or 0.0) if kept else 0.0


def incomplete_checkpoints(run_dir: Path, workers: int) -> list[Path]:
    return [p for p in sorted((run_dir / CHECKPOINTS).glob("checkpoint-*"))
            if p.is_dir() and checkpoints.trl_problems(p, workers)]


def storage_full_message(cfg: RehearsalConfig) -> str | None:
    """After a failure: the storage that filled up, and the incomplete checkpoint removed so the
    job's reports still fit (it cannot be resumed from anyway)."""
    run_dir = Path(cfg.run_dir)
    full = storage_full(run_dir)
    if not full:
        return None
    removed = []
    for path in incomplete_checkpoints(run_dir, cfg.num_workers):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    rows = read_metrics(run_dir)
    at = f" after step {rows[-1]['step']}" if rows else ""
    message = (f"storage full{at}: {full}; checkpoints need room on {run_dir} (save_freq={cfg.save_freq})"
               + (f"; removed the incomplete {', '.join(removed)} so the reports can be written" if removed else ""))
    try:  # postflight reads it there: the space freed above no longer shows the storage full
        attempts.append(run_dir, {"event": "storage_full", "attempt": attempts.current(run_dir),
                                  "at": attempts.now_iso(), "detail": message})
    except OSError:
        pass
    return message


def run(cfg: RehearsalConfig) -> dict[str, Any]:
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    start = time.monotonic()
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resume = resume_point(cfg)
    offset = 0.0
    if resume:
        offset = continue_outputs(run_dir, resume[0])
        print(f"resuming from step {resume[0]} ({resume[1]})", flush=True)
    else:
        clear_outputs(run_dir)
        for stale in (run_dir / CHECKPOINTS).glob("checkpoint-*"):  # none complete: none to keep
            shutil.rmtree(stale, ignore_errors=True)
    (run_dir / RAY_TRAIN).mkdir(exist_ok=True)
    # Ray Train forwards these to its controller and workers (set before fit; the job's own wins).
    # Its print patch reroutes worker stdout past `dill`'s capture, so datasets' function hashing
    # dumps bytecode into the job log.
    os.environ.setdefault("RAY_TRAIN_ENABLE_PRINT_PATCH", "0")
    # The controller polls the workers every 2 s by default: the run's end waited up to that long.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
    # Its preemption watcher is one more actor process per start, for drain notices this loop never
    # reads (ray.train.get_preemption_info; a lost node is rlaunch's node watch's, then RESUME=1's):
    # a second of CPU while the workers start, and an error line in every job log.
    os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")
    files = [f for f in cfg.data.split(",") if f]
    if files:  # before any node is asked for: a row the tiny model cannot read stops the run here
        try:
            print(f"dataset: {len(tiny.read_rows(files))} rows from {', '.join(files)}", flush=True)
        except (OSError, ValueError) as err:
            die(f"DATA: {err}", 2)
    _connect()
    nodes = wait_for_nodes(cfg)
    print(f"{len(nodes)} Ray nodes ready ({', '.join(nodes)}); training {cfg.steps} steps "
          f"on {cfg.num_workers} workers", flush=True)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={**dataclasses.asdict(cfg), "_resume": str(resume[1]) if resume else "",
                           "_time_offset": offset},
        torch_config=TorchConfig(backend="nccl" if cfg.use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=cfg.num_workers,
            use_gpu=cfg.use_gpu,
            resources_per_worker={"CPU": cfg.cpus_per_worker},
            # One worker per node, guaranteed: the rehearsal must cross node boundaries.
            placement_strategy="STRICT_SPREAD",
        ),
        run_config=RunConfig(
            name=RAY_TRAIN,
            storage_path=str(run_dir),
            failure_config=FailureConfig(max_failures=0),
        ),
    )
    stop = threading.Event()
    follower = threading.Thread(target=follow_progress, args=(cfg, stop, time.monotonic,
                                                              resume[0] if resume else 0), daemon=True)
    follower.start()
    # matplotlib loads while the workers train, not after them (a second or two of the run's end).
    threading.Thread(target=plot.preload, daemon=True).start()
    try:
        trainer.fit()
    finally:
        stop.set()
        follower.join(timeout=10)
    summary = {**summarize(cfg, time.monotonic() - start), **measurements(cfg),
               "resumed_from_step": resume[0] if resume else None}
    plot.plot_reward(run_dir / METRICS, run_dir / PLOT)
    (run_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    ray.shutdown()
    return summary


def closing_line(summary: dict[str, Any], run_dir: Path) -> str:
    score = ""
    eval_path = run_dir / EVAL
    if eval_path.exists():
        ev = json.loads(eval_path.read_text())
        score = f", greedy {ev['greedy_correct']}/{ev['greedy_total']}"

    def fmt(val: float | None) -> str:
        return "n/a" if val is None else f"{val:.2f}"

    return (f"done: {summary['steps']}/{summary['target_steps']} steps on "
            f"{', '.join(summary['worker_nodes'])}, reward {fmt(summary['reward_first'])} -> "
            f"{fmt(summary['reward_last'])}{score}, {summary['duration_s']:.0f} s; outputs in {run_dir}")


def main(argv: list[str] | None = None) -> int:
    keys = "\n".join(f"  {f.name:<22} {'(required)' if f.default is dataclasses.MISSING else f.default}"
                     for f in dataclasses.fields(RehearsalConfig))
    parser = cmdline.parser(PROG, __doc__, epilog=f"config keys:\n{keys}")
    parser.add_argument("--config", required=True, help="JSON file with the config keys below")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        die(str(err), code=2)
    try:
        summary = run(cfg)
    except Exception as err:  # Ray wraps worker errors; keep the traceback, end with one line.
        traceback.print_exc()
        full = storage_full_message(cfg)
        die(full or f"training failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    print(closing_line(summary, Path(cfg.run_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

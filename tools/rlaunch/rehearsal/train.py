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

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

from rlaunch.job import phases

PROG = "rlaunch.rehearsal.train"

# Names postflight reads; keep them in sync with the verification code.
METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"
CHECKPOINTS = "checkpoint"  # HF Trainer's output_dir: checkpoint-N every save_freq steps, and final/
FINAL_CHECKPOINT = "checkpoint/final"
KEEP_CHECKPOINTS = 2  # the newest may be cut short by a lost node; the one before stays whole
INIT_CHECKPOINT = "checkpoint/init"  # only with beta > 0: the KL reference
EVAL = "eval.json"
PLOT = "reward.png"
SUMMARY = "train_summary.json"
STEP1_CHECKPOINT = "checkpoint/step-1"  # smoke: saved and reloaded at step 1
VALIDATION = "validation.json"  # smoke: the validation pass at step 1
RELOAD = "reload.json"  # smoke: what the reload at step 1 found
RAY_TRAIN = "ray-train"  # Ray Train's storage for this run; also where rank 0 leaves WORKERS
WORKERS = f"{RAY_TRAIN}/workers.json"  # rank 0 -> driver: Ray Train V2 drops metrics without a checkpoint
OUTPUTS = (METRICS, TENSORBOARD, FINAL_CHECKPOINT, INIT_CHECKPOINT, EVAL, PLOT, SUMMARY, WORKERS,
           STEP1_CHECKPOINT, VALIDATION, RELOAD)


@dataclasses.dataclass(frozen=True)
class RehearsalConfig:
    """Every setting of a rehearsal run. Defaults are the measured CPU recipe."""

    run_dir: str  # absolute path on storage every node sees
    num_workers: int = 2  # Ray Train workers, one per Ray node
    use_gpu: bool = False
    steps: int = 300  # optimizer steps
    group_size: int = 8  # GRPO completions per prompt
    # Measured (2 workers): a global batch of 64 completions (8 prompts x 8) at 3e-3 learns in ~150
    # steps on every seed tried; 32 per step left some prompts stuck on a wrong digit for good.
    learning_rate: float = 3e-3
    lr_scheduler: str = "constant"
    seed: int = 0
    max_completion_length: int = 6
    per_device_batch: int = 32  # completions per worker per step
    temperature: float = 1.0
    beta: float = 0.0  # KL weight; 0 skips the reference model
    eval_prompts: int = 10  # held-out prompts scored greedily after training
    dataset_size: int = 4096  # sampled prompts; the trainer cycles through them
    cpus_per_worker: int = 1
    torch_threads: int = 1  # per worker; more threads only contend on small CPU hosts
    node_wait_s: float = 120.0  # deadline for enough Ray nodes to be alive
    progress_every: int = 10  # steps between progress lines
    smoke: bool = False  # validation and checkpoint save + reload at step 1 (SMOKE=1)
    save_freq: int = 0  # checkpoint every N steps to resume from (0: only the final model)


LR_SCHEDULERS = ("constant", "linear", "cosine")


class ConfigError(ValueError):
    """A bad config value; the message names key, value and what is allowed."""


def _check_type(name: str, value, kind) -> object:
    # bool is an int in Python; a JSON `true` for an int key (or 1 for a bool) is a mistake.
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ConfigError(f"{name}={value!r}: expected {kind.__name__}")
    return value


def _check_ranges(cfg: RehearsalConfig) -> None:
    positive = ("num_workers", "steps", "max_completion_length", "per_device_batch", "eval_prompts",
                "dataset_size", "cpus_per_worker", "torch_threads", "progress_every")
    for name in positive:
        if getattr(cfg, name) < 1:
            raise ConfigError(f"{name}={getattr(cfg, name)!r}: must be >= 1")
    if not Path(cfg.run_dir).is_absolute():
        raise ConfigError(f"run_dir={cfg.run_dir!r}: must be an absolute path on shared storage")
    if cfg.group_size < 2:
        raise ConfigError(f"group_size={cfg.group_size!r}: must be >= 2 (GRPO compares within a group)")
    if not (cfg.learning_rate > 0 and math.isfinite(cfg.learning_rate)):
        raise ConfigError(f"learning_rate={cfg.learning_rate!r}: must be a finite number > 0")
    if not cfg.temperature > 0:
        raise ConfigError(f"temperature={cfg.temperature!r}: must be > 0")
    if cfg.beta < 0:
        raise ConfigError(f"beta={cfg.beta!r}: must be >= 0")
    if cfg.save_freq < 0:
        raise ConfigError(f"save_freq={cfg.save_freq!r}: must be >= 0 (0: only the final checkpoint)")
    if cfg.node_wait_s <= 0:
        raise ConfigError(f"node_wait_s={cfg.node_wait_s!r}: must be > 0")
    if cfg.lr_scheduler not in LR_SCHEDULERS:
        raise ConfigError(f"lr_scheduler={cfg.lr_scheduler!r}: allowed {', '.join(LR_SCHEDULERS)}")
    global_batch = cfg.per_device_batch * cfg.num_workers
    if global_batch % cfg.group_size:
        raise ConfigError(
            f"group_size={cfg.group_size}: must divide per_device_batch x num_workers = {global_batch}"
        )


def parse_config(raw: dict) -> RehearsalConfig:
    """Validate a config mapping: unknown keys, missing run_dir, wrong types, bad ranges."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: expected a JSON object, got {type(raw).__name__}")
    # Keys starting with "_" are annotations (a hand-written config's notes), not settings.
    raw = {k: v for k, v in raw.items() if not str(k).startswith("_")}
    fields = {f.name: f for f in dataclasses.fields(RehearsalConfig)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key; allowed: {', '.join(fields)}")
    if "run_dir" not in raw:
        raise ConfigError("run_dir: required (absolute path on shared storage)")
    # Annotations are strings under `from __future__ import annotations`.
    kinds = {"str": str, "int": int, "float": float, "bool": bool}
    values = {k: _check_type(k, v, kinds[fields[k].type]) for k, v in raw.items()}
    cfg = RehearsalConfig(**values)
    _check_ranges(cfg)
    return cfg


def load_config(path: str) -> RehearsalConfig:
    """Read CONFIG.json; keys starting with "_" are annotations, not settings."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"--config {path}: cannot read JSON: {err}") from err
    if isinstance(raw, dict):
        raw = {k: v for k, v in raw.items() if not k.startswith("_")}
    return parse_config(raw)


# ---------------------------------------------------------------- worker side


def _metrics_callback(run_dir: Path, t0: float):
    """A TrainerCallback that appends one JSON line per optimizer step (rank 0 only). time_s counts
    training time across attempts: t0 is set back by the time the resumed steps had taken."""
    from transformers import TrainerCallback

    class MetricsWriter(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            # The end-of-training log has train_runtime and no loss; only per-step logs count.
            if not state.is_world_process_zero or not logs or "loss" not in logs:
                return
            row = {
                "step": int(state.global_step),
                "reward": logs.get("reward"),
                "loss": logs.get("loss"),
                "grad_norm": logs.get("grad_norm"),
                "lr": logs.get("learning_rate"),
                "time_s": round(time.monotonic() - t0, 3),
                "reward_std": logs.get("reward_std"),
                "completion_length": logs.get("completions/mean_length"),
            }
            with (run_dir / METRICS).open("a") as fh:
                fh.write(json.dumps(row) + "\n")

    return MetricsWriter()


def _gather_workers() -> dict:
    """Node IP and Ray node id of every rank, in rank order, the process group's backend, and the
    interface variables each worker was started with (the job's runtime env, or preflight's pick)."""
    import ray
    import torch.distributed as dist

    # The address the raylet registered (--node-ip-address), not a guess from the host's routes:
    # several Ray nodes may share a host, and a namespace node's host has other addresses.
    node_id = ray.get_runtime_context().get_node_id()
    ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node_id)
    mine = (ip, node_id, {k: os.environ.get(k, "") for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")})
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return {
        "worker_nodes": [ip for ip, _, _ in every],
        "worker_node_ids": [node_id for _, node_id, _ in every],
        "worker_env": [env for _, _, env in every],
        "backend": str(dist.get_backend()),
    }


def _peak_memory(use_gpu: bool) -> dict:
    """This worker's peak so far: RSS (the kernel's high-water mark) and, on GPU, CUDA's reserved."""
    import resource

    out = {"rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if use_gpu:
        import torch

        out["gpu_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return out


def _gather_peaks(use_gpu: bool) -> list[dict]:
    import torch.distributed as dist

    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, _peak_memory(use_gpu))
    return every


def _step1_callback(run_dir: Path, cfg: "RehearsalConfig"):
    """Smoke: at step 1, save the checkpoint, reload it into every rank, validate on it."""
    from transformers import TrainerCallback

    class Step1(TrainerCallback):
        trainer = None  # set once the trainer exists

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                _save_reload_validate(self.trainer, run_dir, cfg)

    return Step1()


def _save_reload_validate(trainer, run_dir: Path, cfg: "RehearsalConfig") -> None:
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

    from rlaunch.rehearsal import evaluate

    started = time.monotonic()
    path = run_dir / STEP1_CHECKPOINT
    model = trainer.accelerator.unwrap_model(trainer.model)
    rank = dist.get_rank()
    if rank == 0:
        model.save_pretrained(path)  # safetensors
        trainer.processing_class.save_pretrained(path)
        torch.save(trainer.optimizer.state_dict(), path / "optimizer.pt")
    dist.barrier()
    saved_s = time.monotonic() - started
    # Every rank reads the files back (shared storage) and must find exactly what it holds.
    weights = load_file(str(path / "model.safetensors"))
    live = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    differ = [k for k, v in weights.items() if k in live and not torch.equal(v, live[k])]
    missing = sorted(set(live) - set(weights) - {"lm_head.weight"})  # tied to the embedding: saved once
    model.load_state_dict(weights, strict=False)
    optim = torch.load(path / "optimizer.pt", weights_only=False)
    trainer.optimizer.load_state_dict(optim)
    dist.barrier()
    if rank == 0:
        validation = evaluate.score_checkpoint(str(path), cfg.eval_prompts, cfg.max_completion_length)
        (run_dir / VALIDATION).write_text(json.dumps({"step": 1, **validation}, indent=2) + "\n")
        (run_dir / RELOAD).write_text(json.dumps({
            "step": 1, "path": str(path), "tensors": len(weights), "differ": differ, "missing": missing,
            "optimizer_states": len(optim.get("state", {})), "save_s": round(saved_s, 2),
            "reload_s": round(time.monotonic() - started - saved_s, 2)}, indent=2) + "\n")
    dist.barrier()


def _grpo_args(cfg: RehearsalConfig, run_dir: Path):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(run_dir / CHECKPOINTS),
        max_steps=cfg.steps,
        per_device_train_batch_size=cfg.per_device_batch,
        gradient_accumulation_steps=1,
        num_generations=cfg.group_size,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        beta=cfg.beta,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=0,
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=not cfg.use_gpu,
        bf16=False,
        logging_steps=1,
        report_to=["tensorboard"],
        save_strategy="steps" if cfg.save_freq else "no",
        save_steps=cfg.save_freq or 500,
        save_total_limit=KEEP_CHECKPOINTS,
        disable_tqdm=True,
        log_level="warning",
        dataloader_num_workers=0,
    )


def train_loop(config: dict) -> None:
    """Ray Train worker body: build the tiny world, run GRPO (from `_resume`, a checkpoint, when
    given), save and score the final model."""
    import ray.train
    import torch
    from transformers import PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from rlaunch.rehearsal import evaluate, tiny

    resume = config.get("_resume") or None
    cfg = RehearsalConfig(**{k: v for k, v in config.items() if not k.startswith("_")})
    t0 = time.monotonic() - float(config.get("_time_offset") or 0.0)
    hf_logging.disable_progress_bar()  # weight load/save bars are noise in the job log
    torch.set_num_threads(cfg.torch_threads)
    run_dir = Path(cfg.run_dir)
    rank = ray.train.get_context().get_world_rank()
    # Read by transformers' TensorBoard callback; set here because driver env vars stop at the driver.
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / TENSORBOARD)
    workers = _gather_workers()

    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(cfg.seed)
    if cfg.beta > 0:
        # TRL loads the KL reference from the policy's name_or_path: the initial weights, shared.
        init_dir = run_dir / INIT_CHECKPOINT
        if rank == 0:
            model.save_pretrained(init_dir)
        torch.distributed.barrier()
        model.config.name_or_path = str(init_dir)
    step1 = _step1_callback(run_dir, cfg) if cfg.smoke else None
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=tiny.copy_reward,
        args=_grpo_args(cfg, run_dir),
        train_dataset=tiny.build_dataset(tokenizer, cfg.dataset_size, cfg.seed),
        processing_class=tokenizer,
        callbacks=[_metrics_callback(run_dir, t0), *([step1] if step1 else [])],
    )
    if step1:
        step1.trainer = trainer
    # disable_tqdm swaps the progress bar for a dict print per step; the driver prints progress.
    trainer.remove_callback(PrinterCallback)
    trainer.train(resume_from_checkpoint=resume)
    final = run_dir / FINAL_CHECKPOINT
    trainer.save_model(str(final))  # rank 0 writes model + tokenizer
    trainer.accelerator.wait_for_everyone()
    workers["peak_memory"] = _gather_peaks(cfg.use_gpu)
    if rank == 0:
        # Scored from the saved files, so the checkpoint round trip is part of the check.
        phases.mark(run_dir, "evaluation", "start")
        result = evaluate.score_checkpoint(str(final), cfg.eval_prompts, cfg.max_completion_length)
        phases.mark(run_dir, "evaluation", "end")
        (run_dir / EVAL).write_text(json.dumps(result, indent=2) + "\n")
        workers["steps"] = int(trainer.state.global_step)
        (run_dir / WORKERS).write_text(json.dumps(workers, indent=2) + "\n")


# ---------------------------------------------------------------- driver side


def die(msg: str, code: int = 1):
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


def read_metrics(run_dir: Path) -> list[dict]:
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


def progress_line(row: dict, target: int, rate: float | None = None) -> str:
    """`step S/T reward ... t Ns`, then `| X s/step, ETA Y` once a rate is known. rlaunch's log view
    (rlaunch.progress) turns these lines into one live bar on a terminal."""
    def num(key):
        val = row.get(key)
        return "nan" if val is None else f"{val:.3g}"

    line = (f"step {row['step']}/{target} reward {num('reward')} loss {num('loss')} "
            f"grad_norm {num('grad_norm')} t {row.get('time_s', 0):.0f}s")
    if rate is not None:
        from rlaunch.progress import seconds

        line += f" | {rate:.3g} s/step, ETA {seconds(max(0, target - row['step']) * rate)}"
    return line


def step_rate(rows: list[dict], window: int = 20) -> float | None:
    """Seconds per step over the last `window` rows (recent speed, so the ETA follows changes)."""
    timed = [r for r in rows[-window - 1:] if r.get("time_s") is not None and r.get("step") is not None]
    if len(timed) < 2 or timed[-1]["step"] <= timed[0]["step"]:
        return None
    return (timed[-1]["time_s"] - timed[0]["time_s"]) / (timed[-1]["step"] - timed[0]["step"])


# Slow steps print a line at least this often (after the first step), not only every progress_every.
PROGRESS_SILENCE_S = 30.0


def follow_progress(cfg: RehearsalConfig, stop: threading.Event, clock=time.monotonic, start_step: int = 0) -> None:
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
            if not due and clock() - last_print >= PROGRESS_SILENCE_S:
                due = [len(rows) - 1]
            for i in due:
                print(progress_line(rows[i], cfg.steps, step_rate(rows[:i + 1])), flush=True)
                printed, last_print = rows[i]["step"], clock()
        if finished:
            return


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(cfg: RehearsalConfig, duration_s: float) -> dict:
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


def measurements(cfg: RehearsalConfig) -> dict:
    """What the run measured, for the smoke report: steady s/step (from the end of step 1, which a
    smoke run spends saving, reloading and validating, to the last), each node's peak memory, and
    the interface variables each worker had."""
    run_dir = Path(cfg.run_dir)
    workers = json.loads((run_dir / WORKERS).read_text())
    timed = [r for r in read_metrics(run_dir) if r.get("time_s") is not None and r.get("step") is not None]
    rate = ((timed[-1]["time_s"] - timed[0]["time_s"]) / (timed[-1]["step"] - timed[0]["step"])
            if len(timed) > 1 and timed[-1]["step"] > timed[0]["step"] else None)
    peaks: dict[str, dict] = {}
    for ip, peak in zip(workers["worker_nodes"], workers.get("peak_memory") or []):
        peaks.setdefault(ip, peak)
    return {"s_per_step": None if rate is None else round(rate, 4), "peak_memory": peaks,
            "worker_env": workers.get("worker_env", []), "smoke": cfg.smoke}


def clear_outputs(run_dir: Path) -> None:
    """Remove this trainer's outputs from an earlier attempt so nothing stale is verified."""
    for name in OUTPUTS:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def resume_point(cfg: RehearsalConfig) -> tuple[int, Path] | None:
    """The newest complete checkpoint-N in run_dir (step, path), or None: start at step 0."""
    from rlaunch.job import checkpoints

    found, skipped = checkpoints.latest({"framework": {"name": "trl"}, "cluster": {"nodes": cfg.num_workers}},
                                        Path(cfg.run_dir))
    for note in skipped:
        print(f"not resuming from {note}", flush=True)
    return (found.step, Path(found.path)) if found else None


def continue_outputs(run_dir: Path, step: int) -> float:
    """Outputs for a run resumed at `step`: the final ones of an earlier attempt go, metrics.jsonl
    keeps its steps up to `step` (the later ones are done again), TensorBoard gets a purge mark at
    step + 1 in the same directory. Returns the training seconds those kept steps had taken."""
    for name in OUTPUTS:
        if name in (METRICS, TENSORBOARD):
            continue
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    kept = [r for r in read_metrics(run_dir) if isinstance(r.get("step"), int) and r["step"] <= step]
    tmp = run_dir / f".{METRICS}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
    tmp.replace(run_dir / METRICS)
    from torch.utils.tensorboard import SummaryWriter

    # TensorBoard drops the events at and after purge_step that earlier files of this directory hold.
    SummaryWriter(log_dir=str(run_dir / TENSORBOARD), purge_step=step + 1).close()
    return float(kept[-1].get("time_s") or 0.0) if kept else 0.0


def incomplete_checkpoints(run_dir: Path, workers: int) -> list[Path]:
    from rlaunch.job import checkpoints

    return [p for p in sorted((run_dir / CHECKPOINTS).glob("checkpoint-*"))
            if p.is_dir() and checkpoints.trl_problems(p, workers)]


def storage_full_message(cfg: RehearsalConfig) -> str | None:
    """After a failure: the storage that filled up, and the incomplete checkpoint removed so the
    job's reports still fit (it cannot be resumed from anyway)."""
    from rlaunch.verify.postflight import storage_full

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
    from rlaunch.job import attempts

    try:  # postflight reads it there: the space freed above no longer shows the storage full
        attempts.append(run_dir, {"event": "storage_full", "attempt": attempts.current(run_dir),
                                  "at": attempts.now_iso(), "detail": message})
    except OSError:
        pass
    return message


def run(cfg: RehearsalConfig) -> dict:
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
    # Ray Train's print patch reroutes worker stdout past `dill`'s capture, so datasets' function
    # hashing dumps bytecode into the job log. Ray Train forwards this variable to its workers.
    os.environ.setdefault("RAY_TRAIN_ENABLE_PRINT_PATCH", "0")
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
    try:
        trainer.fit()
    finally:
        stop.set()
        follower.join(timeout=10)
    summary = {**summarize(cfg, time.monotonic() - start), **measurements(cfg),
               "resumed_from_step": resume[0] if resume else None}
    from rlaunch.rehearsal import plot

    plot.plot_reward(run_dir / METRICS, run_dir / PLOT)
    (run_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    ray.shutdown()
    return summary


def closing_line(summary: dict, run_dir: Path) -> str:
    score = ""
    eval_path = run_dir / EVAL
    if eval_path.exists():
        ev = json.loads(eval_path.read_text())
        score = f", greedy {ev['greedy_correct']}/{ev['greedy_total']}"

    def fmt(val):
        return "n/a" if val is None else f"{val:.2f}"

    return (f"done: {summary['steps']}/{summary['target_steps']} steps on "
            f"{', '.join(summary['worker_nodes'])}, reward {fmt(summary['reward_first'])} -> "
            f"{fmt(summary['reward_last'])}{score}, {summary['duration_s']:.0f} s; outputs in {run_dir}")


def main(argv: list[str] | None = None) -> int:
    keys = "\n".join(f"  {f.name:<22} {'(required)' if f.default is dataclasses.MISSING else f.default}"
                     for f in dataclasses.fields(RehearsalConfig))
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=f"config keys:\n{keys}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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

"""What each Ray Train worker of the rehearsal runs (`train_loop`, handed to TorchTrainer by the driver,
rlaunch.rehearsal.train): the tiny world, TRL's GRPOTrainer on it, rank 0's metrics.jsonl, the smoke
run's save + reload + validation at step 1, and the final checkpoint and its greedy score. torch,
transformers, trl and ray are imported inside the functions: they exist only on the workers' side."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from rlaunch.job import phases
from rlaunch.rehearsal import evaluate, tiny
from rlaunch.rehearsal.layout import (CHECKPOINTS, EVAL, FINAL_CHECKPOINT, INIT_CHECKPOINT, METRICS, RELOAD,
                                      STEP1_CHECKPOINT, TENSORBOARD, VALIDATION, WORKERS)
from rlaunch.rehearsal.settings import RehearsalConfig

KEEP_CHECKPOINTS = 2  # the newest may be cut short by a lost node; the one before stays whole


def _metrics_callback(run_dir: Path, t0: float) -> Any:
    """A TrainerCallback that appends one JSON line per optimizer step (rank 0 only). time_s counts
    training time across attempts: t0 is set back by the time the resumed steps had taken."""
    from transformers import TrainerCallback

    class MetricsWriter(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
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


def _reward(name: str) -> tuple[Any, str]:
    """The reward function `<module>:<function>` (rlaunch's copy reward for ""), and the file it came
    from: a user's module is imported from CODE, first on every worker's PYTHONPATH."""
    if not name:
        return tiny.copy_reward, inspect.getsourcefile(tiny.copy_reward) or ""
    module, _, function = name.partition(":")
    found = getattr(importlib.import_module(module), function)
    return found, inspect.getsourcefile(found) or ""


def _gather_workers(reward_file: str = "", rows: str = "") -> dict[str, Any]:
    """Node IP and Ray node id of every rank, in rank order, the process group's backend, the
    interface variables each worker was started with (the job's runtime env, or preflight's pick),
    where its reward came from and which rows it read ("<n> rows from <files>"; "": the made-up task)."""
    import ray
    import torch.distributed as dist

    # The address the raylet registered (--node-ip-address), not a guess from the host's routes:
    # several Ray nodes may share a host, and a namespace node's host has other addresses.
    node_id = ray.get_runtime_context().get_node_id()
    ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node_id)
    mine = (ip, node_id, {k: os.environ.get(k, "") for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")},
            reward_file, rows)
    every: list[Any] = [None] * dist.get_world_size()  # all_gather_object fills it with every rank's `mine`
    dist.all_gather_object(every, mine)
    return {
        "worker_nodes": [mine[0] for mine in every],
        "worker_node_ids": [mine[1] for mine in every],
        "worker_env": [mine[2] for mine in every],
        "worker_reward": [mine[3] for mine in every],  # the file each rank's reward came from
        "worker_rows": [mine[4] for mine in every],  # the user's rows each rank trained on (DATA=)
        "backend": str(dist.get_backend()),
    }


def _peak_memory(use_gpu: bool) -> dict[str, Any]:
    """This worker's peak so far: RSS (the kernel's high-water mark) and, on GPU, CUDA's reserved."""
    out = {"rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if use_gpu:
        import torch

        out["gpu_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return out


def _gather_peaks(use_gpu: bool) -> list[dict[str, Any]]:
    import torch.distributed as dist

    every: list[Any] = [None] * dist.get_world_size()  # filled with every rank's peaks
    dist.all_gather_object(every, _peak_memory(use_gpu))
    return every


def _step1_callback(run_dir: Path, cfg: RehearsalConfig) -> Any:
    """Smoke: at step 1, save the checkpoint, reload it into every rank, validate on it."""
    from transformers import TrainerCallback

    class Step1(TrainerCallback):
        trainer = None  # set once the trainer exists

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == 1:
                _save_reload_validate(self.trainer, run_dir, cfg)

    return Step1()


def _save_reload_validate(trainer: Any, run_dir: Path, cfg: RehearsalConfig) -> None:
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

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


def _grpo_args(cfg: RehearsalConfig, run_dir: Path) -> Any:
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


def train_loop(config: dict[str, Any]) -> None:
    """Ray Train worker body: build the tiny world, run GRPO (from `_resume`, a checkpoint, when
    given), save and score the final model."""
    import ray.train
    import torch
    from transformers import PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    resume = config.get("_resume") or None
    cfg = RehearsalConfig(**{k: v for k, v in config.items() if not k.startswith("_")})
    t0 = time.monotonic() - float(config.get("_time_offset") or 0.0)
    hf_logging.disable_progress_bar()  # weight load/save bars are noise in the job log
    torch.set_num_threads(cfg.torch_threads)
    run_dir = Path(cfg.run_dir)
    rank = ray.train.get_context().get_world_rank()
    # Read by transformers' TensorBoard callback; set here because driver env vars stop at the driver.
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / TENSORBOARD)
    reward, reward_file = _reward(cfg.reward)
    files = [f for f in cfg.data.split(",") if f]
    rows = tiny.read_rows(files) if files else None  # checked at plan time too; here on what the node reads
    workers = _gather_workers(reward_file, f"{len(rows)} rows from {','.join(files)}" if rows else "")

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
        reward_funcs=reward,
        args=_grpo_args(cfg, run_dir),
        train_dataset=tiny.build_dataset(tokenizer, cfg.dataset_size, cfg.seed, rows),
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

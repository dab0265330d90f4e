"""Where each framework writes its outputs, as documented upstream (versions pinned in
configs/versions.yaml), expressed relative to one run directory.

Every location derives from the run directory given to postflight, so `make verify RUN_DIR=...`
also works on a copy of a run (downloaded from a bucket). An adapter that puts something elsewhere
passes it explicitly: `postflight --path KEY=VALUE` (the keys are listed per framework below).

- trl (rlaunch's rehearsal trainer, rlaunch.rehearsal.train): metrics.jsonl, tensorboard/,
  checkpoint/final/, eval.json, reward.png, train_summary.json in the run directory.
- verl 0.9: the `file` logger writes one JSON line per step, {"step": N, "data": {...}}, to
  $VERL_FILE_LOGGER_PATH (rlaunch sets it to <run_dir>/logs/metrics.jsonl); the console logger
  prints "step:N - key:value - ..."; checkpoints under trainer.default_local_dir (rlaunch:
  <run_dir>/checkpoints): global_step_N/actor/{model,optim,extra_state}_world_size_W_rank_R.pt,
  global_step_N/data.pt, latest_checkpointed_iteration.txt.
- AReaL 1.0.4: logs in {fileroot}/logs/{user}/{experiment}/{trial}/ (main.log, merged.log,
  config.yaml) with "Train step g/G done." per step; HF checkpoints in {fileroot}/checkpoints/{user}/
  {experiment}/{trial}/default/epoch{e}epochstep{s}globalstep{g}/ (g counts from 0). rlaunch's
  defaults: fileroot = run_dir, experiment = run.name, trial = run.id; any user.
- RLinf 0.3: {output_dir}/{experiment_name}/log/main.log with "Step limit given by max_steps=N
  reached"; TensorBoard under {logger.log_path}/tensorboard/; checkpoints in {output_dir}/
  {experiment_name}/checkpoints/global_step_N/actor/dcp_checkpoint/{.metadata,*.distcp} and
  .../data/data.pt; Hydra's resolved config in {hydra.run.dir}/.hydra/config.yaml, the config rlaunch
  rendered (what was requested) in <run_dir>/plan/rlinf/rlaunch-grpo.yaml. For rlaunch
  (and the AIStudio preset) output_dir/experiment_name and log_path are both the run directory,
  and hydra.run.dir is <run_dir>/hydra.
"""

from __future__ import annotations

from pathlib import Path

from .report import UsageError

# Lines that mean a run failed, whatever its exit code says; name -> substring.
FATAL_MARKERS = {
    "python traceback": "Traceback (most recent call last)",
    "CUDA out of memory": "CUDA out of memory",
    "Ray task error": "RayTaskError",
    "Ray actor died": "ActorDiedError",
    "Ray actor unavailable": "ActorUnavailableError",
    "NCCL error": "NCCL error",
    "Hydra job error": "Error executing job with overrides",
}
# Log files: everything under these (relative to the run directory), plus *.log directly in it.
LOG_DIRS = ("logs", "log", "worker_logs")
LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ""}

VERL_METRICS = "logs/metrics.jsonl"  # the verl adapter exports VERL_FILE_LOGGER_PATH=<run_dir>/this
VERL_LATEST = "latest_checkpointed_iteration.txt"
VERL_SHARD_KINDS = ("model", "optim", "extra_state")
# verl metric -> accepted names (the first one logged is used).
VERL_METRIC_NAMES = {
    "reward": ("critic/score/mean", "critic/rewards/mean", "reward"),
    "loss": ("actor/pg_loss",),
    "grad_norm": ("actor/grad_norm",),
    "lr": ("actor/lr",),
}

AREAL_STEP = r"Train step (\d+)/(\d+) done"
AREAL_CKPT = r"epoch(\d+)epochstep(\d+)globalstep(\d+)"

RLINF_STEP = r"Step limit given by max_steps=(\d+) reached"
RLINF_TAGS = {
    "reward": "rollout/reward_scores",
    "loss": "actor/training/actor/final_loss",
    "grad_norm": "actor/training/actor/grad_norm",
    "lr": "actor/training/actor/lr",
}


def _rehearsal_names() -> dict[str, str]:
    # The trainer owns these names; reading them keeps the two from drifting apart.
    from rlaunch.rehearsal import train

    return {"metrics": train.METRICS, "tensorboard": train.TENSORBOARD,
            "checkpoint": train.FINAL_CHECKPOINT, "eval": train.EVAL, "plot": train.PLOT,
            "summary": train.SUMMARY}


def _rlinf_config_file() -> str:
    # The adapter names the file it renders; job.sh keeps it under <run_dir>/plan/.
    from rlaunch.frameworks import rlinf

    return f"{rlinf.CONFIG_DIR}/{rlinf.CONFIG_NAME}.yaml"


def _relocate(spec_path: str, spec_run_dir: str, run_dir: Path, default: str) -> Path:
    """A spec path under the spec's run_dir moves with the run directory; one outside stays put."""
    if not spec_path:
        return run_dir / default
    if spec_run_dir and (spec_path == spec_run_dir or spec_path.startswith(spec_run_dir.rstrip("/") + "/")):
        return run_dir / spec_path[len(spec_run_dir.rstrip("/")) + 1:]
    return Path(spec_path)


def defaults(spec: dict, run_dir: Path) -> dict[str, Path | str]:
    """Every location postflight reads for this spec's framework, keyed as --path accepts them."""
    run_dir = Path(run_dir)
    paths = spec.get("paths", {})
    spec_run_dir = paths.get("run_dir", "")
    ckpt_dir = _relocate(paths.get("ckpt_dir", ""), spec_run_dir, run_dir, "checkpoints")
    out: dict[str, Path | str] = {
        "log_dir": _relocate(paths.get("log_dir", ""), spec_run_dir, run_dir, "logs"),
    }
    name = spec["framework"]["name"]
    if name == "trl":
        out.update({key: run_dir / rel for key, rel in _rehearsal_names().items()})
    elif name == "verl":
        out.update(metrics=run_dir / VERL_METRICS, ckpt_dir=ckpt_dir,
                   resolved_config=run_dir / "hydra" / ".hydra" / "config.yaml")
    elif name == "areal":
        run = spec.get("run", {})
        out.update(fileroot=run_dir, experiment=run.get("name", ""), trial=run.get("id", ""),
                   tensorboard="")
    elif name == "rlinf":
        out.update(main_log=run_dir / "log" / "main.log", tensorboard=run_dir / "tensorboard",
                   ckpt_dir=ckpt_dir, resolved_config=run_dir / "hydra" / ".hydra" / "config.yaml",
                   requested_config=run_dir / "plan" / _rlinf_config_file())
    return out


def resolve(spec: dict, run_dir: Path, overrides: dict[str, str] | None = None) -> dict[str, Path | str]:
    """defaults() with --path KEY=VALUE applied; an unknown key is a usage error naming the keys."""
    out = defaults(spec, run_dir)
    for key, value in (overrides or {}).items():
        if key not in out:
            raise UsageError(f"--path {key}={value}: unknown key for framework "
                             f"{spec['framework']['name']}; allowed: {', '.join(sorted(out))}")
        out[key] = value if isinstance(out[key], str) else Path(value)
    return out


def log_files(run_dir: Path, extra_dirs: list[Path] = ()) -> list[Path]:
    """The text logs of a run: files under logs/, log/, worker_logs/ (and extra_dirs), *.log on top."""
    run_dir = Path(run_dir)
    roots = [run_dir / d for d in LOG_DIRS] + [Path(d) for d in extra_dirs]
    found = {p for p in run_dir.glob("*.log") if p.is_file()}
    for root in roots:
        if root.is_dir():
            found.update(p for p in root.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES)
    return sorted(found)


def parse_path_args(items: list[str]) -> dict[str, str]:
    """--path KEY=VALUE, repeated or comma-joined (KEY=VALUE,KEY=VALUE) for callers that cannot repeat."""
    out = {}
    for item in (part for arg in items for part in arg.split(",") if part):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--path {item}: expected KEY=VALUE, e.g. ckpt_dir=/storage/ckpt")
        out[key] = value
    return out

"""The rehearsal trainer's settings: every key of its CONFIG.json (rlaunch.rehearsal.train --config),
with its default and bounds, and the one validation that the driver and the TRL adapter's plan-time
check (frameworks/trl/adapter.py) both run. Standard library only."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any


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
    reward: str = ""  # "<module>:<function>" the workers import (e.g. from CODE); "": tiny.copy_reward
    data: str = ""  # the user's rows (DATA=): comma-separated .jsonl/.json/.parquet files; "": the made-up task


LR_SCHEDULERS = ("constant", "linear", "cosine")
REWARD_RE = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"


class ConfigError(ValueError):
    """A bad config value; the message names key, value and what is allowed."""


def _check_type(name: str, value: object, kind: type) -> object:
    # bool is an int in Python; a JSON `true` for an int key (or 1 for a bool) is a mistake.
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(value, (int, float)):
            value = float(value)
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
    if cfg.reward and not re.fullmatch(REWARD_RE, cfg.reward):
        raise ConfigError(f"reward={cfg.reward!r}: must be <module>:<function>, e.g. my_pkg.rewards:copy")
    if cfg.lr_scheduler not in LR_SCHEDULERS:
        raise ConfigError(f"lr_scheduler={cfg.lr_scheduler!r}: allowed {', '.join(LR_SCHEDULERS)}")
    global_batch = cfg.per_device_batch * cfg.num_workers
    if global_batch % cfg.group_size:
        raise ConfigError(
            f"group_size={cfg.group_size}: must divide per_device_batch x num_workers = {global_batch}"
        )


def parse_config(raw: dict[str, Any]) -> RehearsalConfig:
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
    kinds: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}
    values: dict[str, Any] = {k: _check_type(k, v, kinds[str(fields[k].type)]) for k, v in raw.items()}
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

"""verl's own config loader: compose `ppo_trainer` from the installed verl's verl/trainer/config.

Runs in .venv-verl (verl --no-deps + hydra-core) through validate/loader_main.py, never in
rlaunch's environment. A request: {"overrides": [...], "required": [dotted keys that must not be ???],
"config_dir": a verl checkout's verl/trainer/config when CODE is one (else the installed verl's)}.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from typing import Any


def name() -> str:
    return (f"verl {importlib.metadata.version('verl')} ppo_trainer "
            f"(hydra-core {importlib.metadata.version('hydra-core')})")


def _is_missing(cfg: Any, dotted: str) -> bool:
    from omegaconf import OmegaConf

    parent, _, leaf = dotted.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return bool(node is None or leaf not in node or OmegaConf.is_missing(node, leaf))


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = request.get("config_dir", "")  # CODE's own verl checkout, which is what runs
    if not config_dir:
        found = importlib.util.find_spec("verl")  # no import: verl's __init__ pulls torch
        if found is None or not found.submodule_search_locations:
            raise ModuleNotFoundError("verl is not installed in this environment")
        config_dir = os.path.join(found.submodule_search_locations[0], "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=list(request["overrides"]))
    gaps = [k for k in request.get("required", []) if _is_missing(cfg, k)]
    if gaps:
        return {"ok": False, "key": gaps[0], "error": f"{gaps[0]} is ??? (mandatory, not set)"}
    # Resolve what the trainer reads first; the reward model section stays unresolved when off.
    for section in ("data", "trainer", "algorithm", "actor_rollout_ref", "critic"):
        if section in cfg:
            OmegaConf.to_container(cfg[section], resolve=True)
    t = cfg.trainer
    return {"ok": True, "summary": f"{t.nnodes}x{t.n_gpus_per_node} GPUs, adv_estimator="
            f"{cfg.algorithm.adv_estimator}, rollout {cfg.actor_rollout_ref.rollout.name} "
            f"n={cfg.actor_rollout_ref.rollout.n}, logger={list(t.logger)}"}

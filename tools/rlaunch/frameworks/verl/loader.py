"""verl's own config loader: compose `ppo_trainer` from the installed verl's verl/trainer/config, or
the config CMD's --config-path/--config-name name in CODE ("config_dir", "config_name": a recipe's own,
whose defaults name verl's ppo_trainer through its searchpath).

Runs in .venv-verl (verl --no-deps + hydra-core) through validate/loader_main.py, never in
rlaunch's environment. A request: {"overrides": [...], "required": [dotted keys that must not be ???],
"config_dir": a verl checkout's verl/trainer/config when CODE is one (else the installed verl's), or with
"config_name" the config of CMD's --config-path or of its entry's @hydra.main (CODE's, or the installed
verl's own: fully-async's fully_async_ppo_trainer), "code_root": CODE, the run's working directory}.
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


def _searchpath(primary: str, installed: str) -> list[str]:
    """hydra.searchpath with `pkg://verl.trainer.config` as the installed verl's directory: Hydra would
    import verl for it, whose __init__ pulls torch (not in this environment; on the nodes it is)."""
    from omegaconf import OmegaConf

    paths = OmegaConf.select(OmegaConf.load(primary), "hydra.searchpath") or []
    if "pkg://verl.trainer.config" not in paths:
        return []
    swapped = [f"file://{installed}" if p == "pkg://verl.trainer.config" else p for p in paths]
    return [f"hydra.searchpath=[{','.join(swapped)}]"]


def _relative_searchpath(primary: str, code_root: str) -> str:
    """A relative `file://` entry of the config's hydra.searchpath that CODE (the run's working
    directory; none without CODE) does not hold, or "": Hydra reads those from the working directory."""
    from omegaconf import OmegaConf

    for path in OmegaConf.select(OmegaConf.load(primary), "hydra.searchpath") or []:
        rel = str(path)[len("file://"):] if str(path).startswith("file://") else ""
        if rel and not os.path.isabs(rel) and not (code_root and os.path.isdir(os.path.join(code_root, rel))):
            return rel
    return ""


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    found = importlib.util.find_spec("verl")  # no import: verl's __init__ pulls torch
    installed = (os.path.join(found.submodule_search_locations[0], "trainer", "config")
                 if found is not None and found.submodule_search_locations else "")
    # CMD's --config-path (a recipe's own config in CODE), or CODE's own verl checkout, which is what runs.
    config_dir = request.get("config_dir") or installed
    if not config_dir:
        raise ModuleNotFoundError("verl is not installed in this environment")
    name = request.get("config_name") or "ppo_trainer"
    if not os.path.isfile(os.path.join(config_dir, name + ".yaml")):
        return {"ok": False, "key": "--config-name", "error": f"{name}.yaml is not in {config_dir}"}
    overrides = list(request["overrides"])
    if request.get("config_name"):  # a recipe's own config: its searchpath names verl's
        overrides += _searchpath(os.path.join(config_dir, name + ".yaml"), installed)
        # The run's working directory is CODE: a searchpath `file://verl/trainer/config` is read from there.
        gone = _relative_searchpath(os.path.join(config_dir, name + ".yaml"), request.get("code_root") or "")
        if gone:
            return {"ok": False, "key": "code.dir", "error": f"{name}.yaml's hydra.searchpath file://{gone} is "
                    "read from the run's working directory, CODE, which has no such directory: set CODE= to "
                    f"a verl checkout at {importlib.metadata.version('verl')}"}
    here = os.getcwd()
    os.chdir(request.get("code_root") or here)
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(name, overrides=overrides)
    finally:
        os.chdir(here)
    gaps = [k for k in request.get("required", []) if _is_missing(cfg, k)]
    if gaps:
        return {"ok": False, "key": gaps[0], "error": f"{gaps[0]} is ??? (mandatory, not set)"}
    # Resolve what the trainer reads first; the reward model section stays unresolved when off.
    for section in ("data", "trainer", "algorithm", "actor_rollout_ref", "critic"):
        if section in cfg:
            OmegaConf.to_container(cfg[section], resolve=True)
    t = cfg.trainer
    composed = "" if name == "ppo_trainer" else f"{name}: "  # an entry's or recipe's own config
    return {"ok": True, "summary": f"{composed}{t.nnodes}x{t.n_gpus_per_node} GPUs, adv_estimator="
            f"{cfg.algorithm.adv_estimator}, rollout {cfg.actor_rollout_ref.rollout.name} "
            f"n={cfg.actor_rollout_ref.rollout.n}, logger={list(t.logger)}"}

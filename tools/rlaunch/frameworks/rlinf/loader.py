"""RLinf's own config loader: Hydra compose of the rendered YAML with RLinf's resolvers registered
(`import rlinf`), every interpolation resolved, then RLinf's validate_reasoning_cfg.

Runs in .venv-rlinf (rlinf --no-deps, hydra-core 1.3, torch for its dtype resolver) through
validate/loader_main.py. A request: {"config_text": <YAML>, "config_name": ..., "overrides": [...]}.
RLinf's validate_cfg itself starts a Ray Cluster and waits for nodes, so the loader calls the
reasoning-task validation it runs after that, without a cluster.

A request with "compose_only": true answers the composed config instead, every interpolation
resolved, plus the Hydra settings a run depends on ("hydra": run.dir, output_subdir, job.chdir and
the job_logging choice); "config_dir" then composes a config from that directory instead of
config_text (an upstream file, with "env" for the variables its search path reads, e.g. REPO_PATH).
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any


def name() -> str:
    return f"rlinf {importlib.metadata.version('rlinf')} compose + validate_reasoning_cfg"


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    import rlinf  # noqa: F401  registers multiply / int_div / subtract / not / torch.dtype
    from rlinf.config import validate_reasoning_cfg

    os.makedirs(tmp, exist_ok=True)
    config_name = request.get("config_name", "rlaunch")
    config_dir = request.get("config_dir") or tmp
    if not request.get("config_dir"):
        with open(os.path.join(tmp, config_name + ".yaml"), "w") as f:
            f.write(request["config_text"])
    saved = dict(os.environ)
    os.environ.update(request.get("env") or {})
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.1"):
            cfg = compose(config_name, overrides=list(request.get("overrides", [])),
                          return_hydra_config=bool(request.get("compose_only")))
        if request.get("compose_only"):
            return composed(cfg)
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        with open_dict(cfg):
            cfg = validate_reasoning_cfg(cfg)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    placement = OmegaConf.to_container(cfg.cluster.component_placement, resolve=True)
    return {"ok": True, "summary": f"{cfg.cluster.num_nodes} nodes, placement {placement}, max_steps="
            f"{cfg.runner.max_steps}, save_interval={cfg.runner.save_interval}, group_size="
            f"{cfg.algorithm.group_size}, actor global batch {cfg.actor.global_batch_size}"}


def composed(cfg: Any) -> dict[str, Any]:
    from omegaconf import OmegaConf, open_dict

    hydra = {key: OmegaConf.select(cfg, f"hydra.{key}") for key in ("run.dir", "output_subdir", "job.chdir")}
    hydra["job_logging"] = OmegaConf.select(cfg, "hydra.runtime.choices").get("hydra/job_logging")
    with open_dict(cfg):
        del cfg["hydra"]  # the rest of Hydra's own node (sweep dirs, ${now:...}) resolves only in a run
    return {"ok": True, "config": OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True),
            "hydra": hydra}

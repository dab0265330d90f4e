"""AReaL's own config loader: load_expr_config(argv, GRPOConfig) plus ModelAllocation.from_str.

Runs in .venv-areal (areal --no-deps + the packages its loader imports) through
validate/loader_main.py, never in rlaunch's environment. A request: {"config_text": <experiment
YAML>, "overrides": [...]}. Validation only: cluster.fileroot goes to the temp dir and name
resolution to files (nfs), so the loader neither writes to the real storage nor calls ray.init.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any


def name() -> str:
    return f"areal {importlib.metadata.version('areal')} load_expr_config(GRPOConfig)"


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    from areal.api.alloc_mode import ModelAllocation
    from areal.api.cli_args import GRPOConfig, load_expr_config

    os.makedirs(tmp, exist_ok=True)
    config = os.path.join(tmp, "experiment.yaml")
    with open(config, "w") as f:
        f.write(request["config_text"])
    argv = ["--config", config, *request["overrides"],
            f"++cluster.fileroot={tmp}/fileroot", "++cluster.name_resolve.type=nfs",
            f"++cluster.name_resolve.nfs_record_root={tmp}/name_resolve"]
    cfg, _ = load_expr_config(argv, GRPOConfig)
    for key in ("rollout.backend", "actor.backend"):
        value = cfg.rollout.backend if key == "rollout.backend" else cfg.actor.backend
        try:
            ModelAllocation.from_str(value)
        except BaseException as err:  # noqa: BLE001 - AReaL's own message, with the key it is about
            text = f"ModelAllocation.from_str({value!r}): {err}".replace("\n", " ")
            return {"ok": False, "key": key, "error": text[:600]}
    return {"ok": True, "summary": f"scheduler={cfg.scheduler.type} {cfg.cluster.n_nodes}x"
            f"{cfg.cluster.n_gpus_per_node} GPUs, rollout {cfg.rollout.backend}, actor {cfg.actor.backend}, "
            f"n_samples={cfg.gconfig.n_samples}"}

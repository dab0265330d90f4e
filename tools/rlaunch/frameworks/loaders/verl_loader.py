"""verl's own config loader: compose `ppo_trainer` from the installed verl's verl/trainer/config.

Runs with .venv-verl's python (verl --no-deps + hydra-core), never rlaunch's. stdin:
{"requests": [{"overrides": [...], "required": [dotted keys that must not be ???]}]}; stdout: one JSON
line {"results": [{"ok": true, "summary": ...} | {"ok": false, "key": ..., "error": ...}]}.
"""

import importlib.metadata
import importlib.util
import json
import os
import re
import sys

KEY_PATTERNS = (r"Could not override '([^']+)'", r"full_key: (\S+)", r"Key '([^']+)'",
                r"Could not append to config. An item is already at '([^']+)'")


def error_key(text):
    for pattern in KEY_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return m.group(1)
    return ""


def _is_missing(cfg, dotted):
    from omegaconf import OmegaConf

    parent, _, leaf = dotted.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return node is None or leaf not in node or OmegaConf.is_missing(node, leaf)


def answer(config_dir, request):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    try:
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
    except Exception as err:  # the framework's own error, shown with its key
        text = f"{type(err).__name__}: {err}".replace("\n", " ")
        return {"ok": False, "key": error_key(str(err)), "error": text[:600]}


def main():
    requests = json.load(sys.stdin)["requests"]
    spec = importlib.util.find_spec("verl")  # no import: verl's __init__ pulls torch
    config_dir = os.path.join(spec.submodule_search_locations[0], "trainer", "config")
    version = importlib.metadata.version("verl")
    results = []
    for request in requests:
        res = answer(config_dir, request)
        res["loader"] = f"verl {version} ppo_trainer (hydra-core {importlib.metadata.version('hydra-core')})"
        results.append(res)
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()

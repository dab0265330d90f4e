"""RLinf's own config loader: Hydra compose of the rendered YAML with RLinf's resolvers registered
(`import rlinf`), every interpolation resolved, then RLinf's validate_reasoning_cfg.

Runs with .venv-rlinf's python (rlinf --no-deps, hydra-core 1.3, torch for its dtype resolver).
stdin: {"requests": [{"config_text": <YAML>, "config_name": ..., "overrides": [...]}]}; stdout: one
JSON line {"results": [...]}. RLinf's validate_cfg itself starts a Ray Cluster and waits for nodes, so
the loader calls the reasoning-task validation it runs after that, without a cluster.
"""

import importlib.metadata
import json
import os
import re
import sys
import tempfile

KEY_PATTERNS = (r"Could not override '([^']+)'", r"full_key: (\S+)", r"Key '([^']+)'",
                r"Could not append to config. An item is already at '([^']+)'")


def error_key(text):
    for pattern in KEY_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return m.group(1)
    return ""


def answer(request, tmp):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    import rlinf  # noqa: F401  registers multiply / int_div / subtract / not / torch.dtype
    from rlinf.config import validate_reasoning_cfg

    os.makedirs(tmp, exist_ok=True)
    name = request.get("config_name", "rlaunch")
    with open(os.path.join(tmp, name + ".yaml"), "w") as f:
        f.write(request["config_text"])
    try:
        with initialize_config_dir(config_dir=tmp, version_base="1.1"):
            cfg = compose(name, overrides=list(request.get("overrides", [])))
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        with open_dict(cfg):
            cfg = validate_reasoning_cfg(cfg)
    except BaseException as err:
        text = f"{type(err).__name__}: {err}".replace("\n", " ")
        return {"ok": False, "key": error_key(str(err)), "error": text[:600]}
    placement = OmegaConf.to_container(cfg.cluster.component_placement, resolve=True)
    return {"ok": True, "summary": f"{cfg.cluster.num_nodes} nodes, placement {placement}, max_steps="
            f"{cfg.runner.max_steps}, save_interval={cfg.runner.save_interval}, group_size="
            f"{cfg.algorithm.group_size}, actor global batch {cfg.actor.global_batch_size}"}


def main():
    requests = json.load(sys.stdin)["requests"]
    version = importlib.metadata.version("rlinf")
    results = []
    with tempfile.TemporaryDirectory(prefix="rlaunch-rlinf-") as tmp:
        for i, request in enumerate(requests):
            res = answer(request, os.path.join(tmp, str(i)))
            res["loader"] = f"rlinf {version} compose + validate_reasoning_cfg"
            results.append(res)
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()

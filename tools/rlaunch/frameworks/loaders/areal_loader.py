"""AReaL's own config loader: load_expr_config(argv, GRPOConfig) plus ModelAllocation.from_str.

Runs with .venv-areal's python (areal --no-deps + the packages its loader imports), never rlaunch's.
stdin: {"requests": [{"config_text": <experiment YAML>, "overrides": [...]}]}; stdout: one JSON line
{"results": [...]}. Validation only: cluster.fileroot goes to a temp dir and name resolution to files
(nfs), so the loader neither writes to the real storage nor calls ray.init.
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
    from areal.api.alloc_mode import ModelAllocation
    from areal.api.cli_args import GRPOConfig, load_expr_config

    os.makedirs(tmp, exist_ok=True)
    config = os.path.join(tmp, "experiment.yaml")
    with open(config, "w") as f:
        f.write(request["config_text"])
    argv = ["--config", config, *request["overrides"],
            f"++cluster.fileroot={tmp}/fileroot", "++cluster.name_resolve.type=nfs",
            f"++cluster.name_resolve.nfs_record_root={tmp}/name_resolve"]
    try:
        cfg, _ = load_expr_config(argv, GRPOConfig)
    except BaseException as err:  # hydra exits via SystemExit on some errors
        text = f"{type(err).__name__}: {err}".replace("\n", " ")
        return {"ok": False, "key": error_key(str(err)), "error": text[:600]}
    for key in ("rollout.backend", "actor.backend"):
        value = cfg.rollout.backend if key == "rollout.backend" else cfg.actor.backend
        try:
            ModelAllocation.from_str(value)
        except BaseException as err:
            text = f"ModelAllocation.from_str({value!r}): {err}".replace("\n", " ")
            return {"ok": False, "key": key, "error": text[:600]}
    return {"ok": True, "summary": f"scheduler={cfg.scheduler.type} {cfg.cluster.n_nodes}x"
            f"{cfg.cluster.n_gpus_per_node} GPUs, rollout {cfg.rollout.backend}, actor {cfg.actor.backend}, "
            f"n_samples={cfg.gconfig.n_samples}"}


def main():
    requests = json.load(sys.stdin)["requests"]
    version = importlib.metadata.version("areal")
    results = []
    with tempfile.TemporaryDirectory(prefix="rlaunch-areal-") as tmp:
        for i, request in enumerate(requests):
            res = answer(request, os.path.join(tmp, str(i)))
            res["loader"] = f"areal {version} load_expr_config(GRPOConfig)"
            results.append(res)
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()

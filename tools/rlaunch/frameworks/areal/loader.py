"""AReaL's own config loader: load_expr_config(argv, GRPOConfig) plus ModelAllocation.from_str.

CMD= (issue 47): {"script": <entry in CODE>, "config_path": <its YAML in CODE>, "code_root": CODE,
"overrides": [...]}: the config class is the one the script passes to load_expr_config (read with ast,
imported with CODE and the script's directory on the path, as the script runs), the trainer not started.

Runs in .venv-areal (areal --no-deps + the packages its loader imports) through
validate/loader_main.py, never in rlaunch's environment. When CODE is an AReaL checkout, its own areal
answers (_areal_of): that is the areal the nodes run (CODE is on their PYTHONPATH, before the image's),
and PyPI's areal 1.0.4 is not tag v1.0.4's code but areal-project/AReaL's a0f3dca20 (2026-06-09), whose
TeacherConfig refuses v1.0.4's examples/distillation YAML (`Key 'backend' not in 'TeacherConfig'`). A request: {"config_text": <experiment
YAML>, "overrides": [...]}. Validation only: cluster.fileroot goes to the temp dir and name
resolution to files (nfs), so the loader neither writes to the real storage nor calls ray.init.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import sys
from typing import Any


def name() -> str:
    return f"areal {importlib.metadata.version('areal')} load_expr_config(GRPOConfig)"


_ADDED: list[str] = []  # the CODE whose areal this process imports (sys.path[0]), if any


def _areal_of(code_root: str) -> str:
    """Make `import areal` load CODE's areal when CODE is an AReaL checkout (else the installed one):
    the modules already imported from the other are dropped. Returns CODE, or "" for the installed."""
    own = code_root if code_root and os.path.isfile(os.path.join(code_root, "areal", "api", "cli_args.py")) else ""
    if _ADDED != ([own] if own else []):
        for path in _ADDED:
            sys.path.remove(path)
        _ADDED[:] = [own] if own else []
        sys.path[:0] = _ADDED
        for module in [m for m in sys.modules if m == "areal" or m.startswith("areal.")]:
            del sys.modules[module]
    return own


def config_class(script: str, code_root: str) -> Any:
    """The class `script` passes to load_expr_config: a name it imports (from areal or from CODE) or
    defines; imported as the script would, with its directory and CODE first on the path."""
    from areal.api import cli_args

    tree = ast.parse(open(script, encoding="utf-8").read(), script)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and len(n.args) >= 2
             and getattr(n.func, "id", getattr(n.func, "attr", "")) == "load_expr_config"]
    if not calls or not isinstance(calls[0].args[1], (ast.Name, ast.Attribute)):
        raise LookupError(f"{os.path.basename(script)} calls no load_expr_config(argv, <config class>)")
    name = calls[0].args[1].id if isinstance(calls[0].args[1], ast.Name) else calls[0].args[1].attr
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            raise LookupError(f"{name} is defined in {os.path.basename(script)} (__main__): put it in a module "
                              "of CODE that the script imports")
        if isinstance(node, ast.ImportFrom) and node.module and any(a.asname == name or a.name == name
                                                                   for a in node.names):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            sys.path[:0] = [os.path.dirname(script), code_root]
            try:
                return getattr(importlib.import_module(node.module), original)
            finally:
                del sys.path[:2]
    return getattr(cli_args, name)


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    own = _areal_of(request.get("code_root", ""))
    from areal.api.alloc_mode import ModelAllocation
    from areal.api.cli_args import GRPOConfig, load_expr_config

    os.makedirs(tmp, exist_ok=True)
    config = os.path.join(tmp, "experiment.yaml")
    cls: Any = GRPOConfig
    if request.get("script"):  # CMD=: the user's YAML and config class
        config = request["config_path"]
        try:
            cls = config_class(request["script"], request["code_root"])
        except (LookupError, ImportError, AttributeError, SyntaxError) as err:
            return {"ok": False, "key": "code.command", "error": f"{type(err).__name__}: {err}"[:600]}
    else:
        with open(config, "w") as f:
            f.write(request["config_text"])
    argv = ["--config", config, *request["overrides"],
            f"++cluster.fileroot={tmp}/fileroot", "++cluster.name_resolve.type=nfs",
            f"++cluster.name_resolve.nfs_record_root={tmp}/name_resolve", f"++stats_logger.fileroot={tmp}/fileroot"]
    cfg, _ = load_expr_config(argv, cls)
    for key in ("rollout.backend", "actor.backend"):
        value = cfg.rollout.backend if key == "rollout.backend" else cfg.actor.backend
        try:
            ModelAllocation.from_str(value)
        except BaseException as err:  # noqa: BLE001 - AReaL's own message, with the key it is about
            text = f"ModelAllocation.from_str({value!r}): {err}".replace("\n", " ")
            return {"ok": False, "key": key, "error": text[:600]}
    summary = (f"scheduler={cfg.scheduler.type} {cfg.cluster.n_nodes}x{cfg.cluster.n_gpus_per_node} GPUs, rollout "
               f"{cfg.rollout.backend}, actor {cfg.actor.backend}, n_samples={cfg.gconfig.n_samples}")
    if request.get("script"):
        summary = f"{os.path.basename(request['script'])} {cls.__name__}: {summary}"
    return {"ok": True, "summary": f"{summary} (CODE's areal)" if own else summary}

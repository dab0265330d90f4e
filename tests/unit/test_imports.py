"""The floor plan holds (issue 32): rlaunch's internal imports, read with the stdlib `ast` module,
form no cycle and never run from a lower package up to a higher one, and the imports left inside
functions are only of heavy optional dependencies.

The layers, in data-flow order (a module may import its own package and any layer below it):

    base        rlaunch/__init__, errors, firecli, cmdline, progress: used by every stage
    registry    what rlaunch launches and where, as declarations: registry/ (the frameworks' registry
                and the infrastructures': their descriptors, found on disk, and what each loads by
                name) and frameworks/accel (the framework/accelerator rules, which the rendered
                job.sh names). Standard library only; adding a framework or an infrastructure is its
                package plus its config layer
    config      load, spec, knobs, dotted, pins, images, modelfacts, ckptsize, topology: the
                experiment's inputs as data and the rules over them
    validate    offline validators of what a backend renders (CRDs, the API server, SkyPilot) and
                the frameworks' own config loaders (loaders)
    job         what runs on the cluster head and the records it leaves: attempts, checkpoints,
                nodewatch, stall, data, phases, layouts, files
    plan        rules, render, artifacts, memory, inputs, imagecheck, tracking: what a launch will be
    verify      cluster, probes, preflight, postflight, collective, accel, smoke, image, report, summary, stacks:
                the checks and the closing summary
    rehearsal   the CPU training stand-in (the TRL framework's program)
    frameworks  base (the adapter interface), then one package per framework, loaded by name by the
                registry: its descriptor, adapter, memory model and postflight checks (they use the
                libraries below)
    backends    base, then one package per infrastructure, loaded by name by the registry; no backend
                imports another
    runs        lookup, listing, board, compare: operator tools over existing runs
    cli         the top-level command line; nothing imports it

A violation of any of the three rules fails naming the import (file:line). HEAVY below is the list of
what may still be imported inside a function.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"

LAYERS = ["base", "registry", "config", "validate", "job", "plan", "verify", "rehearsal", "frameworks",
          "backends", "runs", "cli"]
BASE = {"rlaunch", "rlaunch.errors", "rlaunch.firecli", "rlaunch.cmdline", "rlaunch.progress", "rlaunch.__main__"}
MODULE_LAYER = {"rlaunch.__main__": "cli"}
# Registry-layer modules outside registry/: the framework/accelerator rules (the rendered job.sh
# names rlaunch.frameworks.accel, so it stays where the goldens say).
REGISTRY = {"rlaunch.frameworks.accel"}
# Imports that may stay inside a function: heavy or optional dependencies a command must not pay
# for (or may lack) unless it uses them.
HEAVY = {"sky", "ray", "kubernetes", "torch", "transformers", "datasets", "huggingface_hub", "matplotlib",
         "wandb", "tensorboard", "botocore", "numpy", "pandas", "pyarrow", "safetensors", "fire", "rich", "jinja2",
         "pydantic", "yaml", "jsonschema", "requests", "google", "boto3", "azure", "kr8s", "trl", "verl",
         "areal", "rlinf", "hydra", "omegaconf", "tokenizers", "cel", "kubernetes_validate", "vllm", "sglang", "accelerate", "peft", "psutil", "docker", "uv", "pip",
         "packaging", "tomllib", "importlib_metadata", "tensorboardX", "PIL", "grpc", "modelscope", "modelscope_hub",
         "pathspec"}  # rlaunch.config.code's .gitignore rules: not on the nodes, whose preflight imports it


@functools.lru_cache(maxsize=1)
def modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((TOOLS / "rlaunch").rglob("*.py")):
        parts = list(path.relative_to(TOOLS).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def imports() -> list[tuple[str, str, str, bool]]:
    """Every import in tools/rlaunch: (importer, imported, where, inside a function). An internal one
    names the module it reaches (a name imported from a package is its submodule when one exists)."""
    mods = modules()
    out = []
    for mod, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text())
        local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            else:
                continue
            where = f"{path.relative_to(TOOLS.parent)}:{node.lineno}"
            for target in targets:
                if target.split(".")[0] == "rlaunch":
                    while target not in mods and "." in target:
                        target = target.rsplit(".", 1)[0]
                    if target == mod:
                        continue
                out.append((mod, target, where, id(node) in local))
    return out


def layer(mod: str) -> int:
    if mod in MODULE_LAYER:
        return LAYERS.index(MODULE_LAYER[mod])
    if mod in BASE:
        return 0
    if mod in REGISTRY:
        return LAYERS.index("registry")
    return LAYERS.index(mod.split(".")[1])


def internal() -> list[tuple[str, str, str, bool]]:
    return [e for e in imports() if e[1].split(".")[0] == "rlaunch"]


def show(edges) -> str:
    return "\n".join(f"  {a} -> {b}    ({where})" for a, b, where in sorted(edges))


def test_no_import_runs_up_a_layer():
    found = {}
    for a, b, where, _ in internal():
        other_backend = (a.count(".") > 1 and b.count(".") > 1 and a.startswith("rlaunch.backends.")
                         and b.startswith("rlaunch.backends.")
                         and a.split(".")[2] != b.split(".")[2] and "base" not in (a.split(".")[2], b.split(".")[2]))
        if layer(b) > layer(a) or other_backend:
            found.setdefault((a, b), where)
    assert not found, ("imports from a lower layer to a higher one (or between two backends); the rules are in "
                       "this file's docstring:\n" + show((a, b, where) for (a, b), where in found.items()))


def test_no_import_cycles():
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in internal():
        graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(tuple(sorted(comp)))

    for v in list(graph):
        if v not in index:
            visit(v)
    edges = [(a, b, w) for a, b, w, _ in internal() for c in comps if a in c and b in c]
    assert not comps, f"{len(comps)} import cycle(s); their edges:\n{show(edges)}"


def test_function_level_imports_are_only_heavy_dependencies():
    found = {}
    for a, b, where, in_function in imports():
        if not in_function:
            continue
        top = b.split(".")[0]
        if top == "rlaunch":
            found.setdefault((a, b), where)
        elif top not in HEAVY:
            found.setdefault((a, b), where)
    assert not found, ("imports inside functions (only the heavy optional dependencies in HEAVY may be):\n"
                       + show((a, b, where) for (a, b), where in found.items()))


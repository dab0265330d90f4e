"""What the workers will import of the user's code, imported at plan time (issue 47, Build item 4).

Each framework names its targets (Target): a file it loads by path with the function or class in it
(verl's reward, its data.custom_cls), the entry module of CMD (`python3 -m recipe.x.main`), a dotted
path its workers import (AReaL's workflow and reward). validate/import_loader.py imports them in the
framework's pinned environment with CODE first on sys.path, through the loader machinery (validate.
loaders: one process, cached by the request, which carries CODE's content hash, and the venv's stamp),
started with the plan's other early checks. A failure is one ConfigError naming the argument, the file
or import, and the module that is missing (exit 2, nothing written).

CODE that is itself a checkout of a framework (verl/version/version, areal/version.py, rlinf/__init__.py)
is the framework that runs, first on the path before the pinned wheel: checkout() finds it and its
version, and the plan says so, with a WARNING when that version is not the pin.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.config import code
from rlaunch.errors import CheckError, ConfigError
from rlaunch.validate import loaders

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

LOADER = Path(__file__).with_name("import_loader.py")


@dataclass(frozen=True)
class Target:
    """One import the workers make: exactly one of file (+ name), module, dotted."""

    arg: str      # the argument that names it: framework.overrides[reward.custom_reward_function.path], code.command
    value: str    # as the user gave it
    what: str     # "reward function", "dataset class", "entry module", "workflow"
    file: str = ""    # relative to CODE
    name: str = ""
    module: str = ""
    dotted: str = ""

    def request(self) -> dict[str, str]:
        fields = {"file": self.file, "name": self.name, "module": self.module, "dotted": self.dotted}
        return {"arg": self.arg, "what": self.what, **{k: v for k, v in fields.items() if v}}


# ---------------------------------------------------------------- what an entry script hands its workers

# The keyword arguments (and config keys) whose string value AReaL 1.0.4's workers import by dotted path:
# PPOTrainer.train(workflow=..., eval_workflow=...), the workflow's reward_fn, an agent's agent_cls_path.
WORKER_IMPORTS = {"workflow": "workflow", "eval_workflow": "workflow", "reward_fn": "reward function",
                  "agent_cls_path": "agent class"}
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def script_targets(root: Path, script: str, arg: str, config: str = "") -> list[Target]:
    """The dotted paths the entry script `script` (relative to CODE), and the top level of its --config
    YAML, name for the workers to import: string literals passed as workflow=, reward_fn=, ... ."""
    found: dict[str, str] = {}
    tree = ast.parse((root / script).read_text(encoding="utf-8"), script)
    for node in ast.walk(tree):
        if (isinstance(node, ast.keyword) and node.arg in WORKER_IMPORTS and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and _DOTTED.match(node.value.value)):
            found.setdefault(node.value.value, WORKER_IMPORTS[node.arg])
    if config and (root / config).is_file():
        import yaml  # the config's own keys: a workflow named there (AReaL's agent_workflow example)

        data = yaml.safe_load((root / config).read_text(encoding="utf-8")) or {}
        for key, what in WORKER_IMPORTS.items():
            value = data.get(key) if isinstance(data, dict) else None
            if isinstance(value, str) and _DOTTED.match(value):
                found.setdefault(value, what)
    return [Target(arg, dotted, what, dotted=dotted) for dotted, what in found.items()]


# ---------------------------------------------------------------- CODE that is a framework's checkout

# The file that makes a tree a framework's checkout, and where its version is written.
CHECKOUTS = {
    "verl": ("verl/version/version", r"^\s*(\S+)\s*$"),
    "areal": ("areal/version.py", None),   # reads its package metadata: the version is pyproject.toml's
    "rlinf": ("rlinf/__init__.py", None),
}
_PYPROJECT_VERSION = re.compile(r'^version\s*=\s*"([^"]+)"', re.M)


def checkout(root: Path) -> tuple[str, str] | None:
    """(framework, version) when `root` is a checkout of verl, AReaL or RLinf; version "?" when unwritten."""
    for framework, (marker, pattern) in CHECKOUTS.items():
        if not (root / marker).is_file():
            continue
        if pattern is not None:
            found = re.match(pattern, (root / marker).read_text(encoding="utf-8", errors="replace"))
        else:
            pyproject = root / "pyproject.toml"
            text = pyproject.read_text(encoding="utf-8", errors="replace") if pyproject.is_file() else ""
            found = _PYPROJECT_VERSION.search(text)
        return framework, (found.group(1) if found else "?")
    return None


def checkout_lines(spec: Spec) -> list[str]:
    """The plan's lines for CODE that holds a framework: which, its version, and a WARNING naming both
    versions when it is not the pin (it runs, first on the path: never silently replaced)."""
    root = code_root(spec)
    found = checkout(root) if root else None
    if found is None:
        return []
    framework, version = found
    pin = spec.pins.framework_version if framework == spec.framework.name else ""
    lines = [f"code: CODE is a {framework} checkout, version {version}: it is the {framework} that runs (first "
             "on PYTHONPATH, before the image's) and the import checks use it"]
    if pin and version != pin:
        lines.append(f"WARNING code: CODE's {framework} is {version}, not the pinned {pin}: the run uses CODE's "
                     f"{version}; checks of the pinned version's config keys may not hold for it")
    return lines


# ---------------------------------------------------------------- the check


def code_root(spec: Spec) -> Path | None:
    """CODE's directory on this machine (None without CODE)."""
    if not spec.code.dir:
        return None
    return code.resolve(spec.code.dir, ROOT / "build" / code.CACHE)


# The framework's own top-level packages: a module missing from them is the run's, never the validator's.
OWN = {"verl": ["verl", "recipe"], "verlcpu": ["verl", "recipe"], "areal": ["areal"], "rlinf": ["rlinf"]}


def request(spec: Spec, targets: list[Target], entry: str = "", path: tuple[str, ...] = (),
            venv: str = "") -> dict[str, Any]:
    """What import_loader answers; CODE's content hash in it, so a change to CODE is a new key."""
    root = code_root(spec)
    return {"code": str(root or ""), "code_hash": str(spec.pins.code.get("hash", "")), "entry": entry,
            "path": [str(root / p) for p in path] if root else [], "targets": [t.request() for t in targets],
            "own": OWN.get(venv, [])}


def check(spec: Spec, venv: str, targets: list[Target], entry: str = "", path: tuple[str, ...] = ()) -> list[str]:
    """Import every target in .venv-<venv> with CODE first on sys.path: the plan's line, a ConfigError
    naming the argument when one does not import, a line saying why when nothing could be checked."""
    if not targets:
        return []
    req = request(spec, targets, entry, path, venv)
    result = loaders.run(venv, [req], spec.run.id, loader=LOADER)[0]
    where = f".venv-{venv}" + (", CODE first on sys.path" if req["code"] else "")
    if result.get("skipped"):
        return [f"WARNING imports: not checked ({where}): {result['skipped']}"]
    if result.get("ok"):
        return [f"imports ({where}): {result['summary']}", *(f"WARNING imports: {w}" for w in result.get("warnings", []))]
    index = result.get("index")
    target = targets[index] if isinstance(index, int) and 0 <= index < len(targets) else None
    if target is None:  # the loader itself failed: not the user's import
        raise CheckError("imports", str(result.get("error", "")))
    article = "an" if target.what[0] in "aeiou" else "a"
    raise ConfigError(target.arg, target.value, f"{article} {target.what} the workers can import "
                      f"(.venv-{venv}, CODE first): {result['error']}")

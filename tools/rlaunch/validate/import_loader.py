"""The imports the workers will make of the user's code, made here first (issue 47), in the framework's
pinned environment with CODE first on sys.path. Standard library only: loader_main.py runs it with the
venv's python, where rlaunch is not importable.

A request: {"code": CODE's directory here, "path": [directories before it, e.g. the entry script's own,
which AReaL's launcher hands its workers as PYTHONPATH], "entry": the entry script (relative to CODE) or
"", "targets": [{"arg", "what", and "file" + "name" | "module" | "dotted"}]}:

  file + name  a file the framework loads by path (verl's reward, data.custom_cls): executed as a module,
               `name` an attribute of it, callable;
  module       an entry module (`python -m X`): found, then executed without its top-level calls, so
               nothing trains: its imports resolve, its definitions run;
  dotted       `package.module.Attr` the workers import (AReaL's workflow and reward): never `__main__.X`;
               a module that is the entry script itself must not run anything at import.

"own": the framework's top-level packages. A module missing from CODE or from those refuses; a missing
third-party package (one the validator's environment lacks, the image may hold) is a warning.

The answer is {"ok": true, "summary"} or {"ok": false, "key": the target's arg, "error": one line naming
the import and the module that is missing}.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import traceback
from types import ModuleType
from typing import Any

MAIN = "__main__"


def name() -> str:
    return "imports"


def _main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, what `python -m`/`python file.py` alone runs."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == MAIN for c in test.comparators))


def top_level_calls(source: str, filename: str) -> list[str]:
    """`file:line: text` of each statement that runs something at import outside the __main__ guard
    (a bare call: `main()`, `trainer.train()`)."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    return [f"{filename}:{n.lineno}: {lines[n.lineno - 1].strip()}" for n in tree.body
            if isinstance(n, ast.Expr) and isinstance(n.value, (ast.Call, ast.Await))]


def _exec_quietly(module: ModuleType, source: str, filename: str) -> None:
    """Execute a module's source less its top-level calls and its __main__ block: its imports and
    definitions run, its program does not."""
    tree = ast.parse(source, filename)
    tree.body = [n for n in tree.body if not _main_guard(n)
                 and not (isinstance(n, ast.Expr) and isinstance(n.value, (ast.Call, ast.Await)))]
    exec(compile(tree, filename, "exec"), module.__dict__)  # noqa: S102 - the user's module, guarded above


def _missing(err: BaseException) -> str:
    """What failed: the missing module's name for an ImportError, else the error; and where."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith("<frozen")]
    at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    if isinstance(err, ModuleNotFoundError) and err.name:
        return f"no module named '{err.name}'{at} (neither CODE nor the pinned framework's environment has it)"
    if isinstance(err, ImportError):  # the module is there, the name is not: "cannot import name 'X' from 'Y'"
        return f"{str(err).split(' (', 1)[0]}{at} (not in the pinned framework's version of it)"
    return f"{type(err).__name__}: {err}{at}".replace("\n", " ")


def _load_file(code: str, rel: str) -> ModuleType:
    path = os.path.join(code, rel)
    spec = importlib.util.spec_from_file_location("custom_module", path)  # verl's load_extern_object's name
    if spec is None or spec.loader is None:
        raise ImportError(f"{rel}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    spec.loader.exec_module(module)
    return module


def _load_entry(module_name: str) -> ModuleType:
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.loader is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        raise ModuleNotFoundError(f"No module named '{module_name}'", name=module_name)
    get_source = getattr(spec.loader, "get_source", None)
    source = get_source(module_name) if get_source else None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    if source is None:  # a compiled module: nothing of a program's to skip
        spec.loader.exec_module(module)
    else:
        _exec_quietly(module, source, spec.origin)
    return module


def _entry_module(entry: str) -> str:
    """The dotted name the workers give the entry script's module (examples/x/train.py -> examples.x.train)."""
    return entry[:-3].replace("/", ".") if entry.endswith(".py") else ""


class EnvironmentGap(Exception):
    """A third-party package the validator environment lacks: the image may have it (never a refusal)."""


def _ours(err: ImportError, code: str, own: list[str], paths: list[str]) -> bool:
    """The missing module or name belongs to CODE (a top-level name CODE or the script's directory
    holds) or to the framework (its own packages): then the import cannot resolve on the nodes either.
    Anything else is a third-party package the image may hold beside the validator's environment."""
    top = (err.name or "").split(".", 1)[0]
    if not top:
        return True
    if top in own:
        return True
    return any(os.path.exists(os.path.join(d, top)) or os.path.exists(os.path.join(d, top + ".py"))
               for d in (code, *paths) if d)


def _check(target: dict[str, Any], code: str, entry: str, own: list[str] | None = None,
           paths: list[str] | None = None) -> str:
    """"" when the target imports; else why not (one line). Raises EnvironmentGap for a third-party
    package the validator environment lacks."""
    what = target.get("what", "import")
    try:
        if "file" in target:
            module = _load_file(code, target["file"])
            attr = target.get("name", "")
            found = getattr(module, attr, None) if attr else module
            if attr and found is None:
                return f"{target['file']} defines no {attr!r} (the {what} it names)"
            if attr and not callable(found):
                return f"{target['file']}'s {attr!r} is not callable"
            return ""
        if "module" in target:
            _load_entry(target["module"])
            return ""
        dotted = target["dotted"]
        module_name, _, attr = dotted.rpartition(".")
        if module_name == MAIN or dotted.startswith(MAIN + "."):
            return (f"{dotted} is defined in the entry script ({entry or '__main__'}): the workers import it in "
                    f"another process, where __main__ is theirs; move {attr} to a module in CODE and name it "
                    "by that module's dotted path")
        if module_name and module_name == _entry_module(entry):
            with open(os.path.join(code, entry), encoding="utf-8") as handle:
                runs = top_level_calls(handle.read(), entry)
            if runs:
                return (f"{dotted}: the workers import {entry}, which runs at import ({runs[0]}); put its "
                        "program under `if __name__ == \"__main__\":`, or move "
                        f"{attr} to a module in CODE")
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            return f"{dotted}: {module_name} defines no {attr!r}"
        return ""
    except BaseException as err:  # noqa: BLE001 - the user's import error is the answer
        text = f"importing {target.get('file') or target.get('module') or target.get('dotted')}: {_missing(err)}"
        target_top = (target.get("module") or target.get("dotted") or "").split(".", 1)[0]
        if (isinstance(err, ImportError) and own is not None and (err.name or "").split(".", 1)[0] != target_top
                and not _ours(err, code, own, paths or [])):
            raise EnvironmentGap(text) from None
        return text


def _under(name: str, roots: tuple[str, ...]) -> bool:
    """The module `name` was loaded from one of `roots` (CODE, the script's directory)."""
    # Its __dict__, not getattr: a lazy module's __getattr__ imports (transformers' pulls torchvision).
    found = getattr(sys.modules.get(name), "__dict__", {})
    where = [found.get("__file__") or "", *(found.get("__path__") or [])]
    return bool(roots) and any(str(w).startswith(roots) for w in where)


def answer(request: dict[str, Any], tmp: str) -> dict[str, Any]:
    code = request["code"]
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    sys.path[:0] = [code, *request.get("path", [])]
    # No __pycache__ written into CODE: a git tree would turn dirty (and the pack is named by content).
    sys.dont_write_bytecode = True
    gaps: list[str] = []
    try:
        for i, target in enumerate(request["targets"]):
            try:
                why = _check(target, code, request.get("entry", ""), request.get("own", []), request.get("path", []))
            except EnvironmentGap as gap:
                gaps.append(str(gap))
                target["gap"] = True
                continue
            if why:
                return {"ok": False, "key": target["arg"], "index": i, "error": why}
    finally:
        # The next request's CODE is another tree: nothing of this one's stays importable. The
        # framework's own modules stay (torch and its kind cannot be imported twice in one process).
        sys.path[:] = saved_path
        sys.dont_write_bytecode = False
        roots = tuple(os.path.join(p, "") for p in (code, *request.get("path", [])) if p)
        # All found before any is removed: a namespace package's path is recomputed from its parent's.
        ours = [mod for mod in set(sys.modules) - saved_modules if mod == "custom_module" or _under(mod, roots)]
        for mod in ours:
            del sys.modules[mod]
    names = ", ".join(t.get("dotted") or t.get("module") or f"{t['file']}:{t.get('name', '')}".rstrip(":")
                      for t in request["targets"] if not t.get("gap"))
    return {"ok": True, "summary": f"{len(request['targets']) - len(gaps)} import(s) resolve: {names}",
            "warnings": [g.replace("(neither CODE nor the pinned framework's environment has it)",
                                   "(a package the validator's environment lacks: not checked, the image may have it)")
                         for g in gaps]}

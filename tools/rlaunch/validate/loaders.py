"""Run a framework's own config loader, at the pinned version, in its validator environment.

Each framework with a Validator has a loader (frameworks/<name>/loader.py) that loader_main.py runs
with the python of <repo>/.venv-<name> (built by `make setup-validators`). It reads {"requests": [...]}
as JSON on stdin and prints {"results": [...]}: one process per framework answers every request, so
the heavy imports (torch, AReaL, RLinf) are paid once for all presets (`prefetch`). Results are
cached by request, so a later loader_check for the same spec costs nothing; an acceptance is also kept
on disk (build/loader-cache/<framework>-<key>.json), keyed by the request, the venv's stamp (its lock
digest) and the loader's source, so a second `make plan` of the same config runs no loader.

Env:
    RLAUNCH_VALIDATORS  directory holding the .venv-<framework> environments (default: the repo root)
    RLAUNCH_LOADER_TIMEOUT_S  deadline for one loader process (default: 300)
    RLAUNCH_LOADER_CACHE  where accepted answers are kept (default: build/loader-cache)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rlaunch import ROOT
from rlaunch.errors import CheckError
from rlaunch.registry.frameworks import venv_python as venv_python  # re-exported: callers name it here
from rlaunch.validate import early

HARNESS = Path(__file__).resolve().parent / "loader_main.py"
FRAMEWORKS = Path(__file__).resolve().parents[1] / "frameworks"  # their packages hold the loaders
SKIPPED = "skipped: run `make setup-validators`"
_CACHE: dict[str, dict[str, Any]] = {}


def available(framework: str) -> bool:
    return venv_python(framework).exists()


def _key(framework: str, request: dict[str, Any], loader: Path | None = None) -> str:
    return framework + ":" + (loader.name + ":" if loader else "") + json.dumps(request, sort_keys=True)


def run(framework: str, requests: list[dict[str, Any]], run_id: str = "",
        loader: Path | None = None) -> list[dict[str, Any]]:
    """Answer every request in one loader process; {"skipped": msg} for each when no venv exists.
    run_id: the run's id, which every plan makes anew (a timestamp), stands for itself on disk.
    loader: another loader module than the framework's own (validate/import_loader.py), in its venv."""
    if not available(framework):
        return [{"ok": None, "skipped": f"{SKIPPED} ({venv_python(framework)} is missing)"}
                for _ in requests]
    stamp = venv_stamp(framework)
    for req in requests:  # a result this venv gave this request before, on disk (cache_dir())
        if _key(framework, req, loader) not in _CACHE and \
                (hit := _read_cached(framework, req, stamp, run_id, loader)) is not None:
            _CACHE[_key(framework, req, loader)] = hit
    todo = [r for r in requests if _key(framework, r, loader) not in _CACHE]
    if todo:
        for req, res in zip(todo, _spawn(framework, todo, loader)):
            _CACHE[_key(framework, req, loader)] = res
            if res.get("ok") and stamp:  # an acceptance only: a rejection or crash is asked again
                _write_cached(framework, req, stamp, run_id, res, loader)
    return [_CACHE[_key(framework, r, loader)] for r in requests]


def cache_dir() -> Path:
    return Path(os.environ.get("RLAUNCH_LOADER_CACHE") or ROOT / "build" / "loader-cache")


def venv_stamp(framework: str, name: str = "") -> str:
    """The validator venv's identity: its lock digest and python (scripts/setup-validators' stamp,
    .rlaunch-validator; the rehearsal's venv has .rlaunch-verlcpu); "" when it has none, and then
    nothing of it is cached."""
    venv = venv_python(framework).parent.parent
    for stamp in ([venv / name] if name else [venv / ".rlaunch-validator", venv / f".rlaunch-{framework}"]):
        try:
            return stamp.read_text(encoding="utf-8").strip()
        except OSError:
            continue
    return ""


RUN_ID = "<rlaunch:run_id>"  # the run id's place in a kept request and answer


def _disk_key(framework: str, request: dict[str, Any], stamp: str, run_id: str, loader: Path | None) -> Path:
    # Every input of the answer: the request (its run id a placeholder: a new one each plan), the venv's
    # identity, the harness and the loader's source.
    text = json.dumps([framework, request, stamp], sort_keys=True)
    digest = hashlib.sha256((text.replace(run_id, RUN_ID) if run_id else text).encode())
    for source in (HARNESS, loader or script(framework)):
        digest.update(source.read_bytes())
    return cache_dir() / f"{framework}-{digest.hexdigest()[:32]}.json"


def _read_cached(framework: str, request: dict[str, Any], stamp: str, run_id: str,
                 loader: Path | None = None) -> dict[str, Any] | None:
    if not stamp:
        return None
    try:
        text = _disk_key(framework, request, stamp, run_id, loader).read_text(encoding="utf-8")
        found: dict[str, Any] = json.loads(text.replace(RUN_ID, run_id) if run_id else text)
    except (OSError, ValueError):
        return None
    return found


def _write_cached(framework: str, request: dict[str, Any], stamp: str, run_id: str,
                  result: dict[str, Any], loader: Path | None = None) -> None:
    path = _disk_key(framework, request, stamp, run_id, loader)
    text = json.dumps(result)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a concurrent plan reads the whole answer or none (rename within one directory).
        tmp = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(text.replace(run_id, RUN_ID) if run_id else text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only build/: the next plan asks the loader again


def prefetch(framework: str, requests: list[dict[str, Any]]) -> None:
    """Warm the cache for many specs at once (make plan for every preset, the bench)."""
    run(framework, requests)


def prefetch_all(by_framework: dict[str, list[dict[str, Any]]]) -> None:
    """One loader process per framework, all at once: the plan's wall time is the slowest loader."""
    with ThreadPoolExecutor(max_workers=max(len(by_framework), 1)) as pool:
        list(pool.map(lambda item: run(*item), by_framework.items()))


def script(framework: str) -> Path:
    """frameworks/<name>/loader.py: the framework's own loader, run by loader_main.py in its venv."""
    return FRAMEWORKS / framework / "loader.py"


def _spawn(framework: str, requests: list[dict[str, Any]], loader: Path | None = None) -> list[dict[str, Any]]:
    script_ = loader or script(framework)
    timeout = float(os.environ.get("RLAUNCH_LOADER_TIMEOUT_S", "300"))
    # PYTHONDONTWRITEBYTECODE dropped: the validator venv is rlaunch's own, installed without bytecode
    # (uv), and compiling AReaL's or RLinf's imports on every plan doubles the loader's CPU (AReaL 15 -> 8 s).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "PYTHONDONTWRITEBYTECODE")}
    env.update({"PYTHONNOUSERSITE": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled",
                "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        # -P: never import from the current directory (a Ray temp dir named `ray` in /tmp shadows ray).
        proc = early.run([str(venv_python(framework)), "-P", str(HARNESS), str(script_)],
                         input=json.dumps({"requests": requests}), timeout=timeout, env=env, cwd=str(FRAMEWORKS))
    except subprocess.TimeoutExpired:
        msg = f"{framework} loader did not answer within {timeout:.0f} s (RLAUNCH_LOADER_TIMEOUT_S)"
        return [{"ok": False, "error": msg, "key": ""} for _ in requests]
    try:
        results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    except (IndexError, KeyError, ValueError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        msg = f"{framework} loader crashed (exit {proc.returncode}): " + " | ".join(tail)
        return [{"ok": False, "error": msg, "key": ""} for _ in requests]
    if len(results) != len(requests):
        return [{"ok": False, "error": f"{framework} loader answered {len(results)} of {len(requests)}",
                 "key": ""} for _ in requests]
    return list(results)


def result_line(framework: str, result: dict[str, Any]) -> str:
    """One plan line for a loader result; a rejection is a CheckError naming the framework's key."""
    if result.get("skipped"):
        return f"{framework} loader {result['skipped']}"
    if not result.get("ok"):
        key = f" key {result['key']}:" if result.get("key") else ""
        raise CheckError(f"{framework}-loader", f"{result.get('loader', framework)} rejected the config:"
                         f"{key} {result.get('error', '')}")
    return f"{result['loader']} accepted: {result['summary']}"

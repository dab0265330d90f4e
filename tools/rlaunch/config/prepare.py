"""PREPARE= (data.prepare): the command that turns DATA's pinned rows into the framework's layout (issue 44).

    python3 prep.py --in {input} --out {output}
    python3 examples/data_preprocess/gsm8k.py --local_dataset_path {input} --local_save_dir {output}   (verl's, CODE
                                                                               a verl checkout)

A script in CODE (a path relative to CODE, in its pack), run in CODE's directory with {input} replaced by
the pinned source's directory and {output} by an empty directory it fills. Split with shlex and run
without a shell: the placeholders become single arguments whatever the paths hold. Placeholders, not
environment variables, so verl's own preprocessing scripts run as they are (they take directories as flags).

Its output is pinned like a download: <mount>/data/prepared/<hash12>/, the hash over the source's pin (its
commit or content hash or path), the command and CODE's hash, with its SHA256SUMS and stamp
(rlaunch.job.data --prepare): a second launch with the same three reruns nothing. The framework's data keys
point there; its train/test files are found by name as a source's are (rlaunch.config.datasource.splits).

At plan time a DATA= of this machine (or a shared path this machine sees) is converted here, in the
framework's CPU venv (python3 on PATH is that venv's), within PLAN_TIMEOUT_S, into
build/datacheck/prepared/<hash12>/ (kept: the same hash is not converted twice); the framework's row
checks then read that output. Elsewhere the output's files are verl's default names and the plan says
what was not checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlaunch.config import datarows, datasource
from rlaunch.config.knobs import CONTROL_RE
from rlaunch.errors import ConfigError
from rlaunch.registry.frameworks import venv_python as validator_python

KEY = "data.prepare"
INPUT, OUTPUT = "{input}", "{output}"
ALLOWED = ("a command in CODE that reads {input} and writes the framework's rows to {output}, e.g. "
           "'python3 prep.py --in {input} --out {output}'")
# The framework's CPU venv (.venv-<name>) the plan converts in (its row checks run there too); others: this python.
VENVS = {"verl": "verlcpu", "areal": "areal", "rlinf": "rlinf"}
PLAN_TIMEOUT_S = 300
# An interpreter whose first argument is the script: python3 X.py, bash X.sh.
_INTERPRETER = re.compile(r"^(?:.*/)?(?:python(?:3(?:\.[0-9]+)?)?|bash|sh)$")


def parse(command: str, source: str = "") -> list[str]:
    """The command's argv (placeholders still in it); ConfigError naming PREPARE for what cannot run."""
    if re.search(CONTROL_RE, command):
        raise ConfigError(KEY, command, f"{ALLOWED} (one line, no control characters)", source)
    try:
        argv = shlex.split(command)
    except ValueError as err:
        raise ConfigError(KEY, command, f"{ALLOWED} ({str(err).lower()})", source) from None
    if not argv or not any(OUTPUT in a for a in argv):
        raise ConfigError(KEY, command, f"{ALLOWED}: it has no {OUTPUT} (where it writes)", source)
    return argv


def script(argv: list[str]) -> str:
    """The script the command runs (relative to CODE): `python3 X.py ...` -> X.py, `bash x.sh` or `./x.sh` ->
    x.sh; "" for `python3 -m module` (a module on CODE's path or installed)."""
    rest = argv[1:] if _INTERPRETER.match(argv[0]) else argv
    for arg in rest:
        if arg == "-m":
            return ""
        if not arg.startswith("-"):
            return arg
    return ""


def check_script(command: str, argv: list[str], code_root: Path | None, held: set[str], source: str = "") -> str:
    """The script's path relative to CODE; ConfigError when it is not a file CODE's pack holds."""
    rel = script(argv)
    if not rel:
        return ""
    if code_root is None:
        raise ConfigError(KEY, command, f"{ALLOWED}: its script {rel} runs from CODE, which is not set "
                          "(CODE=<the directory that holds it>)", source)
    path = Path(rel)
    if path.is_absolute():
        inside = path.resolve().is_relative_to(code_root.resolve())
        rel = path.resolve().relative_to(code_root.resolve()).as_posix() if inside else rel
        if not inside:
            raise ConfigError(KEY, command, f"{ALLOWED}: its script {rel} is outside CODE ({code_root}); "
                              "put it in CODE and give its path relative to CODE", source)
    normal = os.path.normpath(rel)
    if normal.startswith(".."):
        raise ConfigError(KEY, command, f"{ALLOWED}: its script {rel} is outside CODE ({code_root}); put it "
                          "in CODE and give its path relative to CODE", source)
    if normal not in held:
        raise ConfigError(KEY, command, f"{ALLOWED}: its script {normal} is not a file CODE packs ({code_root})",
                          source)
    return normal


def argv_for(argv: list[str], input_dir: str, output_dir: str) -> list[str]:
    """The argv with its placeholders replaced (each argument stays one argument)."""
    return [a.replace(INPUT, input_dir).replace(OUTPUT, output_dir) for a in argv]


def digest(source: dict[str, Any], command: str, code_hash: str) -> str:
    """The prepared output's name: sha256 over what it is made from (the source's pin, command, CODE)."""
    what = {k: source.get(k, "") for k in ("kind", "hf_id", "revision", "sha256", "dir")}
    blob = json.dumps({"source": what, "command": command, "code": code_hash}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def plan_dir(source: dict[str, Any]) -> Path:
    """Where the plan converts a source of this machine (beside the data checks' cache)."""
    return datarows.cache_dir() / "prepared" / str(source["prepare_hash"])[:12]


def venv_python(framework: str) -> Path:
    venv = VENVS.get(framework)
    return validator_python(venv) if venv else Path(sys.executable)


def pin(source: dict[str, Any], command: str, code_pin: dict[str, Any], code_root: Path | None, held: set[str],
        mount: str, framework: str, source_key: str = "") -> dict[str, Any]:
    """spec.pins.source with data.prepare: prepare (the command), prepare_hash, prepared (the output
    directory every node reads) and the output's train/test files. A source here is converted now."""
    if not command:
        return source
    if not source:
        raise ConfigError(KEY, command, "empty without DATA= (data.source): the command converts DATA's rows",
                          source_key)
    argv = parse(command, source_key)
    check_script(command, argv, code_root, held, source_key)
    hashed = digest(source, command, str(code_pin.get("hash", "")))
    out = {**source, "prepare": command, "prepare_hash": hashed, "prepared": f"{mount}/data/prepared/{hashed[:12]}"}
    here = _input_here(out)
    if here is None:
        unseen = unseen_files(framework)
        return {**out, **unseen, "note": "converted by the inputs step, not here (DATA is not on this machine): the "
                f"framework reads {unseen['train']} and {unseen['test']} in its output", "prepare_checked": ""}
    done = run_here(out, argv, here, code_root, framework, source_key)
    if isinstance(done, str):
        return {**out, **unseen_files(framework), "note": done, "prepare_checked": ""}
    names = datasource.files_of(done)
    try:
        train, test, note = datasource.splits([n for n in names if n != "SHA256SUMS.stamp"], "", command)
    except ConfigError as err:
        raise ConfigError(KEY, command, f"a command whose output the framework reads: {err.allowed}",
                          source_key) from None
    return {**out, "train": ",".join(train), "test": ",".join(test), "note": note, "prepare_checked": str(done)}


def unseen_files(framework: str) -> dict[str, str]:
    """The output's files when the plan cannot list them: the names the framework's readers take (RLinf
    reads .json/.jsonl only; verl's scripts write train.parquet/test.parquet)."""
    return {"train": "train.jsonl", "test": "test.jsonl"} if framework == "rlinf" else dict(datasource.DEFAULT_FILES)


def _input_here(source: dict[str, Any]) -> Path | None:
    """The source's directory on this machine, as the inputs step hands it to the command; None elsewhere."""
    if source["kind"] == "local":
        local = Path(source["local"])
        if local.is_dir():
            return local
        # One file: a directory holding only it, as the upload makes it on the storage.
        alone = plan_dir(source).with_suffix(".in")
        alone.mkdir(parents=True, exist_ok=True)
        link = alone / local.name
        if not link.exists():
            link.symlink_to(local)
        return alone
    if source["kind"] == "shared" and Path(source["dir"]).is_dir():
        return Path(source["dir"])
    return None


def run_here(source: dict[str, Any], argv: list[str], here: Path, code_root: Path | None, framework: str,
             source_key: str = "") -> Path | str:
    """The command run now on `here` into plan_dir (kept when its stamp or SHA256SUMS holds); why not, as
    a note, when it cannot run here (no venv, past the deadline). A command that fails is a ConfigError.
    Both steps are the node-side module's own command lines (rlaunch.job.data --check, --prepare), run as
    the inputs step runs them: the plan converts exactly as the nodes will."""
    out = plan_dir(source)
    node_side = [sys.executable, "-m", "rlaunch.job.data"]
    if (out / "SHA256SUMS").is_file() and subprocess.run(
            [*node_side, f"--check={out}", "--what=dataset"], capture_output=True, timeout=PLAN_TIMEOUT_S,
            check=False).returncode == 0:
        return out
    python = venv_python(framework)
    if not python.exists():
        return (f"not converted here: {python.parent.parent.name} is missing (make setup-"
                f"{python.parent.parent.name.removeprefix('.venv-')}); the inputs step converts it")
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(python.parent.parent)}
    # Its own session: past the deadline the command's children are stopped with it.
    proc = subprocess.Popen([*node_side, f"--prepare={shlex.join(argv)}", f"--input={here}",
                             f"--code={code_root or here}", f"--out={out}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=PLAN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"not converted here: it ran past {PLAN_TIMEOUT_S} s; the inputs step converts it"
    if proc.returncode:
        said = (err.strip().splitlines() or ["no output"])[-1].removeprefix("data: ")
        raise ConfigError(KEY, source["prepare"], f"a command that converts DATA: {said}", source_key)
    return out


def plan_line(source: dict[str, Any]) -> str:
    """The plan's line for it: the command, its input and where its output goes."""
    checked = (f"converted here first ({source['prepare_checked']})" if source.get("prepare_checked")
               else "not converted here")
    return (f"data.prepare: `{source['prepare']}` in CODE, {INPUT}={source['dir']} {OUTPUT}={source['prepared']}/ "
            f"(train {source['train']}, test {source['test']}); {checked}")

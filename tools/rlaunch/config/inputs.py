"""The run's inputs on the shared storage: the model and the dataset. One place says, for every
framework and infrastructure, where each lives, how it is made, and what it must hold.

Two layouts, chosen by config keys:
  - rlaunch's own (the default): one directory per pinned revision, <mount>/models/<model.name>/<rev12>
    and <mount>/data/<data.dataset>/<rev12>, downloaded at the revision configs/versions.yaml pins
    (python -m rlaunch.job.data, the code `make data` runs) with a SHA256SUMS manifest, from the pin's
    hub: the Hugging Face Hub, or ModelScope (`hub: modelscope`; a model there lives in seed 003's
    <mount>/models/modelscope/<org>/<name>/<revision>). model.path=[modelscope:]<org>/<name>[@rev]
    names any model on either hub, laid out the same way (rlaunch.config.hub).
  - the user's: inputs already on the shared storage, e.g. seeds 002 and 004's /data/Qwen2.5-0.5B-Instruct
    and /data/data/gsm8k/. model.path (an absolute path) and data.path name the directories; nothing is
    downloaded, and their SHA256SUMS is computed once, the first time a launch sees them without one
    (afterwards every launch and every node checks the same bytes).

What uses this: the frameworks' adapters (the paths they hand to verl/AReaL/RLinf and the files
preflight checks), SkyPilot's setup.sh and KubeRay's inputs Job (setup_lines: idempotent, whatever
already passes its manifest is left alone), AIStudio's run.sh manifest checks (of()), and `make plan`
(layout()).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
import os
import shlex
from dataclasses import dataclass

from rlaunch.config import cmdfacts, code, datasource, hub, prepare
from rlaunch.errors import ConfigError
from rlaunch.registry import backends, frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

MANIFEST = "SHA256SUMS"
# Beside it: each listed file's size and version at its last full verification (rlaunch.job.data).
STAMP = MANIFEST + ".stamp"
# The datasets rlaunch's own preparation (rlaunch.job.data) converts to the framework's rows; any
# other is the hub snapshot as it is.
CONVERTED = ("gsm8k", "math")
# A model directory holds at least these (*.ext: at least one file with that suffix).
MODEL_FILES = ("config.json", "tokenizer_config.json", "*.safetensors")
PY = '"${RLAUNCH_PYTHON:-python3}"'
# Where SkyPilot's file_mounts puts a DATA= directory of this machine on each node, before the inputs
# step copies it onto the shared storage (a file_mounts target inside a bucket mount is not supported).
UPLOAD_MOUNT = "/tmp/rlaunch-data"


@dataclass(frozen=True)
class Input:
    what: str                 # "model" | "dataset"
    dir: str                  # on the shared storage, as every node sees it
    key: str                  # the config key that chose it: model.path / data.path, or model.name / data.dataset
    user: bool                # the user's directory (or a dataset rlaunch cannot make): never downloaded
    fetch: tuple[str, ...]    # `python -m rlaunch.job.data` arguments that make it (empty: it must be there)
    source: str               # what it holds: "<id>@<revision>[ on ModelScope]" or "yours"
    required: tuple[str, ...]  # files it must hold besides SHA256SUMS (*.ext: at least one such file)


def _adapter(spec: Spec) -> Any:
    return frameworks.get(spec.framework.name)


def _is_dir(path: str) -> bool:
    return path.startswith("/")


# ---------------------------------------------------------------- where


def model_dir(spec: Spec) -> str:
    """The directory the framework loads the model from: model.path when it is an absolute path,
    else the pinned revision's directory; "" when model.path names another hub id (no directory)."""
    return model_dir_of(spec.model.path, spec.pins.model, spec.paths.model_dir)


def model_dir_of(path: str, pin: dict[str, Any], pinned_dir: str) -> str:
    """model_dir of model.path, pins.model and paths.model_dir (config.derive's, before the Spec is)."""
    if _is_dir(path):
        return path.rstrip("/")
    pinned = pin.get("hf_id", "")
    hub_id = bool(pin.get("asked"))  # model.path=<org>/<name>[@rev] (rlaunch.config.hub)
    if pinned and pinned_dir and (path in ("", pinned) or hub_id):
        return pinned_dir
    return ""


def model_path(spec: Spec) -> str:
    """What the framework loads: the model directory, or the hub id model.path names. Decided once,
    by config.derive, as paths.model: read that."""
    return model_dir(spec) or spec.model.path


def data_dir(spec: Spec) -> str:
    """The dataset directory: data.path, or the pinned revision's directory in the framework's layout
    (AReaL reads the hub snapshot as is: a sibling directory ending in -hf)."""
    if spec.pins.source and not spec.train.rehearse:  # a rehearsal reads DATA's first rows at data.path
        return datasource.read_dir(spec.pins.source)
    if spec.data.path:
        return spec.data.path.rstrip("/")
    base = spec.paths.data_dir
    return f"{base}-hf" if getattr(_adapter(spec), "dataset_snapshot", False) else base


def data_files(spec: Spec) -> dict[str, list[str]]:
    """The dataset's train and test files as every node reads them: data.source's, found by name
    (rlaunch.config.datasource), else the directory's train.parquet and test.parquet."""
    if spec.pins.source and not spec.train.rehearse:
        return {split: datasource.files(spec.pins.source, split) for split in ("train", "test")}
    ddir = data_dir(spec)
    return {split: [f"{ddir}/{name}"] for split, name in datasource.DEFAULT_FILES.items()}


def uploads(spec: Spec) -> dict[str, str]:
    """SkyPilot's file_mounts for a DATA= of this machine: {node path: local path} ({} otherwise)."""
    source = spec.pins.source
    # data.prepare runs in CODE on the CPU step: CODE's pack (staged in its outbox) goes there too.
    code_mount = {spec.paths.code_dir: code.outbox(spec)} if source.get("prepare") and spec.paths.code_dir else {}
    if source.get("kind") != "local":
        return code_mount
    target = f"{UPLOAD_MOUNT}/{source['sha256'][:12]}"
    local = source["local"]
    return {f"{target}/{os.path.basename(local)}" if os.path.isfile(local) else target: local, **code_mount}


# ---------------------------------------------------------------- what

def _under(directory: str, files: list[str]) -> list[str]:
    return [p[len(directory) + 1:] for p in files if p.startswith(directory + "/")]


def of(spec: Spec) -> list[Input]:
    """The model and dataset inputs of the run, each with its directory, origin and required files
    (the adapter's inputs(spec) under that directory)."""
    adapter = _adapter(spec)
    wanted = [str(p) for p in adapter.inputs(spec)]
    out = [_source(spec, wanted)] if spec.pins.source else []
    if spec.pins.source.get("prepared"):
        out.append(_prepared(spec, wanted))
    if adapter.own_inputs(spec):  # the user's config names its model and data (CMD=): its model only
        named = cmdfacts.of(spec)
        return out + (_model(spec, wanted) if named is not None and cmdfacts.taken(named.value) else [])
    pin = spec.pins.dataset
    if (pin.get("hf_id") or spec.data.path) and not spec.pins.source:
        ddir = data_dir(spec)
        user = bool(spec.data.path)
        name = spec.data.dataset
        fetch: tuple[str, ...]
        if getattr(adapter, "dataset_snapshot", False):
            fetch = (f"--dataset={name}", "--snapshot")
        elif name in CONVERTED or pin.get("file"):
            fetch = (f"--dataset={name}",)
        else:
            fetch = ()
        pinned = [pin["file"]] if pin.get("file") and not user else []
        required = tuple(dict.fromkeys(f for f in pinned + _under(ddir, wanted) if f != MANIFEST))
        out.append(Input(
            what="dataset", dir=ddir, key="data.path" if user else "data.dataset", user=user or not fetch,
            fetch=() if user else fetch,
            source="yours" if user else f"{pin['hf_id']}{' ' + pin['config'] if pin.get('config') else ''}"
                                        f"@{pin.get('revision', '')[:12]}{_on(pin)}",
            required=required))
    return out + _model(spec, wanted)


def _model(spec: Spec, wanted: list[str]) -> list[Input]:
    """The model's input (none where model.path names a hub id with no directory)."""
    mdir = model_dir(spec)
    out = []
    if mdir:
        user = _is_dir(spec.model.path)
        pin = spec.pins.model
        model_files = list(MODEL_FILES) + _under(mdir, wanted)
        hub_id = bool(pin.get("asked"))
        flag = "--modelscope-id" if hub.of(pin) == "modelscope" else "--hf-id"
        fetch = (f"{flag}={pin['hf_id']}", f"--revision={pin['revision']}") if hub_id else \
            (f"--model={spec.model.name}",)
        out.append(Input(
            what="model", dir=mdir, key="model.path" if user or hub_id else "model.name", user=user,
            fetch=() if user else fetch,
            source="yours" if user else f"{pin['hf_id']}@{pin.get('revision', '')[:12]}{_on(pin)}",
            required=tuple(dict.fromkeys(f for f in model_files if f != MANIFEST))))
    return out


def _source(spec: Spec, wanted: list[str]) -> Input:
    """data.source's input: downloaded from its hub, uploaded from this machine, or adopted in place."""
    source = spec.pins.source
    ddir = source["dir"]
    required = tuple(dict.fromkeys(f for f in _under(ddir, wanted) if f != MANIFEST))
    fetch: tuple[str, ...] = ()
    if source["kind"] == "hub":
        on = ("--hub=modelscope",) if source["hub"] == "modelscope" else ()
        fetch = (f"--dataset-id={source['hf_id']}", f"--revision={source['revision']}", *on)
    elif source["kind"] == "local" and _staged(spec):
        fetch = ()  # `make launch` staged it under WORK_ROOT: only checked (and its manifest kept)
    elif source["kind"] == "local":
        here = source["local"] if spec.infra.name == "local" else f"{UPLOAD_MOUNT}/{source['sha256'][:12]}"
        # Quoted here: a path of the user's machine may hold spaces or quotes; setup_lines joins with spaces.
        fetch = (f"--upload={shlex.quote(here)}", f"--sha256={source['sha256']}")
    return Input(what="dataset", dir=ddir, key="data.source", user=source["kind"] != "hub", fetch=fetch,
                 source=datasource.shown(source), required=required)


def _prepared(spec: Spec, wanted: list[str]) -> Input:
    """data.prepare's output: made by the command from the source's directory, in CODE (rlaunch.config.prepare)."""
    source = spec.pins.source
    out = source["prepared"]
    # Quoted here: setup_lines joins the arguments with spaces, and the command is the user's text.
    fetch = (f"--prepare={shlex.quote(source['prepare'])}", f"--input={shlex.quote(source['dir'])}",
             f"--code={shlex.quote(spec.paths.code_dir or '.')}")
    return Input(what="dataset", dir=out, key="data.prepare", user=False, fetch=fetch,
                 source=f"data.prepare of {datasource.shown(source)}",
                 required=tuple(dict.fromkeys(f for f in _under(out, wanted) if f != MANIFEST)))


def _staged(spec: Spec) -> bool:
    """A DATA= of this machine that `make launch` copies onto the storage itself (AIStudio: this
    machine mounts WORK_ROOT); elsewhere the inputs step uploads it."""
    return backends.infra(spec.infra.name).backend == "aistudio"


def sites(spec: Spec, first: str = "GitHub") -> str:
    """What must be reachable where the inputs are prepared, for the lines that say so: `first`,
    then the hubs the downloads go to ("GitHub, the Hugging Face Hub and ModelScope")."""
    source = spec.pins.source if spec.pins.source.get("kind") == "hub" else spec.pins.dataset
    names = [hub.of(spec.pins.model if item.what == "model" else source) for item in of(spec)
             if item.fetch and "--upload" not in item.fetch[0]]
    items = list(dict.fromkeys([first, *(hub.HUBS[n]["shown"] for n in names)]))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _on(pin: dict[str, Any]) -> str:
    """' on ModelScope' for a pin of another hub than the Hugging Face Hub, else ''."""
    name = hub.of(pin)
    return "" if name == hub.DEFAULT else f" on {hub.HUBS[name]['shown']}"


def check(spec: Spec) -> None:
    """The user's input paths are absolute and on the storage every node shares."""
    mount = spec.storage.mount.rstrip("/")
    for key, path in (("model.path", spec.model.path), ("data.path", spec.data.path)):
        if key == "data.path" and path and not _is_dir(path):
            raise ConfigError(key, path, f"an absolute path under storage.mount={mount} (the directory "
                              "where the dataset already is), or empty for the pinned dataset")
        if _is_dir(path) and not os.path.normpath(path).startswith(mount + "/"):
            raise ConfigError(key, path, f"a directory under storage.mount={mount}: every node and the "
                              "inputs step read it from the shared storage")


# ---------------------------------------------------------------- how (shell lines, run on the cluster)


def setup_lines(spec: Spec) -> list[str]:
    """Idempotent shell lines that make every input ready: a directory whose SHA256SUMS.stamp matches a
    listing of it is kept without reading a byte; else one whose SHA256SUMS verifies is kept (and
    stamped); else a pinned one is (re)made at its revision, and the user's gets its manifest computed
    once, a user directory that no longer matches its manifest stopping the run."""
    lines = []
    for item in of(spec):
        q = shlex.quote(item.dir)
        test = f"if ! {_check(item)}; then "
        if item.fetch:
            lines.append(f"{test}{PY} -m rlaunch.job.data {' '.join(item.fetch)} --out={q}; fi")
        else:
            required = "".join(f" --require={shlex.quote(f)}" for f in item.required)
            lines.append(f"{test}{PY} -m rlaunch.job.data --adopt={q} --what={item.what}{required}; fi")
    return lines


def unpack_lines(spec: Spec, archive: str) -> list[str]:
    """Shell lines (KubeRay's inputs Job) that extract a DATA= of this machine, carried as the tar.gz
    `archive`, where the upload line that follows reads it ({UPLOAD_MOUNT}/<hash12>, the pod's own
    disk); [] without one. The upload keeps a copy already on the storage (its SHA256SUMS)."""
    source = spec.pins.source
    if source.get("kind") != "local":
        return []
    here = shlex.quote(f"{UPLOAD_MOUNT}/{source['sha256'][:12]}")
    return ["# DATA's files (rlaunch.config.datasource.archive): extracted on the pod, then uploaded below",
            f"mkdir -p {here} && tar -xzf {shlex.quote(archive)} -C {here}"]


def check_lines(spec: Spec) -> list[str]:
    """The GPU nodes' lines when a CPU step prepared the inputs: the stamp checked by metadata; on a
    mismatch the full check (it says how many bytes it reads), and a failure stops the run: nothing
    is downloaded where GPUs wait."""
    lines = []
    # Each check's seconds and bytes go to the run's phases (inputs_gpu_s, inputs_gpu_bytes).
    counted = f" --phases={shlex.quote(spec.paths.run_dir + '/phases.jsonl')}"
    for item in of(spec):
        again = shlex.quote(f"inputs: {item.what} {item.dir} is not what the CPU step prepared: "
                            "`make launch` again runs that step first")
        lines.append(f"if ! {_check(item)}{counted}; then echo {again} >&2; exit 1; fi")
    return lines


def _check(item: Input) -> str:
    """The stamp by metadata, else every byte against SHA256SUMS (rlaunch.job.data --check)."""
    return f"{PY} -m rlaunch.job.data --check={shlex.quote(item.dir)} --what={item.what}"


# ---------------------------------------------------------------- what `make plan` says


def layout(spec: Spec) -> list[str]:
    """The inputs layout the run expects, for `make plan`: per input, where and what it holds, then
    where it comes from."""
    lines = []
    for item in of(spec):
        holds = ", ".join(list(item.required) + [MANIFEST])
        if item.key == "data.source":
            how = _source_how(spec, item)
        elif item.key == "data.prepare":
            how = prepare.plan_line(spec.pins.source)
        elif item.fetch:
            how = f"{item.source}: downloaded unless its {MANIFEST} verifies"
        elif item.key.endswith(".path"):
            how = f"yours ({item.key}): never downloaded; {MANIFEST} computed once if missing, then checked"
        else:
            how = f"{item.source}: put it there yourself; {MANIFEST} computed once if missing"
        lines += [f"{item.what:<8}{item.dir}/  ({holds})", f"{'':<8}{how}"]
    named = cmdfacts.of(spec) if _adapter(spec).own_inputs(spec) else None  # CMD='s model: a commit goes there
    model = hub.warning(spec.pins.model, named.key if named is not None else "model.path")
    moving = [w for w in (model, datasource.warning(spec.pins.source)) if w]
    return lines + [f"WARNING {w}" for w in moving]


def _source_how(spec: Spec, item: Input) -> str:
    """data.source's origin line: where from, how it gets there, the files the framework reads."""
    source = spec.pins.source
    kind = source["kind"]
    carrier = {"local": "by make launch", "aistudio": "by make launch into WORK_ROOT; run.sh checks it",
               "kuberay": "(a ConfigMap, then the inputs Job)"}
    how = {"hub": f"downloaded once (unless its {MANIFEST} verifies)",
           "local": "uploaded once from this machine " + carrier.get(
               backends.infra(spec.infra.name).backend, "(SkyPilot file_mounts, then the inputs step)"),
           "shared": f"on the storage already; {MANIFEST} computed once if missing"}[kind]
    if source.get("prepared"):  # its files are data.prepare's input; the output's are on the next line
        return f"data.source={item.source}: {how}; data.prepare's {prepare.INPUT}"
    note = f"; {source['note']}" if source.get("note") else ""
    return (f"data.source={item.source}: {how}; train {source['train']}, test {source['test']}{note}")

"""Find a run from this machine: its handle (what status, logs, down, dashboard and summary act on),
and its spec.json and run directory (what tensorboard and compare read).

A launch from here leaves its handle in its artifacts directory (OUT, default build/<run_id>/, the
last one named in build/last-run): `launched` finds it. For tensorboard and compare a reference is a
run id (its rendered artifacts under build/<id>/, else its run directory on the local shared storage,
build/storage/runs/<name>/<id>/), or a directory: a run directory (it holds the spec.json job.sh
copied there at start, and the handle in plan/) or an artifacts directory (it holds job.sh). A run
directory on a bucket is read from a local mount or synced copy of it: pass that directory.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.backends.base import RunHandle
from rlaunch.config import specjson
from rlaunch.errors import ConfigError, MissingPrerequisite

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


@dataclasses.dataclass(frozen=True)
class RunDir:
    """A run found from this machine by its id or a directory: its spec and where its outputs are
    (what `make tensorboard` and `make compare` read). Not backends.base.Run, which is a run as its
    infrastructure reports it."""

    id: str
    data: dict[str, Any]  # its spec.json as the run wrote it (compare reads it key by key)
    run_dir: Path  # where its outputs are on this machine (may not exist: see `local`)
    handle: RunHandle | None = None  # what its launch made, where a launch of this rlaunch left it

    @property
    def spec(self) -> Spec:
        return specjson.view(self.data)

    @property
    def local(self) -> bool:
        return self.run_dir.is_dir()

    def remote_url(self) -> str:
        """Where the run directory lives when it is not on this machine (a bucket URL, or a path on
        the nodes' shared storage)."""
        storage, run_dir = self.data.get("storage", {}), self.spec.paths.run_dir
        mount = storage.get("mount", "")
        if storage.get("source") and mount and run_dir.startswith(mount + "/"):
            return str(storage["source"]).rstrip("/") + run_dir[len(mount):]
        return run_dir


def launched(run_id: str = "", out: str = "", last: Path | None = None,
             root: Path = ROOT) -> tuple[RunHandle | None, Path | None]:
    """The handle of a launch from this machine, and the artifacts directory looked in: OUT, else
    build/<RUN_ID>, else the last launch (`last` names its directory); (None, None) without any."""
    if out:
        out_dir = Path(out)
    elif run_id:
        out_dir = root / "build" / run_id
    elif last is not None and last.exists():
        out_dir = Path(last.read_text().strip())
    else:
        return None, None
    path = out_dir / RunHandle.FILE
    return (RunHandle.read(path) if path.is_file() else None), out_dir


def _handle(*paths: Path) -> RunHandle | None:
    return next((RunHandle.read(p) for p in paths if p.is_file()), None)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return spec if isinstance(spec, dict) and "paths" in spec and "run" in spec else None


def find(ref: str, key: str = "RUN_ID", root: Path = ROOT) -> RunDir:
    """The run `ref` names; a reference that names nothing is bad input (exit 2)."""
    ref = str(ref).strip()
    path = Path(ref)
    if "/" in ref or ref in (".", ".."):  # a path; a bare word is a run id
        spec = _load(path / "spec.json")
        if spec is None:
            raise ConfigError(key, ref, "a run directory or artifacts directory holding spec.json")
        if (path / "job.sh").is_file():  # the artifacts directory: outputs are in the run dir
            return RunDir(spec["run"]["id"], spec, Path(spec["paths"]["run_dir"]), _handle(path / RunHandle.FILE))
        return RunDir(spec["run"]["id"], spec, path.resolve(), _handle(path / "plan" / RunHandle.FILE))
    spec = _load(root / "build" / ref / "spec.json")
    if spec is not None:
        return RunDir(ref, spec, Path(spec["paths"]["run_dir"]), _handle(root / "build" / ref / RunHandle.FILE))
    for spec_path in sorted((root / "build" / "storage" / "runs").glob(f"*/{ref}/spec.json")):
        spec = _load(spec_path)
        if spec is not None:
            return RunDir(ref, spec, spec_path.parent, _handle(spec_path.parent / "plan" / RunHandle.FILE))
    raise ConfigError(key, ref, f"a run id with build/{ref}/spec.json or a run directory under "
                      "build/storage/runs/, or the path of a run directory")


def split_refs(text: str, key: str = "RUNS") -> list[str]:
    """RUNS is split like a shell command line, so a quoted directory keeps its spaces."""
    try:
        return shlex.split(str(text))
    except ValueError as err:
        raise ConfigError(key, text, f"{str(err).lower()}: {key} is split like a shell command line") from None


def find_all(refs: list[str] | str, key: str = "RUNS") -> list[RunDir]:
    """The runs of a list of references, or of RUNS's text; each run once."""
    items = split_refs(refs, key) if isinstance(refs, str) else list(refs)
    runs = [find(ref, key) for ref in items]
    ids = [run.id for run in runs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(key, " ".join(items), f"each run once (run {dupes[0]} is named twice)")
    return runs


def require_local(run: RunDir) -> Path:
    """The run directory on this machine, or exit 3 saying where it is and how to get it here."""
    if run.local:
        return run.run_dir
    where = run.remote_url()
    how = ("mount the bucket or sync it (e.g. `gcloud storage rsync -r`, `aws s3 sync`) and pass the "
           "local run directory instead of the id" if "://" in where else
           "copy it here (e.g. `rsync -a`, `kubectl cp`) and pass the local run directory instead of the id")
    raise MissingPrerequisite(f"run {run.id}'s run directory on this machine (it is at {where})", how)

"""Which process owns what a test or benchmark created, so a later run of the same checkout sweeps
only what an earlier one left when it was killed past any cleanup (SIGKILL, a lost machine): a
record holds its owner's pid and start time, and a record whose owner is gone is stale. Standard
library only (the KubeRay harness's pod-init step imports nothing else)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def started(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): with the pid, one process, even if
    the pid is reused later; None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def me() -> dict:
    return {"pid": os.getpid(), "started": started(os.getpid())}


def write(path: Path, state: dict) -> None:
    """The record at `path`, this process as its owner, replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**state, **me()}))
    tmp.replace(path)


def stale(directory: Path, pattern: str = "*.json") -> list[tuple[Path, dict]]:
    """The records under `directory` whose owner no longer runs (unreadable ones left alone)."""
    found = []
    for path in sorted(Path(directory).glob(pattern)):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if started(state.get("pid", -1)) != state.get("started"):
            found.append((path, state))
    return found

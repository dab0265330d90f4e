"""The readers of a run's files that the job's tools (attempts, checkpoints), postflight and the
frameworks' postflight checks share: JSON lines, JSON, YAML, logs without colour, TensorBoard
scalars, a safetensors header. Standard library only at import (yaml and tensorboard when called)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def is_finite(value: object) -> bool:
    # orjson (verl's file logger) writes NaN as null: a missing value is not a finite one.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of a JSON-lines file and the count of lines that did not parse."""
    rows, bad = [], 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_yaml(path: Path) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def log_text(path: Path) -> str:
    return ANSI.sub("", Path(path).read_text(encoding="utf-8", errors="replace"))


def head_bytes(path: Path, n: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def read_scalars(root: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar under a TensorBoard directory (all event dirs merged): tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for event_dir in sorted({p.parent for p in Path(root).rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(event_dir), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    for points in out.values():
        points.sort()
    return out


def safetensors_problem(path: Path) -> str | None:
    """None if the file's header parses and its tensors fit the file exactly (not truncated)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return f"{path.name}: shorter than a safetensors header"
            size = int.from_bytes(raw, "little")
            if size > 100 * 2**20:
                return f"{path.name}: header length {size} is not plausible"
            header = json.loads(fh.read(size))
    except (OSError, ValueError) as err:
        return f"{path.name}: unreadable safetensors header ({err.__class__.__name__})"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
    expected = 8 + size + max(ends, default=0)
    actual = Path(path).stat().st_size
    if actual != expected:
        return f"{path.name}: {actual} bytes, its header says {expected} (truncated or corrupt)"
    return None

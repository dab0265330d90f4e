"""Shared by preflight and postflight: check records, the printed table, the JSON report.

A check is a plain dict, {"name", "passed", "detail"} plus "node" when one node is to blame, so
the reports stay readable by `jq` and by the other launch paths without importing rlaunch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import cmdline
from rlaunch.config import specjson
# Exit codes of `preflight` and `postflight`: 0 passed, EXIT_FAILED a check failed, EXIT_USAGE bad arguments.
from rlaunch.errors import EXIT_FAILED, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def check(name: str, passed: bool, detail: str, node: str | None = None) -> dict[str, Any]:
    out = {"name": name, "passed": bool(passed), "detail": detail}
    if node:
        out["node"] = node
    return out


def skipped(name: str, why: str) -> dict[str, Any]:
    """A check that does not apply to this run: recorded (so the report says why), never failing."""
    return {"name": name, "passed": True, "detail": f"skipped: {why}", "skipped": True}


def all_passed(checks: list[dict[str, Any]]) -> bool:
    return all(c["passed"] for c in checks)


def first_failure(checks: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in checks if not c["passed"]), None)


def failure_line(prog: str, failed: dict[str, Any]) -> str:
    """The one line a launch log ends with: which check, on which node, why."""
    where = f" on node {failed['node']}" if failed.get("node") else ""
    return f"{prog}: FAILED {failed['name']}{where}: {failed['detail']}"


def table(headers: list[str], rows: list[list[str]], max_width: int = 60) -> str:
    """A plain fixed-width table; long cells are cut so one row stays one line."""
    cells = [[_cut(str(c), max_width) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def checks_table(checks: list[dict[str, Any]]) -> str:
    """One row per check; the node column only when some check names a node."""
    with_node = any(c.get("node") for c in checks)
    rows = [["ok" if c["passed"] else "FAIL", c["name"], *([c.get("node", "")] if with_node else []),
             c["detail"]] for c in checks]
    return table(["", "check", *(["node"] if with_node else []), "detail"], rows, max_width=100)


def _cut(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a reader on shared storage never sees half a report."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_finite(data), fh, indent=2, sort_keys=True, allow_nan=False, default=str)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a report on shared storage is for everyone
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _finite(value: Any) -> Any:
    """NaN and infinity are not JSON: a report names them as strings ("nan") instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def load_spec(path: Path) -> Spec:
    """spec.json as rendered by every launch, read as the Spec (rlaunch.config.specjson: the nodes have
    no pydantic); a missing or broken file is a usage error."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"--spec {path}: cannot read the spec JSON: {err}") from None
    if not isinstance(data, dict) or "framework" not in data:
        raise UsageError(f"--spec {path}: not an rlaunch spec (no 'framework' key)")
    return specjson.view(data)


# ---------------------------------------------------------------- a stage's command line


# What a stage's run(args) returns: its report (None: nothing to check), lines to print before its
# checks, and the closing line when they pass.
Stage = Callable[[argparse.Namespace], tuple[dict[str, Any] | None, list[str], str]]


def stage_main(prog: str, doc: str, arguments: list[tuple[tuple[Any, ...], dict[str, Any]]], run: Stage,
               argv: list[str] | None) -> int:
    """The command line every stage (accel, preflight, postflight) shares: its arguments parsed
    (the usage from its docstring), `run(args)` -> (report, lines to print before its checks, the
    closing line when they pass). A UsageError is one line and exit 2; a failed check prints the
    table, then the first failure, exit 1."""
    parser = cmdline.parser(prog, doc.split("\n\n")[0], epilog=doc.split("Usage:")[1])
    for flags, options in arguments:
        parser.add_argument(*flags, **options)
    args = parser.parse_args(argv)
    try:
        report, before, passed = run(args)
    except UsageError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_USAGE
    for line in before:
        print(line)
    if report is None:  # nothing to check (accel without a rule): `passed` says so
        print(passed)
        return 0
    print(checks_table(report["checks"]))
    failed = first_failure(report["checks"])
    if failed:
        print(failure_line(prog, failed), file=sys.stderr)
        return EXIT_FAILED
    print(passed)
    return 0


def positive_timeout(value: float | None) -> float | None:
    """--timeout: seconds > 0, or None for the stage's own deadline."""
    if value is not None and value <= 0:
        raise UsageError(f"--timeout={value}: must be > 0 seconds")
    return value

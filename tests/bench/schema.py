"""The keys and types of a benchmark's JSON, checked by its smoke mode (RLAUNCH_BENCH_SMOKE=1,
`tests/bench/run --smoke`): a benchmark that stops writing what its readers expect fails the suite.
smoke() runs one benchmark's smoke as the tests do.

A schema maps each key to a type, a tuple of types, or a nested schema (a dict that must be there).
NUM is a number (never a bool); OPT adds None (a figure the run could not measure, e.g. a style the
smoke mode leaves out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NUM = (int, float)
OPT = (int, float, type(None))


def problems(data, schema: dict, where: str = "") -> list[str]:
    """What in `data` does not match `schema`, one line each ("" when it all matches)."""
    if not isinstance(data, dict):
        return [f"{where or 'the file'}: not an object but {type(data).__name__}"]
    found = []
    for key, want in schema.items():
        name = f"{where}{key}"
        if key not in data:
            found.append(f"{name}: missing")
        elif isinstance(want, dict):
            found += problems(data[key], want, name + ".")
        else:
            types = want if isinstance(want, tuple) else (want,)
            value = data[key]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                allowed = " or ".join(sorted({"null" if t is type(None) else t.__name__ for t in types}))
                found.append(f"{name}: {json.dumps(value)[:60]} is {type(value).__name__}, need {allowed}")
    return found


def check(path: Path, schema: dict, prog: str) -> int:
    """0 if the JSON at `path` matches `schema`; else each problem on stderr and 1."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        print(f"{prog}: smoke: {path} is not readable JSON: {err}", file=sys.stderr)
        return 1
    found = problems(data, schema)
    for line in found:
        print(f"{prog}: smoke: {path}: {line}", file=sys.stderr)
    return 1 if found else 0


def smoke(name: str, out: Path, timeout: int, sample: dict | None = None) -> subprocess.CompletedProcess[str]:
    """`tests/bench/run --smoke NAME` writing its JSON to `out`, outside any make or bench settings of
    the caller; `sample`: the figures of an end-to-end test's own run of the same path
    (RLAUNCH_BENCH_SAMPLE), for the benchmarks that take one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_KNOB_", "RLAUNCH_BENCH_"))}
    env["RLAUNCH_BENCH_OUT"] = str(out)
    if sample is not None:
        path = out.with_name(f"{out.stem}-sample.json")
        path.write_text(json.dumps(sample))
        env["RLAUNCH_BENCH_SAMPLE"] = str(path)
    return subprocess.run([str(Path(__file__).resolve().parent / "run"), "--smoke", name], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)

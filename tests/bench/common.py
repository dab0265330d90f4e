"""What the benchmark scripts share: one-line messages and exits under their own name, integer
knobs from the environment, and the host's load (each result records how busy the machine was)."""

from __future__ import annotations

import os
import sys


def die(prog: str, msg: str, code: int = 2) -> None:
    print(f"{prog}: {msg}", file=sys.stderr)
    sys.exit(code)


def log(prog: str, msg: str) -> None:
    print(f"{prog}: {msg}", file=sys.stderr, flush=True)


def env_int(prog: str, name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, str(default))
    if not raw.isdigit() or int(raw) < minimum:
        die(prog, f"{name}='{raw}' is not allowed: need an integer >= {minimum}")
    return int(raw)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]

"""A reward called on a dataset's rows in a process pool, as the frameworks run theirs (issue 44): the
part the row probes of AReaL and RLinf share. Standard library only: it runs inside each framework's
own venv, with rlaunch on its path.

A probe gives `calls(index, row)` -> (score with the right answer, score with the empty one), or a str
saying why the row fails; `scored` runs it on every row (an even sample of `limit` beyond), in WORKERS
processes (fork: the reward is the probe's, already loaded), and returns the plan line and warnings, or
raises Refused naming the first row that failed.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import statistics
from collections.abc import Callable
from typing import Any

WORKERS = 2
CHUNKS = 8
MARGIN_S = 30.0  # beyond the calls' own limits: a pool's start, a loaded machine
Call = Callable[[int, Any], "tuple[float, float] | str"]


class Refused(Exception):
    """One check failed: its one line."""


def _chunk(calls: Call, rows: list[tuple[int, Any]]) -> list[tuple[int, float, float] | tuple[int, str]]:
    out: list[tuple[int, float, float] | tuple[int, str]] = []
    for index, row in rows:
        got = calls(index, row)
        if isinstance(got, str):
            return [(index, got)]  # the first failure ends the chunk
        out.append((index, *got))
    return out


def scored(calls: Call, rows: list[Any], label: str, limit: int, wait_s: float,
           answers: str) -> tuple[list[str], list[str]]:
    """(plan lines, warnings) of calls on the rows; `answers` names the two (e.g. "boxed answer/empty response")."""
    picked = list(enumerate(rows))
    if len(picked) > limit:
        picked = [picked[int(i * len(picked) / limit)] for i in range(limit)]
    size = max(1, math.ceil(len(picked) / CHUNKS))
    chunks = [picked[i:i + size] for i in range(0, len(picked), size)]
    done: list[tuple[int, float, float] | tuple[int, str]] = []
    with cf.ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(_chunk, calls, chunk) for chunk in chunks]
        for future, chunk in zip(futures, chunks):
            try:
                done += future.result(timeout=wait_s * 2 * len(chunk) + MARGIN_S)
            except cf.TimeoutError:
                stop(pool)
                raise Refused(f"reward {label} did not answer rows {chunk[0][0]}-{chunk[-1][0]} in time "
                              f"({wait_s:g} s a call)") from None
    for item in done:
        if len(item) == 2:
            raise Refused(f"reward {label} on row {item[0]} {item[1]}")
    right = [float(item[1]) for item in done]
    empty = [float(item[2]) for item in done if len(item) == 3]
    good, bad = answers.split("/")
    sample = "" if len(rows) <= limit else f" (an even sample of {limit} of {len(rows)} rows)"
    lines = [f"reward: {label} on {len(done)} rows x 2{sample} in a {WORKERS}-process pool: {good} mean "
             f"{statistics.fmean(right):.3f} spread {statistics.pstdev(right):.3f}, {bad} mean "
             f"{statistics.fmean(empty):.3f}"]
    warnings = []
    if len(set(right + empty)) == 1:
        warnings.append(f"reward {label} gives every row and answer the same score {right[0]:g}: no signal to "
                        "learn from (is it the reward you meant?)")
    return lines, warnings


def stop(pool: cf.ProcessPoolExecutor) -> None:
    """A pool whose reward is stuck: its workers killed, so leaving the `with` does not wait on them
    (the executor's exit joins its workers, and a reward that never returns would hold the plan)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):  # 3.14 names it terminate_workers()
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def number(value: Any) -> float | None:
    """value as a finite float, None when it is none (a bool, a string, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)

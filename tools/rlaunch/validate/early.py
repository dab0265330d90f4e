"""Plan checks that wait on another process, started as soon as the spec is known (issue 44 item 4).

`make plan` waits on a framework's loader (AReaL's imports: ~10 s), verl's data probe and REHEARSE=1's
reward probe, each in its own venv. `Started` runs one on a daemon thread from the moment the spec is
rendered; the plan collects its answer (`result()`) where its line goes, so the lines, their order and
which refusal wins (the first in plan order) are those of running them one after another. A refusal
that comes first exits at once: `stop()` kills the processes still running (they were started by `run`).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
_LIVE: set[subprocess.Popen[str]] = set()
_LOCK = threading.Lock()


class Started(Generic[T]):
    """fn() running now on a daemon thread; result() waits for it and returns or raises what it did."""

    def __init__(self, fn: Callable[[], T]):
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised by result(), in the caller's thread
            self._error = err

    def result(self) -> T:
        self._thread.join()  # each check's own deadline (its subprocess timeout) bounds this wait
        if self._error is not None:
            raise self._error
        return cast(T, self._value)  # set: fn returned


def run(argv: list[str], *, timeout: float, input: str | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run(argv, capture_output=True, text=True, ...) that stop() can kill."""
    with subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw) as proc:
        with _LOCK:
            _LIVE.add(proc)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        finally:
            with _LOCK:
                _LIVE.discard(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def stop() -> None:
    """Kill every process run() still waits on: the plan was refused before their answers mattered."""
    with _LOCK:
        live = list(_LIVE)
    for proc in live:
        proc.kill()

"""What the fault and recovery tests (and `make bench`'s recovery benchmark) share: a `make launch`
followed line by line, a run's progress read from its metrics on the shared storage, and a node
killed the way a machine dies (every process in its network namespace, SIGKILL, at once).

Only what a test started is ever signalled: processes are found by the namespaces named after the
test's own run ids (`ip netns pids`), never by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORAGE = ROOT / "build" / "storage"


def run_dir(run_id: str, preset: str = "rehearsal", storage: Path = STORAGE) -> Path:
    return Path(storage) / "runs" / preset / run_id


def last_step(metrics: Path) -> int:
    """The last step in a metrics.jsonl (0: none yet; a half-written line is skipped)."""
    try:
        lines = Path(metrics).read_text().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def steps(metrics: Path) -> list[int]:
    out = []
    for line in Path(metrics).read_text().splitlines():
        try:
            out.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def wait_for_step(metrics: Path, step: int, deadline_s: float, alive=lambda: True) -> int:
    """Poll until metrics reach `step`; returns the step seen. Fails at the deadline, or when
    `alive()` turns false (the launch ended before training got there)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen = last_step(metrics)
        if seen >= step:
            return seen
        if not alive():
            raise AssertionError(f"the launch ended before step {step} (last step {seen} in {metrics})")
        time.sleep(0.2)
    raise AssertionError(f"no step {step} in {metrics} after {deadline_s:.0f} s (last {last_step(metrics)})")


def netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def signal_all(pids: list[int], sig: int) -> float:
    """`sig` to every pid in one pass (one already gone is skipped); the time it happened."""
    when = time.time()
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return when


def kill_node(ns: str) -> float:
    """A machine dying: SIGKILL to every process in the namespace, in one pass; the time it happened."""
    pids = netns_pids(ns)
    assert pids, f"nothing runs in {ns}"
    return signal_all(pids, signal.SIGKILL)


def freeze(run_id: str, marker: str) -> tuple[float, list[int]]:
    """A stall: SIGSTOP to every process of the run's nodes whose command line holds `marker` (the
    trainers: Ray Train's RayTrainWorker actors, one per node), in one pass; when, and which."""
    found = []
    for ns in namespaces(f"rl-{run_id}-"):
        for pid in netns_pids(ns):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd:
                found.append(pid)
    assert found, f"no process with {marker!r} in the namespaces of run {run_id}"
    return signal_all(found, signal.SIGSTOP), found


def namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix))


def _terminal_signals() -> None:
    """Ctrl-C as at a terminal: a test runner started in the background (`cmd &`) ignores SIGINT,
    and its children would inherit that; a foreground job's processes take SIGINT's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _user_env() -> dict[str, str]:
    """This environment as a user's shell has it: not inside `make test`'s make (its MAKELEVEL and
    MAKEFLAGS would make the launch a sub-make, with make[1]'s messages and job server)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


class Launch:
    """`make launch ARGS...` through the front door that keeps rlaunch's exit code (scripts/rlaunch:
    the same knobs; make would exit 2 for any failure), in a session of its own (as a terminal's
    foreground job), its output collected line by line with the wall time each line arrived."""

    def __init__(self, *args: str, env: dict | None = None):
        self.args = args
        self.started = time.time()
        self.proc = subprocess.Popen([str(ROOT / "scripts" / "rlaunch"), "launch", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     env={**_user_env(), **(env or {})}, preexec_fn=_terminal_signals)
        self.lines: list[tuple[float, str]] = []
        self.ended: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))
        self.proc.wait()
        self.ended = time.time()

    def alive(self) -> bool:
        return self.ended is None

    def wait(self, deadline_s: float) -> int:
        self._reader.join(timeout=deadline_s)
        if self._reader.is_alive():
            self.interrupt(signal.SIGTERM)
            self._reader.join(timeout=60)
            raise AssertionError(f"make launch {' '.join(self.args)} still running after {deadline_s:.0f} s:\n"
                                 + self.tail())
        return self.proc.returncode

    def interrupt(self, sig: int = signal.SIGINT) -> float:
        """Ctrl-C at a terminal: the signal to the whole foreground process group."""
        when = time.time()
        os.killpg(self.proc.pid, sig)
        return when

    @property
    def rlaunch_rc(self) -> int | None:
        """rlaunch's own exit code (None while running)."""
        return self.proc.returncode

    def timeline(self, since: float, *texts: str) -> str:
        """`text +12.3 s` for the first line holding each text, from `since` (for a test's report)."""
        return ", ".join(f"{text!r} +{t - since:.1f} s" if (t := self.first(text)) else f"{text!r} never"
                         for text in texts)

    def first(self, text: str) -> float | None:
        """When the first line holding `text` arrived (None: none has)."""
        return next((t for t, line in self.lines if text in line), None)

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def tail(self, n: int = 60) -> str:
        return "\n".join(line for _, line in self.lines[-n:])


def make(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def attempts(run: Path) -> list[dict]:
    path = Path(run) / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []

"""Progress while a launch waits: one live line on a terminal, plain lines when not (CI, a pipe).

Three waits: the cluster forming (nodes joined out of expected, elapsed against the deadline), a
job pending (Ray has not started its driver yet), and training (step/total, reward, s/step, ETA,
from the `step S/T ...` lines the job prints). rich draws the live line; off a terminal the same
events come out as ordinary lines: one per change, and one every HEARTBEAT_S while nothing changes,
so a CI log shows that a wait is alive without filling up.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, TextIO

if TYPE_CHECKING:  # rich is imported when a terminal draws: lazily
    from rich.console import Console
    from rich.live import Live
    from rich.progress import Progress, TaskID

HEARTBEAT_S = 30.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A training progress line, as rlaunch.rehearsal.train prints it: `step 120/300 reward 0.85 ...`.
STEP_LINE = re.compile(r"^step (?P<step>\d+)/(?P<total>\d+)\b\s*(?P<rest>.*)$")
# What the live line keeps of the rest, so that it fits a terminal: reward, time, rate, ETA.
LIVE_FIELDS = (("reward", re.compile(r"\breward (\S+)")), ("t", re.compile(r"\bt (\S+)")),
               ("s/step", re.compile(r"(\S+) s/step")), ("ETA", re.compile(r"\bETA (.+?)$")))


def live_info(rest: str) -> str:
    """`reward 0.85  0.071 s/step  ETA 25 s  t 37s` from a step line's rest (all of it if none match)."""
    found = {name: m.group(1) for name, rx in LIVE_FIELDS if (m := rx.search(rest))}
    if not found:
        return rest
    parts = [f"reward {found['reward']}"] if "reward" in found else []
    parts += [f"{found['s/step']} s/step"] if "s/step" in found else []
    parts += [f"ETA {found['ETA']}"] if "ETA" in found else []
    parts += [f"(t {found['t']})"] if "t" in found else []
    return "  ".join(parts)


def console(file: TextIO | None = None) -> Console:
    """A rich console on `file` (default stdout) that prints text as it is: no markup, no colours added."""
    from rich.console import Console  # rich is imported only where something waits

    return Console(file=file or sys.stdout, highlight=False, markup=False, emoji=False, soft_wrap=True)


def seconds(value: float) -> str:
    """12 s, 4m05s, 1h02m: short, and readable next to a deadline."""
    value = max(0, int(round(value)))
    if value < 60:
        return f"{value} s"
    if value < 3600:
        return f"{value // 60}m{value % 60:02d}s"
    return f"{value // 3600}h{value % 3600 // 60:02d}m"


class Wait:
    """`what: status (12 s of 600 s)`, redrawn live on a terminal; off one, a line per new status
    and a heartbeat every HEARTBEAT_S. Use as a context manager; call update() from the poll loop."""

    def __init__(self, what: str, deadline_s: float, status: str = "", out: Console | None = None,
                 heartbeat_s: float = HEARTBEAT_S, clock: Callable[[], float] = time.monotonic):
        self.what, self.deadline_s, self.status = what, float(deadline_s), status
        self.console = out if out is not None else console()
        self.heartbeat_s, self.clock = heartbeat_s, clock
        self.live: Live | None = None
        self.t0 = self.printed_at = 0.0
        self.printed_status: str | None = None

    def line(self) -> str:
        return f"{self.what}: {self.status} ({seconds(self.clock() - self.t0)} of {seconds(self.deadline_s)})"

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.line())

    def __enter__(self) -> Wait:
        self.t0 = self.clock()
        if self.console.is_terminal:
            from rich.live import Live

            # transient: the live line goes when the wait ends; __exit__ prints its final state once.
            self.live = Live(self, console=self.console, refresh_per_second=4, transient=True,
                             redirect_stdout=False, redirect_stderr=False)
            self.live.start()
        else:
            self._print()
        return self

    def update(self, status: str | None = None) -> None:
        new = self.status if status is None else status
        changed, self.status = new != self.status, new
        if self.live is None and (changed or self.clock() - self.printed_at >= self.heartbeat_s):
            self._print()

    def echo(self, text: str) -> None:
        """Print a line of someone else's output above the live line."""
        _echo(self.console, text)

    def _print(self) -> None:
        self.console.out(self.line())
        self.printed_at, self.printed_status = self.clock(), self.status

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
            self.console.out(self.line())
        elif self.printed_status != self.status:  # plain: the final state, unless already printed
            self._print()


def _echo(out: Console, text: str) -> None:
    if out.is_terminal:
        from rich.text import Text

        out.print(Text.from_ansi(text), soft_wrap=True)
    else:
        out.file.write(text + "\n")
        out.file.flush()


class LogView:
    """A job's log as it streams in. On a terminal, `step S/T ...` lines drive one live progress
    bar (step/total, reward, s/step, ETA) and every other line is printed above it; off a terminal
    every chunk passes through unchanged."""

    def __init__(self, out: Console | None = None, label: str = "training") -> None:
        self.console = out if out is not None else console()
        self.label = label
        self.partial = ""
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def feed(self, chunk: str) -> None:
        if not self.console.is_terminal:
            self.console.file.write(chunk)
            self.console.file.flush()
            return
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self._line(line.rstrip("\r"))

    def _line(self, line: str) -> None:
        match = STEP_LINE.match(ANSI.sub("", line))
        if match is None:
            _echo(self.console, line)
            return
        step, total = int(match["step"]), int(match["total"])
        if self.bar is None or self.task is None:
            self._start(step, total, live_info(match["rest"]))
        else:
            self.bar.update(self.task, completed=step, total=total, info=live_info(match["rest"]))
        if step >= total:  # done: leave the finished bar as a line, print what follows under it
            self.close()

    def _start(self, step: int, total: int, info: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        # The job's line already carries the time (t Ns), the rate and the ETA: no clock columns.
        self.bar = Progress(TextColumn(self.label), BarColumn(bar_width=24), MofNCompleteColumn(),
                            TextColumn("{task.fields[info]}"), console=self.console,
                            redirect_stdout=False, redirect_stderr=False)
        self.task = self.bar.add_task(self.label, total=total, completed=step, info=info)
        self.bar.start()

    def close(self) -> None:
        if self.partial:
            line, self.partial = self.partial, ""
            self._line(line)
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

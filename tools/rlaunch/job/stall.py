"""The stall watch: a run whose nodes all stay up but which stops making progress is named.

The node watch (rlaunch.job.nodewatch) polls this beside Ray's node table. Progress is a new step
in the framework's own outputs, where its descriptor says they show (frameworks/<name>/__init__.py
`steps`: TRL's and verl's metrics.jsonl, AReaL's main.log, RLinf's TensorBoard events), read from
the end each time they grow. Nothing is watched before this attempt's first step (loading the
model, starting the engines, a resumed checkpoint: the first step is slow on purpose, and
formation, preflight and the first-step phase have their own deadlines). After it, no new step
for the timeout is a stall:

  train.stall_timeout_s > 0    that many seconds, whatever the run does
  train.stall_timeout_s = 0    from the run itself, the largest of
      FLOOR_S                          what a step may always take (a GC pause, a busy neighbour,
                                       a slow batch): measured below
      MULTIPLE x the median of the last RECENT step times (steps seen since the first)
      a checkpoint's write time        where the next step ends with a save (train.save_freq; the
                                       last step's too): its estimated size at 100 MB/s per node
                                       (rlaunch.config.ckptsize)
      this attempt's first step        where the next step ends with a validation (train.test_freq),
                                       and after the last step (the final save, evaluation and
                                       exit): the first step loaded all of it once, verl's
                                       validation before training included
  (a run of epochs, without train.steps, may end after any step: every gap gets the last two)
  train.stall_timeout_s = -1   never

A stall is then what `Watch.look` returns: nodewatch names it (`stalled at step S: no step for N s
(median step M s, timeout T s)`), keeps the evidence (rlaunch.verify.stacks), stops the framework
and exits 75. `margin` keeps the longest gap the run had and the timeout it had then, recorded when
the watch ends: what a false alarm would have needed.
"""

from __future__ import annotations

import glob
import json
import re
import statistics
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.registry import frameworks
from rlaunch.job import layouts

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

FLOOR_S = 120.0
MULTIPLE = 5.0
RECENT = 20
REGLOB_S = 5.0  # a glob source (AReaL's main.log) is looked for again at most this often
OFF = -1


# ---------------------------------------------------------------- reading steps


class Source:
    """The steps a framework's outputs record, read incrementally: each poll returns the steps of the
    records appended since the last one (complete records only)."""

    def __init__(self, kind: str, path: str, pattern: str = ""):
        self.kind, self.path = kind, path
        self.regex = re.compile(pattern) if pattern else None
        self.offsets: dict[str, int] = {}
        self.min_step = -1  # records of steps up to this are not new (a resumed run's kept history)
        self._globbed = -REGLOB_S
        self._files: list[str] = []

    def files(self, now: float) -> list[str]:
        if self.kind == "tfevents":
            pattern = str(Path(self.path) / "**" / "events.out.tfevents.*")
        elif any(ch in self.path for ch in "*?["):
            pattern = self.path
        else:
            return [self.path]
        if now - self._globbed >= REGLOB_S:
            self._globbed = now
            self._files = sorted(glob.glob(pattern, recursive=True))
        return self._files

    def skip_existing(self, min_step: int, now: float) -> None:
        """Start after what is there now; a file rewritten later is read again from its start, its
        records up to min_step (the step this attempt resumed from) not counted as new."""
        self.min_step = min_step
        for name in self.files(now):
            try:
                self.offsets[name] = Path(name).stat().st_size
            except OSError:
                pass

    def poll(self, now: float | None = None) -> list[int]:
        now = time.monotonic() if now is None else now
        steps: list[int] = []
        for name in self.files(now):
            try:
                size = Path(name).stat().st_size
            except OSError:
                continue
            start = self.offsets.get(name, 0)
            if size < start:  # rewritten: a resumed trainer keeps its history up to the checkpoint
                start = 0
            if size == start:
                continue
            with open(name, "rb") as fh:
                fh.seek(start)
                data = fh.read(size - start)
            used, found = _tfevents(data) if self.kind == "tfevents" else _lines(data, self.kind, self.regex)
            self.offsets[name] = start + used
            steps += [s for s in found if s > self.min_step]
        return steps


def _lines(data: bytes, kind: str, regex: re.Pattern[str] | None) -> tuple[int, list[int]]:
    end = data.rfind(b"\n") + 1  # complete lines only; the rest is read when it is finished
    steps = []
    for raw in data[:end].splitlines():
        if kind == "jsonl":
            try:
                step = json.loads(raw).get("step")
            except (ValueError, AttributeError):
                continue
            if isinstance(step, int) and not isinstance(step, bool):
                steps.append(step)
        elif regex is not None:
            found = regex.search(raw.decode(errors="replace"))
            if found:
                steps.append(int(found.group(1)))
    return end, steps


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


def _event_step(record: bytes) -> int | None:
    """tensorflow.Event's step (field 2, varint) when the event carries a summary (field 5)."""
    i, step, summary = 0, None, False
    try:
        while i < len(record):
            key, i = _varint(record, i)
            field_no, wire = key >> 3, key & 7
            if wire == 0:
                value, i = _varint(record, i)
                if field_no == 2:
                    step = value
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                length, i = _varint(record, i)
                i += length
                summary = summary or field_no == 5
            else:
                return None
    except IndexError:
        return None
    return step if summary else None


def _tfevents(data: bytes) -> tuple[int, list[int]]:
    """TFRecord framing (length u64, its crc u32, the record, its crc u32): the steps of whole records."""
    i, steps = 0, []
    while i + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, i)
        if i + 12 + length + 4 > len(data):
            break
        step = _event_step(data[i + 12:i + 12 + length])
        if step is not None:
            steps.append(step)
        i += 12 + length + 4
    return i, steps


def source(spec: Spec, run_dir: Path) -> Source | None:
    """The framework's step source in this run directory (None: it declares none)."""
    declared = frameworks.descriptor(spec.framework.name).steps
    if declared is None:
        return None
    where = {k: str(v) for k, v in layouts.defaults(spec, Path(run_dir)).items()}
    return Source(declared.kind, declared.path.format(**where), declared.pattern)


# ---------------------------------------------------------------- the timeout


@dataclass
class Policy:
    """The timeout after each step (see the module's docstring)."""

    fixed_s: float = 0.0        # train.stall_timeout_s
    save_freq: int = -1
    test_freq: int = -1
    last_step: int = 0          # train.steps (0: not known)
    write_s: float = 0.0        # a checkpoint's estimated write time
    floor_s: float = FLOOR_S
    multiple: float = MULTIPLE

    @property
    def off(self) -> bool:
        return self.fixed_s < 0

    def _ends_with(self, freq: int, step: int) -> bool:
        # The gap after `step` holds the next step and, whichever order the framework writes them
        # in (verl logs a step after its save, HF Trainer before), a save at either end of it.
        return freq > 0 and (step % freq == 0 or (step + 1) % freq == 0)

    def timeout(self, step: int, recent: list[float], first_step_s: float) -> tuple[float, str]:
        """(seconds, which term decided) for the gap after `step`."""
        if self.fixed_s > 0:
            return self.fixed_s, "train.stall_timeout_s"
        median = statistics.median(recent) if recent else 0.0
        terms = [(self.floor_s, "floor"), (self.multiple * median, f"{self.multiple:g} x median step")]
        # Without train.steps (a run of epochs) any gap may hold the end: the final save and validation.
        last = step >= self.last_step if self.last_step > 0 else True
        if self.write_s and (self._ends_with(self.save_freq, step) or last or step + 1 >= self.last_step):
            terms.append((self.write_s, "checkpoint write"))
        if first_step_s and (self._ends_with(self.test_freq, step) or last):
            why = ("first step" if not last else "first step (after the last step)" if self.last_step > 0
                   else "first step (a run of epochs may end here)")
            terms.append((first_step_s, why))
        seconds, why = max(terms, key=lambda t: t[0])
        return round(seconds, 1), why


def policy(spec: Spec, write_s: float = 0.0) -> Policy:
    train = spec.train
    steps = train.smoke_steps if train.smoke else train.steps
    return Policy(fixed_s=float(train.stall_timeout_s), save_freq=train.save_freq,
                  test_freq=train.test_freq, last_step=steps, write_s=write_s)


# ---------------------------------------------------------------- the watch


@dataclass
class Watch:
    source: Source
    policy: Policy
    resume_step: int = 0             # the checkpoint this attempt resumed from (0: a fresh start)
    started: float = field(default_factory=time.monotonic)  # the framework's start (monotonic)
    first_step_s: float = 0.0
    step: int | None = None          # the last step seen, None before this attempt's first
    changed: float = 0.0             # when it was seen (monotonic)
    steps_seen: int = 0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    margin: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An earlier attempt's records are not this attempt's progress.
        self.source.skip_existing(self.resume_step, self.started)

    def look(self, now: float | None = None) -> dict[str, Any] | None:
        """Poll the outputs once; a stall record when the run has gone too long without a step."""
        now = time.monotonic() if now is None else now
        if self.policy.off:
            return None
        new = [s for s in dict.fromkeys(self.source.poll(now)) if s != self.step]
        if new:
            self._progress(new, now)
            return None
        if self.step is None:
            return None
        idle = now - self.changed
        timeout, why = self.policy.timeout(self.step, list(self.recent), self.first_step_s)
        if idle <= timeout:
            return None
        return {"step": self.step, "idle_s": round(idle, 1), "median_step_s": self.median(),
                "timeout_s": timeout, "timeout_from": why, "steps_seen": self.steps_seen}

    def _gap(self, gap: float) -> None:
        """A gap that ended (a step came, or the framework exited): the longest against its timeout."""
        if self.step is None:
            return
        timeout, _ = self.policy.timeout(self.step, list(self.recent), self.first_step_s)
        if gap / timeout > self.margin.get("worst_ratio", 0):
            self.margin.update(worst_ratio=round(gap / timeout, 3), worst_gap_s=round(gap, 2),
                               worst_at_step=self.step, worst_timeout_s=timeout)
        if gap > self.margin.get("longest_gap_s", 0):
            self.margin.update(longest_gap_s=round(gap, 2), at_step=self.step, timeout_then_s=timeout)

    def close(self, now: float | None = None) -> None:
        """The framework exited: the gap after its last step counts too."""
        if self.step is not None and not self.policy.off:
            self._gap((time.monotonic() if now is None else now) - self.changed)

    def _progress(self, new: list[int], now: float) -> None:
        if self.step is None:
            self.first_step_s = now - self.started
        else:
            gap = now - self.changed
            self._gap(gap)
            # Several steps between two looks: each took its share of the gap.
            self.recent.extend([gap / len(new)] * min(len(new), RECENT))
            self.steps_seen += len(new)
        self.step, self.changed = new[-1], now

    def median(self) -> float | None:
        return round(statistics.median(self.recent), 3) if self.recent else None

    def summary(self) -> dict[str, Any]:
        """What the watch saw, for attempts.jsonl: steps, median step, the longest gap and its timeout."""
        out: dict[str, Any] = {"steps_seen": self.steps_seen, "last_step": self.step,
                               "median_step_s": self.median(), "first_step_s": round(self.first_step_s, 1)}
        out.update(self.margin)
        if self.margin.get("worst_ratio"):
            # How many times longer than the worst gap the timeout was: what a false alarm needed.
            out["margin"] = round(1 / self.margin["worst_ratio"], 1)
        return out


def describe(stall: dict[str, Any]) -> str:
    """`stalled at step S: no step for N s (median step M s, timeout T s)`."""
    median = stall.get("median_step_s")
    return (f"stalled at step {stall['step']}: no step for {stall['idle_s']:.0f} s (median step "
            f"{'%.2f s' % median if median is not None else 'not known yet'}, timeout {stall['timeout_s']:.0f} s)")

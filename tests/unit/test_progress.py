"""Progress while a launch waits (rlaunch.progress): plain lines off a terminal, one live line on
one (a rich console forced to be a terminal), a pending job, and the rehearsal's step lines."""

from __future__ import annotations

import io
import json

import pytest

from rlaunch import progress
from rlaunch.rehearsal import layout, settings, train


def terminal(width: int = 120):
    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=width, highlight=False, markup=False,
                   emoji=False, soft_wrap=True), buf


def plain():
    buf = io.StringIO()
    return progress.console(buf), buf


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_seconds_reads_well_next_to_a_deadline():
    assert [progress.seconds(s) for s in (0, 12.4, 59.6, 65, 600, 3725)] == \
        ["0 s", "12 s", "1m00s", "1m05s", "10m00s", "1h02m"]


def test_wait_off_a_terminal_prints_each_change_a_heartbeat_and_no_repeats():
    out, buf = plain()
    clock = Clock()
    with progress.Wait("cluster rx", 600, "starting", out=out, heartbeat_s=30, clock=clock) as wait:
        clock.now += 3
        wait.update("0/2 nodes joined")
        clock.now += 1
        wait.update("0/2 nodes joined")  # unchanged, before the heartbeat: nothing
        clock.now += 31
        wait.update()  # heartbeat
        clock.now += 5
        wait.update("2/2 nodes joined")
    assert buf.getvalue().splitlines() == [
        "cluster rx: starting (0 s of 10m00s)",
        "cluster rx: 0/2 nodes joined (3 s of 10m00s)",
        "cluster rx: 0/2 nodes joined (35 s of 10m00s)",
        "cluster rx: 2/2 nodes joined (40 s of 10m00s)",
    ]


def test_wait_on_a_terminal_redraws_in_place_and_leaves_the_final_line():
    out, buf = terminal()
    clock = Clock()
    with progress.Wait("job j", 60, "PENDING", out=out, clock=clock) as wait:
        wait.echo("local-cluster: created 2 node(s)")
        clock.now += 7
        wait.update("RUNNING")
    text = buf.getvalue()
    assert "local-cluster: created 2 node(s)\n" in text
    assert text.rstrip().endswith("job j: RUNNING (7 s of 1m00s)")
    assert "\x1b[?25l" in text  # rich hid the cursor to redraw the line


STEP = "step {n}/30 reward 0.{n} loss 0.2 grad_norm 0.3 t {n}s | 0.1 s/step, ETA {eta} s"


def test_log_view_off_a_terminal_passes_every_byte_through():
    out, buf = plain()
    view = progress.LogView(out=out)
    chunks = ["a \x1b[36m(worker)\x1b[0m li", "ne\n" + STEP.format(n=10, eta=2) + "\nhalf", " line\n"]
    for chunk in chunks:
        view.feed(chunk)
    view.close()
    assert buf.getvalue() == "".join(chunks)


def test_log_view_on_a_terminal_turns_step_lines_into_one_bar():
    out, buf = terminal(width=160)
    view = progress.LogView(out=out)
    view.feed("before\n" + STEP.format(n=10, eta=2) + "\nbetween\n")
    view.feed(STEP.format(n=20, eta=1) + "\n" + STEP.format(n=30, eta=0) + "\ndone: 30/30 steps\n")
    view.close()
    text = buf.getvalue()
    finals = [part for part in text.split("\r\x1b[2K") if "30/30" in part and part.startswith("training")]
    assert finals and "reward 0.30" in finals[-1] and "ETA 0 s" in finals[-1]
    assert not any(line.startswith("step ") for line in text.splitlines())  # no plain step lines
    # What else the job said is printed whole, above the bar, in order; what follows the finished
    # bar comes below it.
    assert text.index("before") < text.index("between") < text.index("done: 30/30 steps")
    assert text.index("30/30") < text.index("done: 30/30 steps")
    assert text.endswith("done: 30/30 steps\n")


def test_step_lines_carry_rate_and_eta():
    rows = [{"step": s, "time_s": 2.0 + 0.5 * s} for s in range(1, 41)]
    assert train.step_rate(rows) == pytest.approx(0.5)
    assert train.step_rate(rows[:1]) is None
    line = train.progress_line({"step": 40, "reward": 0.625, "loss": 0.1, "grad_norm": 0.5, "time_s": 22.0},
                               300, train.step_rate(rows))
    assert line == "step 40/300 reward 0.625 loss 0.1 grad_norm 0.5 t 22s | 0.5 s/step, ETA 2m10s"
    assert progress.STEP_LINE.match(line)["rest"].endswith("ETA 2m10s")


def test_follow_progress_prints_every_n_steps_and_slow_steps_anyway(tmp_path, monkeypatch):
    cfg = settings.parse_config({"run_dir": str(tmp_path), "steps": 30, "progress_every": 10})
    clock = Clock()
    written = []
    plan = iter([[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11], [12], [30]])  # steps appended per poll

    class Stop:
        def wait(self, _timeout):
            try:
                steps = next(plan)
            except StopIteration:
                return True
            clock.now += 40 if steps == [12] else 1  # step 12 comes after a long silence
            with (tmp_path / layout.METRICS).open("a") as fh:
                for step in steps:
                    fh.write(json.dumps({"step": step, "reward": 0.5, "time_s": step}) + "\n")
            return False

    monkeypatch.setattr("builtins.print", lambda line, **_: written.append(line))
    train.follow_progress(cfg, Stop(), clock=clock)
    assert [line.split()[1] for line in written] == ["10/30", "12/30", "30/30"]
    assert written[0].endswith("| 1 s/step, ETA 20 s")


def test_a_pending_job_is_shown_until_it_runs(capsys):
    from types import SimpleNamespace

    from rlaunch.backends.local import jobs

    states = iter([("PENDING", ""), ("PENDING", "Job has not started yet"), ("RUNNING", "")])

    class Client:
        def get_job_info(self, _id):
            status, message = next(states)
            return SimpleNamespace(status=status, message=message)

    assert jobs.wait_pending(Client(), "j1", deadline_s=60, poll_s=0.01) == "RUNNING"
    assert capsys.readouterr().out.splitlines() == [
        "job j1: PENDING (0 s of 1m00s)",
        "job j1: PENDING: Job has not started yet (0 s of 1m00s)",
        "job j1: RUNNING (0 s of 1m00s)",
    ]


def test_formation_reads_the_heads_joined_lines_as_they_are_appended(tmp_path):
    from rlaunch.backends.local import backend as local

    log = tmp_path / "node-0.log"
    assert local._read_from(log, 0) == ("", 0)  # not written yet
    log.write_text("ray-up: starting the head\n"
                   "ray-up: 1/2 nodes joined, 0 GPUs, 2 CPUs registered (at 3.1 s of 600 s)\nray-up: 2/2 no")
    text, offset = local._read_from(log, 0)
    assert [(m["n"], m["of"]) for m in local.JOINED.finditer(text)] == [("1", "2")]
    with log.open("a") as fh:
        fh.write("des joined, 0 GPUs, 4 CPUs registered (at 9.8 s of 600 s)\n")
    text, offset = local._read_from(log, offset)  # the half line, now whole, and only it
    assert [(m["n"], m["of"]) for m in local.JOINED.finditer(text)] == [("2", "2")]
    assert offset == log.stat().st_size

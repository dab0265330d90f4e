"""The stall watch (rlaunch.job.stall), offline: the default timeout's formula, each framework's step
source read from fixture files as it writes them (TRL's and verl's metrics.jsonl, AReaL's main.log,
RLinf's TensorBoard events), a stall named at its timeout and never before, 0 false stalls on the
step times real rehearsals recorded (tests/fixtures/stall/), and the node watch's wiring: a
framework that stops writing steps is named, recorded and stopped, exit 75."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlaunch.config import specjson
from rlaunch.job import stall

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "fixtures" / "stall"


def spec_for(framework: str, run_dir: Path, **train):
    # A partial spec.json, read as the nodes read it (specjson.view).
    return specjson.view({"framework": {"name": framework, "overrides": []}, "run": {"id": "r1", "name": "exp"},
            "algo": {"adv_estimator": "grpo"},
            "paths": {"run_dir": str(run_dir), "log_dir": str(run_dir / "logs"), "ckpt_dir": str(run_dir / "checkpoints"),
                      "model": ""},
            "train": {"steps": 10, "save_freq": -1, "test_freq": -1, "stall_timeout_s": 0, "smoke": False,
                      "smoke_steps": 5, **train},
            "derived": {"ray_nodes": 2}, "cluster": {"nodes": 2}})


# ---------------------------------------------------------------- the timeout


def test_the_default_timeout_is_the_floor_five_medians_a_save_s_write_or_the_first_step():
    p = stall.Policy(save_freq=10, test_freq=20, last_step=100, write_s=300.0)
    assert p.timeout(3, [], 50.0) == (120.0, "floor")  # no step time yet: the floor
    assert p.timeout(3, [1.0] * 20, 50.0) == (120.0, "floor")
    assert p.timeout(3, [30.0] * 10 + [40.0] * 10, 50.0) == (175.0, "5 x median step")
    # A save ends the next step (save_freq 10: after step 9 or step 10): its write time counts.
    assert p.timeout(9, [1.0], 50.0) == (300.0, "checkpoint write")
    assert p.timeout(10, [1.0], 50.0) == (300.0, "checkpoint write")
    assert p.timeout(11, [1.0], 50.0) == (120.0, "floor")
    # A validation (test_freq 20) and the end of the run: the first step's time (it loaded everything).
    p = stall.Policy(save_freq=10, test_freq=20, last_step=100, write_s=0.0)
    assert p.timeout(19, [1.0], 400.0) == (400.0, "first step")
    assert p.timeout(100, [1.0], 400.0) == (400.0, "first step (after the last step)")
    assert stall.Policy(fixed_s=30).timeout(19, [100.0], 400.0) == (30.0, "train.stall_timeout_s")
    # A run of epochs (no train.steps) may end after any step: its final save and validation.
    assert stall.Policy(save_freq=-1, write_s=457.0).timeout(7, [60.0], 300.0) == (457.0, "checkpoint write")
    assert stall.Policy(save_freq=-1).timeout(7, [1.0], 300.0) == (300.0, "first step (a run of epochs may end here)")
    assert stall.Policy(fixed_s=-1).off


def test_the_spec_gives_the_policy(tmp_path):
    spec = spec_for("trl", tmp_path, steps=300, save_freq=50, stall_timeout_s=45)
    p = stall.policy(spec, write_s=2.0)
    assert (p.fixed_s, p.save_freq, p.last_step, p.write_s) == (45.0, 50, 300, 2.0)
    assert stall.policy(spec_for("trl", tmp_path, smoke=True)).last_step == 5


# ---------------------------------------------------------------- step sources


def test_jsonl_is_read_as_it_grows_complete_lines_only_and_a_rewrite_keeps_only_newer_steps(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 48)))
    src = stall.Source("jsonl", str(metrics))
    src.skip_existing(40, 0.0)  # attempt 2 resumed from step 40; attempt 1 had logged 47
    assert src.poll(1.0) == []
    # The resumed trainer rewrites the file with its history up to the checkpoint, then goes on.
    metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 41)))
    assert src.poll(2.0) == []
    with open(metrics, "a") as fh:
        fh.write('{"step": 41}\n{"step": 4')
    assert src.poll(3.0) == [41]
    with open(metrics, "a") as fh:
        fh.write('2}\nnot json\n{"step": 43, "data": {}}\n')
    assert src.poll(4.0) == [42, 43]


def test_areal_main_log_is_found_by_its_glob_and_read_by_its_pattern(tmp_path):
    spec = spec_for("areal", tmp_path)
    src = stall.source(spec, tmp_path)
    assert src is not None and src.kind == "log"
    assert src.poll(0.0) == []  # not there yet
    log = tmp_path / "logs" / "someone" / "exp" / "r1" / "main.log"
    log.parent.mkdir(parents=True)
    log.write_text("(AReaL) 20260101-10:00:00.000 GRPOTrainer INFO: Train step 1/100 done.\n"
                   "(AReaL) 20260101-10:00:09.000 StatsLogger INFO: Epoch 1/1 Step 2/100 Train step 2/100 done.\n")
    assert src.poll(10.0) == [1, 2]  # a new glob after REGLOB_S


def test_rlinf_tensorboard_events_are_read_by_their_step(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    spec = spec_for("rlinf", tmp_path)
    src = stall.source(spec, tmp_path)
    writer = EventFileWriter(str(tmp_path / "tensorboard"))

    def scalar(step: int, tag: str) -> None:
        value = summary_pb2.Summary.Value(tag=tag, simple_value=0.5)
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
        writer.flush()

    scalar(1, "rollout/reward_scores")
    scalar(1, "actor/training/actor/lr")
    assert src.poll(0.0) == [1, 1]  # the file-version event (no summary) is not a step
    scalar(2, "rollout/reward_scores")
    assert src.poll(1.0) == [2]
    writer.close()


# ---------------------------------------------------------------- the watch


class Steps:
    """A framework writing metrics.jsonl on a fake clock."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def write(self, step: int) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"step": step}) + "\n")


def test_a_stall_is_named_at_its_timeout_not_before_and_not_before_the_first_step(tmp_path):
    steps = Steps(tmp_path / "metrics.jsonl")
    watch = stall.Watch(stall.Source("jsonl", str(steps.path)), stall.Policy(save_freq=-1, last_step=100), started=0.0)
    assert watch.look(500.0) is None  # no first step yet: the start is slow on purpose
    for i, t in enumerate(range(600, 700, 2), start=1):  # 50 steps, 2 s each
        steps.write(i)
        assert watch.look(float(t)) is None
    assert watch.first_step_s == 600.0 and watch.median() == 2.0
    assert watch.look(698.0 + 120.0) is None  # the floor (120 s > 5 x 2 s), not yet over
    found = watch.look(698.0 + 120.5)
    assert found == {"step": 50, "idle_s": 120.5, "median_step_s": 2.0, "timeout_s": 120.0, "timeout_from": "floor",
                     "steps_seen": 49}
    assert stall.describe(found) == "stalled at step 50: no step for 120 s (median step 2.00 s, timeout 120 s)"


def test_a_slow_run_gets_five_medians_and_the_summary_keeps_the_gap_nearest_its_timeout(tmp_path):
    steps = Steps(tmp_path / "metrics.jsonl")
    watch = stall.Watch(stall.Source("jsonl", str(steps.path)), stall.Policy(last_step=100), started=0.0)
    t = 100.0
    for i in range(1, 12):
        steps.write(i)
        watch.look(t)
        t += 60.0 if i != 6 else 200.0  # one slow step
    assert watch.look(t - 60.0 + 299.0) is None  # 5 x 60 s
    assert watch.look(t - 60.0 + 301.0)["timeout_s"] == 300.0
    summary = watch.summary()
    assert summary["worst_gap_s"] == 200.0 and summary["worst_timeout_s"] == 300.0 and summary["margin"] == 1.5


def replay(trace: list[tuple[int, float]], policy: stall.Policy, poll_s: float = 0.5,
           exit_s: float | None = None) -> tuple[list[dict], dict]:
    """A recorded run's (step, seconds since the framework started) through the watch, polled every
    poll_s as the node watch does: the stalls it would have named, and its summary."""
    class Recorded(stall.Source):
        def __init__(self):
            super().__init__("jsonl", "")
            self.i = 0
            self.now = 0.0

        def skip_existing(self, min_step, now):
            self.min_step = min_step

        def poll(self, now=None):
            out = []
            while self.i < len(trace) and trace[self.i][1] <= now:
                out.append(trace[self.i][0])
                self.i += 1
            return out

    watch = stall.Watch(Recorded(), policy, started=0.0)
    stalls, t, end = [], 0.0, exit_s or trace[-1][1] + poll_s
    while t <= end:
        found = watch.look(t)
        if found:
            stalls.append(found)
            break
        t += poll_s
    watch.close(end)
    return stalls, watch.summary()


def load_traces() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(TRACES.glob("*.json"))}


@pytest.mark.parametrize("name", sorted(load_traces()))
def test_no_false_stall_on_the_step_times_real_runs_recorded(name):
    trace = load_traces()[name]
    policy = stall.Policy(**trace["policy"])
    steps = [(s, t) for s, t in trace["steps"]]
    stalls, summary = replay(steps, policy, exit_s=trace.get("exit_s"))
    assert stalls == [], f"{name}: a false stall: {stalls}"
    # Not only none: the gap nearest its timeout was well within it.
    assert summary["margin"] >= 2, summary
    # What the floor is for: against the median step alone, the longest gap (a save) is many medians.
    times = [t for _, t in steps] + ([trace["exit_s"]] if trace.get("exit_s") else [])
    gaps = [b - a for a, b in zip(times, times[1:])]
    print(f"{name}: {len(steps)} steps, median {summary['median_step_s']} s, the longest gap {max(gaps):.2f} s "
          f"= {max(gaps) / sorted(gaps)[len(gaps) // 2]:.1f} medians; nearest its timeout: "
          f"{summary['worst_gap_s']} s of {summary['worst_timeout_s']} s ({summary['margin']}x)")


# ---------------------------------------------------------------- the node watch's wiring


FRAMEWORK = """
import json, sys, time
metrics = sys.argv[1]
for step in range(1, 4):
    with open(metrics, "a") as fh:
        fh.write(json.dumps({"step": step}) + "\\n")
    time.sleep(0.2)
time.sleep(600)  # stuck: no step ever again
"""


def test_the_node_watch_names_a_stall_keeps_what_it_could_stops_the_framework_and_exits_75(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    spec = spec_for("trl", run, stall_timeout_s=2)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    (run / "attempts.jsonl").write_text(json.dumps({"event": "start", "attempt": 1, "resume_step": 0}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(ROOT / "tools"), RLAUNCH_STACKS_TIMEOUT_S="30")  # no Ray: no node watch
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rlaunch.job.nodewatch", "--run-dir", str(run), "--spec",
                           str(spec_path), "--", sys.executable, "-c", FRAMEWORK, str(run / "metrics.jsonl")],
                          env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 75, proc.stderr
    assert "rlaunch-nodewatch: stalled at step 3: no step for 2 s (median step " in proc.stderr, proc.stderr
    assert "stopping the framework" in proc.stderr and took < 60, (took, proc.stderr)
    record = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()][-1]
    assert record["event"] == "stalled" and record["step"] == 3 and record["timeout_s"] == 2.0, record
    # Without Ray, this machine's evidence: the framework's own stack, stuck in its sleep.
    assert record["stacks"] == str(run / "stacks" / "attempt-1") and record["processes"] == 1, record
    index = json.loads((run / "stacks" / "attempt-1" / "index.json").read_text())
    dumped = (run / "stacks" / "attempt-1" / index["nodes"][0]["processes"][0]["file"]).read_text()
    assert "<module> (<string>:8)" in dumped, dumped

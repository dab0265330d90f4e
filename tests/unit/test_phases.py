"""rlaunch.job.phases: where a launch's seconds go, from the marks job.sh, the trainer and the
launcher write, and job.sh's own marks (rendered and run by bash)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from rlaunch.job import phases  # noqa: E402


def attempt(t0: float, *, evaluation: bool = True, first: bool = True) -> list[dict]:
    marks = [("job", "start", 0), ("preflight", "start", 1), ("preflight", "end", 6), ("framework", "start", 6)]
    if first:
        marks.append(("first_step", "end", 26))
    if evaluation:
        marks += [("evaluation", "start", 40), ("evaluation", "end", 43)]
    marks += [("framework", "end", 50), ("postflight", "start", 50), ("postflight", "end", 52)]
    return [{"phase": p, "event": e, "t": t0 + dt} for p, e, dt in marks]


def launch(t0: float) -> dict:
    return json.loads('{"event": "launch", "t": %s, %s' % (t0, phases.launch_env(
        t0 - 30, t0 - 28, (t0 - 28, t0 - 10), t0 - 9).lstrip("{")))


def test_every_phase_of_a_launch_in_order_with_the_time_to_the_first_step():
    t0 = 1000.0
    got = phases.durations([launch(t0), *attempt(t0)])
    assert list(got["phases"]) == ["plan", "formation", "job_start", "preflight", "first_step", "training",
                                   "evaluation", "framework_exit", "postflight"]
    assert got["phases"] == {"plan": 2.0, "formation": 18.0, "job_start": 9.0, "preflight": 5.0,
                             "first_step": 20.0, "training": 14.0, "evaluation": 3.0, "framework_exit": 7.0,
                             "postflight": 2.0}
    assert got["to_first_step_s"] == 56.0 and got["total_s"] == 82.0 and got["from"] == "the launch's start"
    # The phases from the first step back account for the whole time to it.
    assert sum(got["phases"][k] for k in ("plan", "formation", "job_start", "preflight", "first_step")) == 54.0
    assert phases.line(got).startswith("first step 56.0 s after the launch's start; plan 2.0 s, formation 18.0 s")


def test_without_an_evaluation_training_runs_to_the_framework_exit():
    got = phases.durations(attempt(0.0, evaluation=False))
    assert got["phases"]["training"] == 24.0 and "evaluation" not in got["phases"]
    assert "framework_exit" not in got["phases"] and got["from"] == "the job's start"


def test_a_run_that_never_stepped_says_so():
    got = phases.durations(attempt(0.0, evaluation=False, first=False))
    assert got["to_first_step_s"] is None and "training" not in got["phases"]
    assert phases.line(got).startswith("no first step recorded; preflight 5.0 s")
    assert phases.line({}) == "no phases recorded"


def test_only_the_last_attempt_counts_and_a_repeated_launch_record_is_not_its():
    # A RayJob retry runs job.sh again with the same env: the same launch record, older than the
    # first attempt's marks, must not be charged to the second attempt.
    first = [launch(1000.0), *attempt(1000.0)]
    retry = [{**launch(1000.0), "t": 2000.0}, *attempt(2000.0)]
    got = phases.durations(first + retry)
    assert "plan" not in got["phases"] and got["from"] == "the job's start" and got["to_first_step_s"] == 26.0
    # RESUME=1 launches again: a new launch record, newer than everything before it, counts.
    resumed = [launch(3000.0), *attempt(3000.0)]
    assert phases.durations(first + resumed)["phases"]["plan"] == 2.0


def test_the_gpu_nodes_input_checks_before_the_last_attempt_are_counted():
    def check(t: float, s: float, nbytes: int) -> dict:
        return {"phase": "inputs_gpu", "event": "check", "t": t, "s": s, "bytes": nbytes, "what": "model"}

    # The first attempt's setup hashed the model; its recovery's setup found the stamp (two inputs).
    records = [check(990, 40.0, 15 * 10**9), *attempt(1000), check(1090, 0.2, 0), check(1091, 0.3, 0),
               *attempt(1100)]
    got = phases.durations(records)
    assert (got["inputs_gpu_s"], got["inputs_gpu_bytes"]) == (0.5, 0)
    assert phases.line(got).endswith("; inputs on the GPU nodes 0.5 s, 0 bytes read")
    first = phases.durations(records[:1 + len(attempt(1000))])
    assert (first["inputs_gpu_s"], first["inputs_gpu_bytes"]) == (40.0, 15 * 10**9)
    assert "inputs_gpu_s" not in phases.durations(attempt(1000))  # no such check (not SkyPilot)


def test_report_adds_the_phases_to_verification_json_and_prints_them(tmp_path, capsys):
    (tmp_path / phases.FILE).write_text("".join(json.dumps(r) + "\n" for r in attempt(0.0)) + '{"phase": "x"')
    (tmp_path / "verification.json").write_text(json.dumps({"passed": True, "checks": []}))
    assert phases.main(["report", "--run-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "verification.json").read_text())
    assert report["passed"] is True and report["phases"]["phases"]["first_step"] == 20.0
    assert "rlaunch-job: phases: first step 26.0 s after the job's start" in capsys.readouterr().out


def test_first_step_marks_this_attempts_first_row_not_an_earlier_one(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n')  # an earlier attempt's
    watcher = subprocess.Popen([sys.executable, "-m", "rlaunch.job.phases", "first-step", "--run-dir",
                                str(tmp_path), "--metrics", str(metrics), "--deadline-s", "60"],
                               env={"PYTHONPATH": str(ROOT / "tools")})
    time.sleep(1.0)
    assert not (tmp_path / phases.FILE).exists()
    with metrics.open("a") as fh:
        fh.write('{"step": 2')  # half a line is not a step yet
        fh.flush()
        time.sleep(0.6)
        assert not (tmp_path / phases.FILE).exists()
        fh.write("}\n")
    written = time.time()
    assert watcher.wait(timeout=30) == 0
    mark = json.loads((tmp_path / phases.FILE).read_text())
    assert mark["phase"] == "first_step" and abs(mark["t"] - written) < 2


def test_process_start_is_the_interpreters_start_not_the_call():
    # A fresh python that waits 2 s before asking: the answer is its start, 2 s and more before.
    code = "import time; time.sleep(2); from rlaunch.job import phases; print(time.time() - phases.process_start())"
    age = float(subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(ROOT / "tools")},
                               capture_output=True, text=True, check=True, timeout=120).stdout)
    assert 2.0 <= age < 60


@pytest.fixture
def job_sh(tmp_path):
    """A local rehearsal's job.sh, with the framework swapped for a stand-in that writes two rows."""
    from rlaunch.config import load
    from rlaunch.plan import artifacts

    spec = load.load("rehearsal", {"RUN_ID": "ph"}, f"storage.mount={tmp_path / 'storage'}")
    text = artifacts.common(spec)["job.sh"]
    return spec, text


def test_job_sh_marks_each_phase_and_watches_the_frameworks_metrics(job_sh):
    spec, text = job_sh
    metrics = str(Path(spec.paths.run_dir) / "metrics.jsonl")
    for mark in ("phase job start", "phase preflight start", "phase preflight end", "phase framework start",
                 "phase framework end", "phase postflight start", "phase postflight end"):
        assert mark in text
    assert f"rlaunch.job.phases first-step --run-dir \"$RUN_DIR\" --metrics {metrics}" in text
    assert text.index("phase framework start") < text.index("-m rlaunch.job.nodewatch") < text.index("phase framework end")
    assert text.index("phase postflight end") < text.index("rlaunch.job.phases report")


def test_job_sh_phase_lines_are_json_from_bash(tmp_path):
    # The bash function and the launch record, exactly as job.sh.j2 writes them, parsed back.
    template = (ROOT / "templates" / "common" / "job.sh.j2").read_text()
    phase_fn = next(line for line in template.splitlines() if line.startswith("phase() {"))
    launch_line = next(line.strip() for line in template.splitlines() if '"event": "launch"' in line)
    script = f"RUN_DIR={tmp_path}\n{phase_fn}\nphase job start\n{launch_line}\n"
    env = {"RLAUNCH_LAUNCH_PHASES": phases.launch_env(1.0, 2.0, (2.0, 3.0), 4.0), "PATH": "/usr/bin:/bin",
           "LC_ALL": "C"}
    subprocess.run(["bash", "-c", script], env=env, check=True)
    rows = [json.loads(line) for line in (tmp_path / phases.FILE).read_text().splitlines()]
    assert rows[0]["phase"] == "job" and abs(rows[0]["t"] - time.time()) < 30
    assert rows[1]["event"] == "launch" and rows[1]["plan"] == [1.0, 2.0] and rows[1]["submitted"] == 4.0


def test_make_down_adds_the_last_phase_to_verification_json(tmp_path):
    (tmp_path / phases.FILE).write_text("".join(json.dumps(r) + "\n" for r in attempt(0.0)))
    (tmp_path / "verification.json").write_text(json.dumps({"passed": True}))
    phases.mark(tmp_path, "down", "start", 60.0)
    phases.mark(tmp_path, "down", "end", 63.5)
    phases.report(tmp_path, quiet=True)
    got = json.loads((tmp_path / "verification.json").read_text())["phases"]
    assert list(got["phases"])[-2:] == ["postflight", "down"] and got["phases"]["down"] == 3.5

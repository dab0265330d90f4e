"""The closing summary from a run directory: the text `make launch` ends with, and the Markdown
`make summary` appends to a GitHub job's summary ($GITHUB_STEP_SUMMARY) with the verification table."""

from __future__ import annotations

import json

import pytest

from rlaunch.cli import commands as cli
from rlaunch.config import load as config
from rlaunch.backends.base import LaunchPlan
from rlaunch.backends.local import backend as local
from rlaunch.verify.summary import closing_summary, markdown_summary

CHECKS = [{"name": "steps", "passed": True, "detail": "300/300 steps"},
          {"name": "learning", "passed": False, "detail": "reward 0.10 -> 0.20 | below 0.9", "node": "10.0.0.2"}]


@pytest.fixture
def run(tmp_path):
    spec = config.load("rehearsal", {"RUN_ID": "t-sum", "OUT": str(tmp_path / "out"),
                                     "WORK_ROOT": str(tmp_path / "storage")})
    run_dir = tmp_path / "storage" / "runs" / "rehearsal" / "t-sum"
    run_dir.mkdir(parents=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "spec.json").write_text(json.dumps(spec.dump()))
    local.BACKEND.handle(LaunchPlan(spec, tmp_path / "out", {})).write(tmp_path / "out")  # as make launch leaves it
    (run_dir / "preflight.json").write_text(json.dumps({"passed": True, "nodes": ["a", "b"]}))
    (run_dir / "train_summary.json").write_text(json.dumps({
        "num_workers": 2, "worker_nodes": ["10.0.0.1", "10.0.0.2"], "steps": 300, "target_steps": 300,
        "reward_first": 0.0712, "reward_last": 0.998}))
    (run_dir / "eval.json").write_text(json.dumps({"greedy_correct": 10, "greedy_total": 10}))
    (run_dir / "verification.json").write_text(json.dumps({"passed": False, "checks": CHECKS}))
    return spec, run_dir, tmp_path / "out"


def test_the_text_is_what_make_launch_prints(run):
    spec, run_dir, out = run
    assert closing_summary("t-sum", "trl", "local", run_dir, out).splitlines() == [
        "run t-sum (trl on local)",
        "  preflight     passed on 2 nodes",
        "  nodes used    2 (10.0.0.1, 10.0.0.2)",
        "  steps         300/300",
        "  reward        0.07 -> 1.00",
        "  greedy score  10/10",
        "  verification  FAILED: learning",
        f"  run dir       {run_dir}",
        f"  artifacts     {out}",
    ]


def test_the_markdown_has_the_same_numbers_and_one_row_per_check(run):
    spec, run_dir, out = run
    md = markdown_summary("t-sum", "trl", "local", run_dir, out)
    lines = md.splitlines()
    assert lines[0] == "### rlaunch: run t-sum (trl on local)"
    assert "| steps | 300/300 |" in lines and "| reward | 0.07 -> 1.00 |" in lines
    assert "| verification | FAILED: learning |" in lines and f"| run dir | {run_dir} |" in lines
    table = lines[lines.index("#### Verification") + 2:]
    assert table == ["| | check | node | detail |", "|---|---|---|---|",
                     "| ok | steps |  | 300/300 steps |",
                     "| **FAIL** | learning | 10.0.0.2 | reward 0.10 -> 0.20 \\| below 0.9 |"]


def test_without_the_run_directory_here_it_says_where_the_reports_are(run, tmp_path):
    spec, _, out = run
    elsewhere = tmp_path / "bucket" / "runs" / "x"
    md = markdown_summary("t-sum", "trl", "local", elsewhere, out)
    assert "| verification | not on this machine: the reports are in the run directory on the run's shared " \
           "storage (`make verify RUN_DIR=...` where it is mounted) |" in md
    assert "#### Verification" not in md


def test_make_summary_prints_and_appends_to_the_github_job_summary(run, tmp_path, monkeypatch, capsys):
    spec, run_dir, out = run
    step_summary = tmp_path / "SUMMARY.md"
    step_summary.write_text("before\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    assert cli.main(["summary", f"--OUT={out}"]) == 0
    assert capsys.readouterr().out == closing_summary("t-sum", "trl", "local", run_dir, out) + "\n"
    assert step_summary.read_text() == "before\n" + markdown_summary("t-sum", "trl", "local", run_dir, out)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert cli.main(["summary", f"--OUT={out}"]) == 0
    assert step_summary.read_text() == "before\n" + markdown_summary("t-sum", "trl", "local", run_dir, out)


def test_make_summary_of_a_run_never_planned_here_is_exit_2(tmp_path, capsys):
    assert cli.main(["summary", f"--OUT={tmp_path / 'none'}"]) == 2
    assert "RUN_ID" in capsys.readouterr().err

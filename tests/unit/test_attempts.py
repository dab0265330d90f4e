"""A run's attempts and checkpoints without a cluster: what a restart resumes from for each
framework, what it records (attempts.jsonl), how postflight reads a resumed run, and how the node
watch names a lost node. The same on a real cluster: tests/e2e/test_faults.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from rlaunch.job import attempts
from rlaunch.job import checkpoints
from rlaunch.job import nodewatch
from rlaunch.verify import postflight

_spec = importlib.util.spec_from_file_location(
    "runtrees", Path(__file__).resolve().parents[1] / "fixtures" / "runtrees.py")
runtrees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runtrees)


def trl_checkpoint(run_dir: Path, step: int, world: int = 2, whole: bool = True) -> Path:
    path = run_dir / "checkpoint" / f"checkpoint-{step}"
    runtrees.write_hf_checkpoint(path, tokenizer=False)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    for name in ("optimizer.pt", "scheduler.pt", *(f"rng_state_{r}.pth" for r in range(world))):
        (path / name).write_bytes(b"x")
    if not whole:  # cut short by a lost node: the weights half written
        weights = path / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-8])
    return path


# ---------------------------------------------------------------- what a restart resumes from


def test_trl_resumes_from_the_newest_whole_checkpoint_and_says_why_it_skipped_one(tmp_path):
    spec = runtrees.make_spec("trl", tmp_path, cluster__nodes=2)
    assert checkpoints.latest(spec, tmp_path) == (None, [])
    trl_checkpoint(tmp_path, 20)
    trl_checkpoint(tmp_path, 40, whole=False)
    found, skipped = checkpoints.latest(spec, tmp_path)
    assert found.step == 20 and found.path.endswith("checkpoint-20")
    assert len(skipped) == 1 and "checkpoint-40" in skipped[0] and "model.safetensors" in skipped[0]
    (tmp_path / "checkpoint" / "checkpoint-20" / "rng_state_1.pth").unlink()  # rank 1's RNG missing
    assert checkpoints.latest(spec, tmp_path)[0] is None


def test_verl_resumes_from_its_tracker_file(tmp_path):
    spec = runtrees.make_spec("verl", tmp_path)
    runtrees.verl_run(tmp_path, steps=4)
    found, _ = checkpoints.latest(spec, tmp_path)
    assert (found.step, Path(found.path).name) == (4, "global_step_4")


def test_areal_recover_info_counts_from_zero(tmp_path):
    spec = runtrees.make_spec("areal", tmp_path)
    info = tmp_path / "checkpoints" / "root" / "test" / "test-run" / "recover_info" / "step_info.json"
    info.parent.mkdir(parents=True)
    info.write_text(json.dumps({"epoch": 0, "epoch_step": 4, "global_step": 4, "steps_per_epoch": 10}))
    assert checkpoints.latest(spec, tmp_path)[0].step == 5  # step_info's 4 is the 5th step done


def test_rlinf_sets_an_incomplete_newer_checkpoint_aside_before_a_restart(tmp_path):
    spec = runtrees.make_spec("rlinf", tmp_path)
    runtrees.rlinf_run(tmp_path, steps=2)
    (tmp_path / "checkpoints" / "global_step_4" / "actor" / "dcp_checkpoint").mkdir(parents=True)
    found, skipped = checkpoints.latest(spec, tmp_path)
    assert found.step == 2 and "global_step_4" in skipped[0]
    moved = checkpoints.quarantine(spec, tmp_path)
    # RLinf's resume_dir=auto takes the highest global_step_N: the broken one must not be seen.
    assert moved and (tmp_path / "checkpoints" / "incomplete.global_step_4").is_dir()
    assert not (tmp_path / "checkpoints" / "global_step_4").exists()


# ---------------------------------------------------------------- attempts.jsonl


def test_a_second_attempt_records_where_it_resumes_and_the_steps_it_redoes(tmp_path, capsys):
    spec = runtrees.make_spec("trl", tmp_path, cluster__nodes=2, train__save_freq=20)
    first = attempts.start(spec, tmp_path)
    assert (first["attempt"], first["resume_step"], first["steps_lost"]) == (1, 0, None)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 28)))
    trl_checkpoint(tmp_path, 20)
    attempts.append(tmp_path, {"event": "node_lost", "attempt": 1, "ip": "10.9.0.3", "rank": 1,
                               "declared_dead_at": "2026-12-01T10:00:03.000Z",
                               "reason": "UNEXPECTED_TERMINATION: health check failed"})
    attempts.end(tmp_path, 75)
    second = attempts.start(spec, tmp_path)
    assert (second["attempt"], second["resume_step"], second["last_step_before"], second["steps_lost"]) == \
        (2, 20, 27, 7)
    out = capsys.readouterr().out
    assert f"{attempts.MARK}2 of run test-run: resuming from step 20" in out
    assert "7 step(s) after it are done again" in out
    history = attempts.summary(attempts.read(tmp_path))["attempts"]
    assert [h["attempt"] for h in history] == [1, 2] and history[0]["exit_code"] == 75
    assert attempts.describe_loss(history[0]["nodes_lost"][0]) == (
        "10.9.0.3 (rank 1), declared dead at 2026-12-01T10:00:03.000Z: UNEXPECTED_TERMINATION: health check failed")
    # The marks in train.log let postflight read the last attempt only.
    assert (tmp_path / "logs" / "train.log").read_text().count(attempts.MARK) == 2


def test_a_half_written_last_line_is_skipped(tmp_path):
    (tmp_path / attempts.FILE).write_text('{"event": "start", "attempt": 1}\n{"event": "end", "att')
    assert attempts.current(tmp_path) == 1 and len(attempts.read(tmp_path)) == 1


# ---------------------------------------------------------------- postflight of a resumed run


@pytest.fixture
def resumed(tmp_path):
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec("trl", run_dir, train__steps=40, cluster__nodes=2)
    runtrees.trl_run(run_dir)
    log = run_dir / "logs" / "job.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # Attempt 1 ended with a traceback (its node was lost); attempt 2 is clean.
    log.write_text(f"{attempts.MARK}1 of run test-run: no checkpoint\nTraceback (most recent call last):\n"
                   f"{attempts.MARK}2 of run test-run: resuming from step 20\nstep 40/40\n")
    for record in ({"event": "start", "attempt": 1, "resume_step": 0},
                   {"event": "node_lost", "attempt": 1, "ip": "10.9.0.3", "rank": 1, "reason": "gone"},
                   {"event": "end", "attempt": 1, "exit_code": 75},
                   {"event": "start", "attempt": 2, "resume_step": 20, "steps_lost": 7}):
        attempts.append(run_dir, record)
    return run_dir, spec


def verify(spec, run_dir, exit_code=0):
    return postflight.run(spec, run_dir, run_dir / "verification.json", exit_code=exit_code)


def test_postflight_passes_a_resumed_run_and_keeps_its_history(resumed):
    run_dir, spec = resumed
    report = verify(spec, run_dir)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    nodes = next(c for c in report["checks"] if c["name"] == "nodes stayed up")
    assert "resumed from step 20" in nodes["detail"] and "10.9.0.3 (rank 1)" in nodes["detail"]
    logs = next(c for c in report["checks"] if c["name"] == "fatal log markers")
    assert "1 earlier attempt(s)" in logs["detail"]
    assert [a["attempt"] for a in report["facts"]["attempts"]] == [1, 2]


def test_postflight_fails_a_step_logged_twice(resumed):
    run_dir, spec = resumed
    with open(run_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 40, "reward": 1.0, "loss": 0.1, "grad_norm": 0.1, "lr": 1e-4}) + "\n")
    bad = {c["name"]: c["detail"] for c in verify(spec, run_dir)["checks"] if not c["passed"]}
    assert "step 40 logged 2 times: one history is expected" in bad["metrics"]


def test_postflight_names_the_node_lost_in_the_last_attempt_first(resumed):
    run_dir, spec = resumed
    attempts.append(run_dir, {"event": "node_lost", "attempt": 2, "ip": "10.9.0.4", "rank": 0, "reason": "gone"})
    report = verify(spec, run_dir, exit_code=75)
    first = next(c for c in report["checks"] if not c["passed"])
    assert first["name"] == "nodes stayed up" and first["node"] == "10.9.0.4"
    assert "node lost: 10.9.0.4 (rank 0)" in first["detail"]


# ---------------------------------------------------------------- the node watch


def node(nid, ip, head=False, start=1.0, alive=True):
    return {"node_id": nid, "ip": ip, "port": 1, "alive": alive, "head": head, "start": start, "end": 0,
            "reason": ""}


def test_ranks_follow_the_launch_order_else_the_head_then_join_order():
    known = {"b": node("b", "10.0.0.3", start=3), "a": node("a", "10.0.0.2", head=True), "c": node("c", "10.0.0.4", start=2)}
    assert nodewatch.ranks(known, ["10.0.0.2", "10.0.0.3", "10.0.0.4"])["b"] == (1, "launch order")
    assert nodewatch.ranks(known, [])["c"] == (1, "head first, then join order")


def test_without_a_ray_address_the_command_runs_unwatched_with_its_exit_code(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert nodewatch.main(["--run-dir", str(tmp_path), "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert "running without the node watch" in capsys.readouterr().err
    assert nodewatch.main(["--run-dir", str(tmp_path)]) == 2

"""Runs on disk (rlaunch.runs.lookup) and `make compare` (rlaunch.runs.compare) on run directories written here,
and the CLI's input errors for compare and tensorboard. tests/e2e/test_observe.py compares real runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlaunch.config import specjson
from rlaunch.cli import commands as cli
from rlaunch.runs import compare
from rlaunch.runs import lookup as runref
from rlaunch.errors import ConfigError, MissingPrerequisite

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_run(root: Path, run_id: str, rewards: list[float], *, lr=0.003, passed=True,
             framework="trl", storage_source="") -> Path:
    """A finished rehearsal's run directory under root's local storage, and its artifacts dir."""
    run_dir = root / "build" / "storage" / "runs" / "rehearsal" / run_id
    run_dir.mkdir(parents=True)
    spec = {"_generated_by": f"rlaunch (run {run_id})", "preset": "rehearsal",
            "run": {"id": run_id, "name": "rehearsal", "out": f"build/{run_id}"},
            "infra": {"name": "local"}, "framework": {"name": framework},
            "algo": {"lr": lr, "group_size": 8}, "train": {"steps": len(rewards)},
            "storage": {"mount": str(root / "build" / "storage"), "source": storage_source},
            "paths": {"run_dir": str(run_dir), "log_dir": str(run_dir / "logs"),
                      "ckpt_dir": str(run_dir / "checkpoints")}}
    (run_dir / "spec.json").write_text(json.dumps(spec))
    with (run_dir / "metrics.jsonl").open("w") as fh:
        for step, reward in enumerate(rewards, 1):
            fh.write(json.dumps({"step": step, "reward": reward, "time_s": step * 0.1}) + "\n")
        fh.write('{"step": 9')  # a half-written line, as a running job leaves it
    checks = [{"name": "learned", "passed": passed, "detail": ""}]
    (run_dir / "verification.json").write_text(json.dumps({"passed": passed, "checks": checks}))
    os.utime(run_dir / "spec.json", (1000, 1000))
    os.utime(run_dir / "verification.json", (1075, 1075))
    return run_dir


def test_find_by_id_by_run_dir_and_by_artifacts_dir(tmp_path):
    run_dir = fake_run(tmp_path, "r-one", [0.1, 0.2])
    assert runref.find("r-one", root=tmp_path).run_dir == run_dir
    assert runref.find(str(run_dir)).id == "r-one"
    artifacts = tmp_path / "build" / "r-one"
    artifacts.mkdir()
    (artifacts / "job.sh").write_text("#!/bin/bash\n")
    (artifacts / "spec.json").write_text((run_dir / "spec.json").read_text())
    assert runref.find(str(artifacts)).run_dir == run_dir
    assert runref.find("r-one", root=tmp_path).run_dir == run_dir  # through build/<id>/spec.json


def test_unknown_run_is_bad_input_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="RUNS='nope'"):
        runref.find("nope", "RUNS", root=tmp_path)
    with pytest.raises(ConfigError, match="holding spec.json"):
        runref.find(str(tmp_path))
    fake_run(tmp_path, "twice", [0.1])
    with pytest.raises(ConfigError, match="named twice"):
        runref.find_all(f"{tmp_path}/build/storage/runs/rehearsal/twice {tmp_path}/build/storage/runs/rehearsal/twice")


def test_a_run_dir_on_a_bucket_says_where_it_is_and_how_to_get_it(tmp_path):
    run_dir = fake_run(tmp_path, "r-cloud", [0.1], storage_source="gs://bucket/rl")
    run = runref.find(str(run_dir))
    remote = runref.RunDir(run.id, {**run.data, "paths": {**run.data["paths"],
                                                     "run_dir": run.data["storage"]["mount"] + "/runs/x/r-cloud"}},
                      Path("/nonexistent/r-cloud"))
    with pytest.raises(MissingPrerequisite, match=r"it is at gs://bucket/rl/runs/x/r-cloud\).*sync"):
        runref.require_local(remote)


def test_compare_labels_by_differing_config_and_tables_each_run(tmp_path):
    first = fake_run(tmp_path, "r-fast", [i / 40 for i in range(40)])
    second = fake_run(tmp_path, "r-slow", [i / 120 for i in range(40)], lr=0.001, passed=False)
    found = runref.find_all(f"{first} {second}")
    png, table = compare.compare(found, tmp_path / "out" / "c.png")
    assert png.read_bytes()[:8] == PNG_MAGIC
    lines = table.splitlines()
    assert lines[0].split() == ["run", "steps", "reward", "first", "->", "last", "verification", "wall"]
    assert lines[2].split() == ["r-fast", "40/40", "0.04", "->", "0.94", "passed", "1m15s"]
    assert lines[3].split() == ["r-slow", "40/40", "0.01", "->", "0.31", "FAILED:", "learned", "1m15s"]
    assert lines[-1].split() == ["algo.lr", "0.003", "0.001"]  # and not _generated_by, run.id, paths
    rows = [compare.read(run) for run in found]
    assert compare.label(rows[1], ["algo.lr"]) == "r-slow: algo.lr=0.001   [FAILED: learned]"


def test_compare_of_a_run_without_rewards_still_draws_and_says_so(tmp_path):
    run_dir = fake_run(tmp_path, "r-empty", [])
    found = runref.find_all(str(run_dir))
    png, table = compare.compare(found, tmp_path / "c.png")
    assert png.is_file() and "0/?" in table
    assert compare.label(compare.read(found[0]), []).endswith("(no reward logged)")


def test_compare_reads_verl_metrics(tmp_path):
    run_dir = fake_run(tmp_path, "r-verl", [], framework="verl")
    (run_dir / "logs").mkdir()
    with (run_dir / "logs" / "metrics.jsonl").open("w") as fh:
        for step in (1, 2, 3):
            fh.write(json.dumps({"step": step, "data": {"critic/score/mean": step / 10}}) + "\n")
    spec = specjson.read(run_dir / "spec.json")
    assert compare.reward_series(spec, run_dir) == [(1, 0.1), (2, 0.2), (3, 0.3)]


@pytest.mark.parametrize("argv, message", [
    (["compare", "--RUNS="], "RUNS=''"),
    (["compare", "--RUNS=no-such-run-here"], "RUNS='no-such-run-here'"),
    (["tensorboard", "--RUNS=no-such-run-here"], "RUNS='no-such-run-here'"),
    (["tensorboard", "--RUN_ID=x", "--PORT=http"], "PORT='http'"),
])
def test_bad_input_exits_2_and_names_the_key(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "LAST_RUN", tmp_path / "last-run")
    if "--PORT=http" in argv:
        fake_run(tmp_path, "x", [0.1])
        argv = ["tensorboard", f"--RUN_DIR={tmp_path}/build/storage/runs/rehearsal/x", "--PORT=http"]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_make_passes_runs_and_port_as_data(tmp_path):
    """Through the real Makefile: a quoted run directory with spaces, `$(...)` and backticks arrives
    whole; a PORT that is a command is refused by rlaunch, and nothing runs."""
    import shlex
    import subprocess

    odd = tmp_path / "runs $(touch ran) `touch ran`"
    run_dir = fake_run(odd, "r-odd", [0.1, 0.5, 0.9])
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_KNOB_", "MAKE"))}

    def make(*args):
        return subprocess.run(["make", "-C", str(root), *args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    proc = make("compare", f"RUNS={shlex.quote(str(run_dir))}", f"OUT={tmp_path / 'c.png'}")
    assert proc.returncode == 0, proc.stderr
    assert "r-odd" in proc.stdout and (tmp_path / "c.png").is_file()
    proc = make("tensorboard", f"RUN_DIR={run_dir}", "PORT=$(touch ran)")
    assert proc.returncode == 2 and "rlaunch: config: PORT='$(touch ran)'" in proc.stderr, proc.stderr
    assert not (root / "ran").exists() and not (tmp_path / "ran").exists()


def test_compare_out_a_directory_writes_the_png_in_it_and_another_suffix_is_bad_input(tmp_path, capsys):
    # The curves are one PNG: OUT=<a directory> puts it there, OUT=x.svg is refused before anything is read.
    run_dir = fake_run(tmp_path, "r-dir", [0.1, 0.5, 0.9])
    where = tmp_path / "plots"
    where.mkdir()
    cli.Cli().compare(RUNS=str(run_dir), OUT=str(where))
    assert [p.name for p in where.iterdir()] == ["r-dir.png"]
    assert (where / "r-dir.png").read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ConfigError, match=r"OUT='.*curves.svg'.*a \.png file or a directory"):
        cli.Cli().compare(RUNS=str(run_dir), OUT=str(tmp_path / "curves.svg"))
    assert not (tmp_path / "curves.svg").exists()

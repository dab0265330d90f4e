"""`make plan` stays interactive (issue 44 item 4): a loader's acceptance is kept on disk by request and
venv stamp (rlaunch.validate.loaders), and the checks that wait on another process run side by side
(rlaunch.validate.early) with the plan's lines and first refusal unchanged. A fake validator venv answers
here, counting its calls; the real loaders are tests/unit/test_loaders.py's."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rlaunch import ROOT
from rlaunch.cli import commands as cli
from rlaunch.config import load as config
from rlaunch.errors import CheckError, ConfigError
from rlaunch.validate import early
from rlaunch.registry import frameworks
from rlaunch.validate import loaders

FAKE = """#!/bin/bash
# A validator venv's python: counts its calls, accepts every request, echoing the first one's text.
echo x >> "$(dirname "$0")/../calls"
req=$(cat)
printf '{"results": [{"ok": %s, "summary": "%s", "loader": "fake"}]}\\n' \\
  "$(grep -q reject <<<"$req" && echo false || echo true)" "$(sed 's/"/\\\\"/g' <<<"$req" | head -c 300)"
"""


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """A fake .venv-verl under RLAUNCH_VALIDATORS, its stamp, and a fresh disk and memory cache."""
    bin_ = tmp_path / "validators" / ".venv-verl" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(FAKE)
    (bin_ / "python").chmod(0o755)
    (bin_.parent / ".rlaunch-validator").write_text("aaaa python3.11\n")
    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path / "validators"))
    monkeypatch.setenv("RLAUNCH_LOADER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "_CACHE", {})
    return bin_.parent


def calls(venv) -> int:
    return len((venv / "calls").read_text().split()) if (venv / "calls").exists() else 0


def again(request: dict, run_id: str = "") -> dict:
    """A new plan of it: nothing in memory, only the disk cache."""
    loaders._CACHE.clear()
    return loaders.run("verl", [request], run_id)[0]


def test_a_second_plan_of_the_same_request_runs_no_loader(venv):
    first = again({"overrides": ["a=1"]})
    assert first["ok"] and calls(venv) == 1
    assert again({"overrides": ["a=1"]}) == first and calls(venv) == 1


def test_a_changed_request_or_venv_stamp_asks_the_loader_again(venv):
    again({"overrides": ["a=1"]})
    again({"overrides": ["a=2"]})
    assert calls(venv) == 2
    (venv / ".rlaunch-validator").write_text("bbbb python3.11\n")  # the venv rebuilt from another lock
    again({"overrides": ["a=1"]})
    assert calls(venv) == 3
    (venv / ".rlaunch-validator").unlink()  # no identity: nothing of it trusted, nothing kept
    again({"overrides": ["a=1"]}), again({"overrides": ["a=1"]})
    assert calls(venv) == 5


def test_a_rejection_is_never_kept(venv):
    for _ in range(2):
        assert again({"overrides": ["reject=1"]})["ok"] is False
    assert calls(venv) == 2


def test_the_run_id_a_plan_makes_anew_hits_and_reads_back_as_the_new_one(venv):
    first = again({"overrides": ["dir=/runs/r-111/ckpt"]}, "r-111")
    second = again({"overrides": ["dir=/runs/r-222/ckpt"]}, "r-222")
    assert calls(venv) == 1 and "r-111" in first["summary"]
    assert "r-222" in second["summary"] and "r-111" not in second["summary"]


def test_the_slow_checks_overlap_and_the_first_refusal_in_plan_order_wins(tmp_path, monkeypatch):
    fw = type(frameworks.get("verl"))
    data_started = threading.Event()

    def loader(self, spec, files):
        # Run one after another, the data check would not have started: this waits out its deadline.
        assert data_started.wait(10), "the data check did not start while the loader ran"
        raise CheckError("verl-loader", "verl rejected the config: key x: y")

    def data(self, spec):
        data_started.set()
        raise ConfigError("data.source", "d", "a later refusal, not shown")

    monkeypatch.setattr(fw, "loader_check", loader)
    monkeypatch.setattr(fw, "data_check", data)
    spec = config.load("verl-ppo-gsm8k-0.5b", {"OUT": str(tmp_path / "out")})
    with pytest.raises(CheckError, match="^check verl-loader: verl rejected the config: key x: y$"):
        cli.Cli()._plan(spec)
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_refused_plan_kills_the_processes_it_no_longer_waits_for():
    started = early.Started(lambda: early.run(["sleep", "30"], timeout=60))
    deadline = time.monotonic() + 10
    while not early._LIVE and time.monotonic() < deadline:
        time.sleep(0.01)
    early.stop()
    assert started.result().returncode == -9


def test_a_background_error_is_raised_as_itself():
    err = ConfigError("k", "v", "allowed")
    started = early.Started(lambda: (_ for _ in ()).throw(err))
    with pytest.raises(ConfigError) as found:
        started.result()
    assert found.value is err


def test_the_backends_refusal_still_comes_before_the_loaders(tmp_path, monkeypatch):
    from rlaunch.registry import backends

    def infra(self, spec, files):
        raise CheckError("skypilot", "sky.Task.from_yaml rejected task.yaml: bad")

    def loader(self, spec, files):
        raise CheckError("verl-loader", "verl rejected the config")

    monkeypatch.setattr(type(backends.get("local")), "check", infra)
    monkeypatch.setattr(type(frameworks.get("verl")), "loader_check", loader)
    spec = config.load("verl-ppo-gsm8k-0.5b", {"OUT": str(tmp_path / "out")})
    with pytest.raises(CheckError, match="^check skypilot: sky.Task.from_yaml rejected task.yaml: bad$"):
        cli.Cli()._plan(spec)


def test_checked_rows_are_not_trusted_across_a_rebuilt_verlcpu_venv(tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.cpu import datacheck
    from rlaunch.frameworks.verl.cpu import plan as cpu_plan

    python = tmp_path / ".venv-verlcpu" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    stamp = {"now": "aaaa python3.11"}
    asked = []
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu_plan, "venv_python", lambda: python)
    monkeypatch.setattr(cpu_plan, "venv_stamp", lambda: stamp["now"])
    monkeypatch.setattr(cpu_plan, "run_probe", lambda argv, what: asked.append(argv) or
                        {"ok": True, "lines": ["rows: 40 train, 8 test"], "warnings": []})
    data = ROOT / "tests" / "fixtures" / "data" / "gsm8k-parquet"
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "data1", "DATA": str(data)})
    overrides = frameworks.get("verl").overrides(spec)
    datacheck.lines(spec, overrides), datacheck.lines(spec, overrides)
    assert len(asked) == 1  # kept
    stamp["now"] = "bbbb python3.11"  # make setup-verlcpu from another lock
    assert "cached" not in datacheck.lines(spec, overrides)[0] and len(asked) == 2
    stamp["now"] = ""  # no identity: neither read nor kept
    datacheck.lines(spec, overrides), datacheck.lines(spec, overrides)
    assert len(asked) == 4


def test_a_rehearsals_reward_check_is_kept_like_the_rows(tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.cpu import plan as cpu_plan

    python = tmp_path / ".venv-verlcpu" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    stamp, asked = {"now": "aaaa python3.11"}, []
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu_plan, "venv_python", lambda: python)
    monkeypatch.setattr(cpu_plan, "venv_stamp", lambda: stamp["now"])
    monkeypatch.setattr(cpu_plan, "run_probe", lambda argv, what: asked.append(argv) or
                        {"ok": True, "function": "f", "scores": [1.0, 0.0]})
    spec = config.load("verl-ppo-gsm8k-0.5b", {"REHEARSE": "1", "RUN_ID": "r1"})
    first = cpu_plan.check(spec)
    assert cpu_plan.check(spec) == first and len(asked) == 1
    stamp["now"] = "bbbb python3.11"
    cpu_plan.check(spec)
    assert len(asked) == 2

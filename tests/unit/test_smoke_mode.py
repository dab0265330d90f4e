"""SMOKE=1 in the config and in each framework adapter's own keys, the smoke report's numbers and
extrapolation, and the guard that keeps a real run out of a smoke run's directory (and back)."""

from __future__ import annotations

import json

import pytest

from rlaunch.cli import commands as cli
from rlaunch.config import load as config
from rlaunch.config import specjson
from rlaunch.errors import ConfigError
from rlaunch.registry import frameworks
from rlaunch.verify import smoke


def spec_of(preset: str, **knobs) -> dict:
    return config.load(preset, {"RUN_ID": knobs.pop("RUN_ID", "s"), **knobs})


def test_smoke_knob_sets_the_key_and_names_the_default_run_id():
    spec = config.load("rehearsal", {"SMOKE": "1"})
    assert spec.train.smoke is True and spec.train.smoke_steps == 5
    assert spec.run.id.startswith("rehearsal-smoke-")
    assert not config.load("rehearsal", {}).run.id.startswith("rehearsal-smoke-")
    with pytest.raises(ConfigError, match=r"train.smoke_steps=1 .*>= 2"):
        config.load("rehearsal", {"SMOKE": "1"}, "train.smoke_steps=1")


def test_each_adapter_maps_smoke_onto_its_own_keys():
    trl = json.loads(frameworks.get("trl").files(spec_of("rehearsal", SMOKE="1"))["trl.json"])
    assert trl["steps"] == 5 and trl["smoke"] is True
    assert "smoke" not in json.loads(frameworks.get("trl").files(spec_of("rehearsal"))["trl.json"])
    verl = frameworks.get("verl").overrides(spec_of("verl-ppo-gsm8k-0.5b", INFRA="gcp", SMOKE="1"))
    for item in ("trainer.total_training_steps=5", "trainer.test_freq=1", "trainer.save_freq=1"):
        assert item in verl
    areal = frameworks.get("areal").experiment(spec_of("areal-grpo-gsm8k", INFRA="gcp", SMOKE="1"))
    assert areal["total_train_steps"] == 5
    assert areal["saver"]["freq_steps"] == areal["evaluator"]["freq_steps"] == 1
    rlinf = frameworks.get("rlinf").files(spec_of("rlinf-grpo-pipeline-1.5b", INFRA="aistudio",
                                                  WORK_ROOT="/mnt/r", SMOKE="1"))
    text = next(v for k, v in rlinf.items() if k.endswith(".yaml"))
    assert "max_steps: 5" in text and "save_interval: 1" in text and "val_check_interval: 1" in text


def test_report_extrapolates_the_full_run_from_the_steady_speed(tmp_path):
    spec = spec_of("rehearsal", SMOKE="1")
    (tmp_path / "train_summary.json").write_text(json.dumps({
        "steps": 5, "s_per_step": 0.2, "duration_s": 30.0,
        "peak_memory": {"10.0.0.1": {"rss_mb": 580.0}, "10.0.0.2": {"rss_mb": 590.0}}}))
    got = smoke.measure(spec, tmp_path)
    # 300 steps at 0.2 s, plus the 29.2 s this run spent outside its 4 steady steps.
    assert got["full_run"]["steps"] == 300 and got["full_run"]["s"] == pytest.approx(60 + 29.2)
    text = smoke.lines(got)
    assert text[0] == "smoke: 5/5 steps in 30s wall, 0.2 s/step (steady, after step 1)"
    assert "smoke: peak memory on 10.0.0.2: RSS 590 MB" in text
    assert text[-1].startswith("smoke: the full run (300 steps) would take about 1m29s (300 steps x 0.2 s/step")
    epochs = smoke.measure(spec_of("verl-ppo-gsm8k-0.5b", INFRA="gcp", SMOKE="1"), tmp_path)
    assert epochs["full_run"]["s"] is None and "unknown" in epochs["full_run"]["how"]


def test_a_real_run_never_resumes_from_a_smoke_directory_and_back(tmp_path, monkeypatch):
    spec = specjson.view(spec_of("rehearsal", RUN_ID="guard").dump())  # spec.json's data, changed below
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec["paths"]["run_dir"] = str(run_dir)
    cli._smoke_guard(spec)  # a fresh directory: fine
    (run_dir / "SMOKE").write_text("{}")
    with pytest.raises(ConfigError, match="holds SMOKE, and a real run never resumes from a smoke run"):
        cli._smoke_guard(spec)
    spec["train"]["smoke"] = True
    cli._smoke_guard(spec)  # the smoke run itself, again: fine
    (run_dir / "SMOKE").unlink()
    (run_dir / "spec.json").write_text("{}")
    with pytest.raises(ConfigError, match="a new id for the smoke run"):
        cli._smoke_guard(spec)

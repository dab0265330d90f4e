"""Any model from the Hub (issue 29): model.path=<org>/<name>[@<revision>] is a model like a pinned
one: its revision resolved to a commit at plan time (here against tests/fakehub.py), recorded in
spec.json, downloaded once by the input preparation into <mount>/models/<org>--<name>/<rev12>/ with
its SHA256SUMS; without the Hub a moving revision is a warning naming the risk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.config import load as config
from rlaunch.config import inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fakehub import FakeHub, use_in_process  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "models" / "acme" / "tiny-lm" / COMMIT
    repo.mkdir(parents=True)
    (repo / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    (repo / "tokenizer_config.json").write_text("{}")
    (repo / "model.safetensors").write_bytes(b"\0" * 64)
    with FakeHub(tmp_path / "hub") as server:
        use_in_process(monkeypatch, server.url)
        yield server


def load(sets: str):
    return config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "hub1"}, sets)


def test_a_hub_id_is_resolved_to_a_commit_and_laid_out_like_a_pinned_model(hub):
    spec = load("model.path=acme/tiny-lm")
    pin = spec.pins.model
    assert (pin["hf_id"], pin["revision"], pin["asked"], pin["unresolved"]) == ("acme/tiny-lm", COMMIT, "main", "")
    assert spec.paths.model == f"/storage/models/acme--tiny-lm/{COMMIT[:12]}"
    assert json.loads(spec.json_text())["pins"]["model"]["revision"] == COMMIT  # recorded in spec.json
    assert not any(line.startswith("WARNING") for line in inputs.layout(spec))
    model = next(i for i in inputs.of(spec) if i.what == "model")
    assert model.fetch == ("--hf-id=acme/tiny-lm", f"--revision={COMMIT}") and model.key == "model.path"


def test_without_the_hub_a_moving_revision_is_a_warning_naming_the_risk(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load("model.path=Qwen/Qwen3-8B")
    assert spec.paths.model == "/storage/models/Qwen--Qwen3-8B/main"
    warning = [line for line in inputs.layout(spec) if line.startswith("WARNING")]
    assert warning and "'main' moves" in warning[0] and "a rerun may train another model" in warning[0]
    pinned = load(f"model.path=Qwen/Qwen3-8B@{COMMIT}")  # a commit needs no Hub
    assert pinned.paths.model.endswith(f"/Qwen--Qwen3-8B/{COMMIT[:12]}")
    assert not any(line.startswith("WARNING") for line in inputs.layout(pinned))


def test_the_input_preparation_downloads_it_once(hub, tmp_path):
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "hub1"},
                       f"model.path=acme/tiny-lm storage.mount={tmp_path}/storage")
    line = next(line for line in inputs.setup_lines(spec) if "--hf-id=" in line)
    env = {**os.environ, "RLAUNCH_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "tools")}
    first = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    mdir = Path(spec.paths.model)
    assert (mdir / "model.safetensors").is_file() and "model.safetensors" in (mdir / "SHA256SUMS").read_text()
    gets = len(hub.file_gets())
    second = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "matches its SHA256SUMS: kept" in second.stdout
    assert len(hub.file_gets()) == gets  # nothing downloaded again


def test_a_directory_on_the_shared_storage_and_the_pins_own_id_keep_working(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mine = load("model.path=/storage/models/mine")
    assert mine.paths.model == "/storage/models/mine" and "asked" not in mine.pins.model
    same = load("model.path=Qwen/Qwen2.5-7B-Instruct")  # the preset's pinned model: its pin, not the Hub
    assert same.pins.model["revision"] == "a09a35458c702b33eeacc393d103063234e8bc28"

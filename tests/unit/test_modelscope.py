"""ModelScope as a model and dataset source (issue 31; seeds 002 and 003 download from it), pinned by
revision like the Hub's: model.path=modelscope:<org>/<name>[@<revision>], and pins with `hub:
modelscope` in configs/versions.yaml. Downloads go through the real `modelscope` client against
tests/fakemodelscope.py (MODELSCOPE_ENDPOINT); a second preparation downloads nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlaunch import ROOT
from rlaunch.config import hub, inputs, modelfacts
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.job import data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fakemodelscope import FakeModelScope, use_in_process  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DATA_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def model_repo(root: Path, repo: str = "acme/tiny-lm", commit: str = COMMIT) -> Path:
    top = root / "models" / repo / commit
    top.mkdir(parents=True)
    (top / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2,
                                                 "num_attention_heads": 4, "num_key_value_heads": 2,
                                                 "intermediate_size": 128, "vocab_size": 100}))
    (top / "tokenizer_config.json").write_text("{}")
    (top / "model.safetensors").write_bytes(b"\0" * 64)
    return top


@pytest.fixture()
def ms(tmp_path, monkeypatch):
    with FakeModelScope(tmp_path / "ms") as server:
        use_in_process(monkeypatch, server.url)
        monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
        yield server


def env(**extra: str) -> dict:
    keep = {k: v for k, v in os.environ.items() if k.startswith(("MODELSCOPE_", "PATH", "HOME"))}
    return {**keep, "RLAUNCH_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "tools"), **extra}


def load(sets: str, infra: str = "gcp"):
    return config.load("verl-grpo-math-7b", {"INFRA": infra, "RUN_ID": "ms1"}, sets)


def test_a_modelscope_id_at_a_commit_is_pinned_and_laid_out_as_seed_003_lays_it_out():
    spec = load(f"model.path=modelscope:acme/tiny-lm@{COMMIT}")
    pin = spec.pins.model
    assert (pin["hub"], pin["hf_id"], pin["revision"], pin["unresolved"]) == ("modelscope", "acme/tiny-lm", COMMIT, "")
    assert spec.paths.model == f"/storage/models/modelscope/acme/tiny-lm/{COMMIT}"
    model = next(i for i in inputs.of(spec) if i.what == "model")
    assert model.fetch == ("--modelscope-id=acme/tiny-lm", f"--revision={COMMIT}") and model.key == "model.path"
    layout = "\n".join(inputs.layout(spec))
    assert f"acme/tiny-lm@{COMMIT[:12]} on ModelScope: downloaded unless its SHA256SUMS verifies" in layout
    assert "WARNING" not in layout


def test_a_branch_on_modelscope_is_a_warning_whose_fix_works():
    spec = load("model.path=modelscope:acme/tiny-lm")
    assert spec.pins.model["revision"] == "master"
    warning = next(line for line in inputs.layout(spec) if line.startswith("WARNING"))
    assert "'master' moves" in warning and "ModelScope's API names no commit" in warning
    fix = warning.rsplit("name a commit: ", 1)[1].replace("<40-hex commit>", COMMIT)
    assert fix == f"model.path=modelscope:acme/tiny-lm@{COMMIT}"
    assert not any(line.startswith("WARNING") for line in inputs.layout(load(fix)))


@pytest.mark.parametrize("value", ["hf:acme/tiny-lm", "modelscope:not-an-id", "ms:acme/tiny-lm@main"])
def test_an_unknown_hub_or_a_malformed_id_is_one_error_naming_the_key(value):
    with pytest.raises(ConfigError) as err:
        load(f"model.path={value}")
    assert (err.value.key, err.value.value) == ("model.path", value)
    assert "modelscope:<org>/<name>[@<revision>]" in err.value.allowed


def test_make_plan_exits_2_on_a_bad_hub_and_writes_nothing(tmp_path):
    out = tmp_path / "plan"
    proc = subprocess.run(["make", "-s", "plan", "PRESET=verl-grpo-math-7b", "INFRA=gcp", f"OUT={out}",
                           "SET=model.path=hf:acme/tiny-lm"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "model.path='hf:acme/tiny-lm'" in proc.stderr and not out.exists()


def test_the_input_preparation_downloads_it_once_with_modelscopes_client(ms, tmp_path):
    model_repo(tmp_path / "ms")
    spec = load(f"model.path=modelscope:acme/tiny-lm@{COMMIT} storage.mount={tmp_path}/storage")
    line = next(line for line in inputs.setup_lines(spec) if "--modelscope-id=" in line)
    first = subprocess.run(["bash", "-c", line], env=env(), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    mdir = Path(spec.paths.model)
    assert (mdir / "model.safetensors").is_file() and "model.safetensors" in (mdir / "SHA256SUMS").read_text()
    assert any(f"Revision={COMMIT}" in p and "FilePath=model.safetensors" in p for p in ms.file_gets())
    before = len(ms.requests)
    second = subprocess.run(["bash", "-c", line], env=env(), capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "matches its SHA256SUMS: kept" in second.stdout
    assert ms.requests[before:] == []  # nothing asked of ModelScope again


def test_an_unreachable_modelscope_says_which_site_and_a_fix_that_works(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rlaunch.job.data", "--modelscope-id=acme/tiny-lm",
                           f"--revision={COMMIT}", f"--out={tmp_path / 'm'}"], capture_output=True, text=True,
                          env=env(MODELSCOPE_ENDPOINT="http://127.0.0.1:9", MODELSCOPE_CACHE=str(tmp_path / "c"),
                                  API_HTTP_CLIENT_MAX_RETRIES="0"), timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "could not fetch acme/tiny-lm at its pinned revision from ModelScope" in proc.stderr
    assert "model.path=<dir>" in proc.stderr  # a directory on the shared storage is adopted as it is


def versions_with(tmp_path, monkeypatch, **datasets: dict) -> None:
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["datasets"].update(datasets)
    path = tmp_path / "versions.yaml"
    path.write_text(yaml.safe_dump(versions, sort_keys=False))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(path))


def test_a_dataset_pinned_on_modelscope_is_its_snapshot_or_its_file(ms, tmp_path, monkeypatch):
    top = tmp_path / "ms" / "datasets" / "acme" / "prompts" / DATA_COMMIT
    top.mkdir(parents=True)
    (top / "prompts.jsonl").write_text('{"prompt": "1+1?"}\n')
    (top / "other.jsonl").write_text('{"prompt": "2+2?"}\n')
    pin = {"hf_id": "acme/prompts", "revision": DATA_COMMIT, "hub": "modelscope"}
    versions_with(tmp_path, monkeypatch, whole=pin, one={**pin, "file": "prompts.jsonl"})
    data.snapshot("whole", tmp_path / "whole")
    names = sorted(p.name for p in (tmp_path / "whole").iterdir())
    assert names == ["SHA256SUMS", "SHA256SUMS.stamp", "other.jsonl", "prompts.jsonl"]
    info = data.prepare("one", tmp_path / "one")
    assert info["file"] == "prompts.jsonl" and not (tmp_path / "one" / "other.jsonl").exists()
    assert data.verify_manifest(tmp_path / "one") == []
    assert ms.file_gets() and all(f"Revision={DATA_COMMIT}" in p for p in ms.file_gets())


def test_gsm8k_pinned_on_modelscope_becomes_verls_rows(ms, tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    top = tmp_path / "ms" / "datasets" / "acme" / "gsm8k" / DATA_COMMIT
    (top / "main").mkdir(parents=True)
    (top / "README.md").write_text("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n"
                                   "    path: main/train-*\n  - split: test\n    path: main/test-*\n---\n")
    pq.write_table(pa.table({"question": ["1+1?"], "answer": ["#### 2"]}), top / "main" / "train-0.parquet")
    pq.write_table(pa.table({"question": ["4+4?"], "answer": ["#### 8"]}), top / "main" / "test-0.parquet")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    versions_with(tmp_path, monkeypatch, gsm8k={"hf_id": "acme/gsm8k", "config": "main", "revision": DATA_COMMIT,
                                                 "hub": "modelscope"})
    out = tmp_path / "storage" / "data" / "gsm8k"
    info = data.prepare("gsm8k", out)
    assert info["rows"] == {"train": 1, "test": 1}
    assert pq.read_table(out / "train.parquet").to_pylist()[0]["reward_model"]["ground_truth"] == "2"
    assert sorted(p.name for p in out.parent.iterdir()) == ["gsm8k"]  # the snapshot is gone
    assert data.verify_manifest(out) == []


def test_the_models_facts_come_from_modelscope(ms, tmp_path, monkeypatch):
    model_repo(tmp_path / "ms")
    monkeypatch.setattr(modelfacts, "CACHE", tmp_path / "facts")
    modelfacts.read.cache_clear()
    facts = modelfacts.read("modelscope:acme/tiny-lm", COMMIT)
    assert not isinstance(facts, str), facts
    assert (facts.layers, facts.heads, facts.kv_heads) == (2, 4, 2)
    assert facts.source == f"{ms.url}/models/acme/tiny-lm/file/view/{COMMIT}/config.json"
    kept = tmp_path / "facts" / "modelscope--acme--tiny-lm" / COMMIT / "config.json"
    assert kept.is_file()  # the next plan reads it without the network
    modelfacts.read.cache_clear()


def test_a_gated_model_on_modelscope_needs_modelscopes_token_by_name(monkeypatch):
    monkeypatch.setenv("MODELSCOPE_API_TOKEN", "ms-secret-value-0123456789")
    spec = load(f"model.path=modelscope:acme/tiny-lm@{COMMIT} model.gated=true")
    assert "MODELSCOPE_API_TOKEN" in spec.secrets and "HF_TOKEN" not in spec.secrets
    assert hub.token(spec.pins.model) == "MODELSCOPE_API_TOKEN"
    assert "HF_TOKEN" in load(f"model.path=acme/tiny-lm@{COMMIT} model.gated=true").secrets


def test_a_pin_on_an_unknown_hub_is_refused_naming_the_pin(tmp_path, monkeypatch):
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["models"]["qwen2.5-7b-instruct"]["hub"] = "gitee"
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions, sort_keys=False))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    with pytest.raises(ConfigError, match=r"models.qwen2.5-7b-instruct.hub='gitee'.*one of huggingface, modelscope"):
        load("")
    with pytest.raises(ConfigError, match="one of huggingface, modelscope"):
        data.fetch_model("qwen2.5-7b-instruct", tmp_path / "m")


def test_a_launch_without_modelscopes_token_says_which_setting_needs_it(monkeypatch):
    from rlaunch.backends.base import Backend
    from rlaunch.errors import MissingPrerequisite

    monkeypatch.delenv("MODELSCOPE_API_TOKEN", raising=False)
    spec = load(f"model.path=modelscope:acme/tiny-lm@{COMMIT} model.gated=true")
    with pytest.raises(MissingPrerequisite, match="model.gated=true needs MODELSCOPE_API_TOKEN"):
        Backend().require_secrets(spec)

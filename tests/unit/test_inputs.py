"""rlaunch.config.inputs: one place says where the model and dataset live, for every framework. Pinned
revisions by default; model.path / data.path (the seeds' layout) move what the framework loads, what
preflight checks and what setup prepares together."""

from __future__ import annotations

import json

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.config import inputs
from rlaunch.backends.aistudio import backend as aistudio
from rlaunch.backends.kuberay import backend as kuberay
from rlaunch.errors import ConfigError
from rlaunch.frameworks.areal import adapter as areal
from rlaunch.frameworks.rlinf import adapter as rlinf
from rlaunch.frameworks.verl import adapter as verl

MS_COMMIT = "6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03"  # seed 003's ModelScope revision


def load(preset: str, sets: str = "", **knobs):
    return config.load(preset, {"RUN_ID": "t", **knobs}, sets)


def test_pinned_layout_by_default_one_directory_per_revision():
    spec = load("verl-ppo-gsm8k-0.5b", INFRA="kuberay")
    (data, model) = inputs.of(spec)
    assert data.dir == spec.paths.data_dir and data.fetch == ("--dataset=gsm8k",) and not data.user
    assert model.dir == spec.paths.model_dir and model.fetch == ("--model=qwen2.5-0.5b-instruct",)
    assert model.dir.endswith("/" + spec.pins.model["revision"][:12])
    assert model.required == ("config.json", "tokenizer_config.json", "*.safetensors")
    assert data.required == ("train.parquet", "test.parquet")


@pytest.mark.parametrize("preset", ["verl-ppo-gsm8k-0.5b", "areal-grpo-gsm8k", "rlinf-grpo-pipeline-1.5b"])
def test_every_framework_loads_what_the_user_paths_name_and_preflight_checks_them(preset):
    # framework.image=rlaunch: KubeRay runs the rlaunch image (its rule runs at load)
    spec = load(preset, "model.path=/data/m data.path=/data/data/gsm8k framework.image=rlaunch", INFRA="kuberay")
    fw = {"verl": verl.ADAPTER, "areal": areal.ADAPTER, "rlinf": rlinf.ADAPTER}[spec.framework.name]
    assert spec.paths.model == "/data/m"  # what every adapter loads (config.derive decides it)
    checked = fw.inputs(spec)
    assert "/data/m/config.json" in checked
    assert any(p.startswith("/data/data/gsm8k/") for p in checked)
    # What the job runs (not spec.json, which records the pinned layout too) names only the user's paths.
    rendered = "\n".join(text for rel, text in artifacts.common(spec).items() if rel != "spec.json")
    assert "/data/models/" not in rendered and "/data/data/gsm8k" in rendered and "/data/m" in rendered
    assert [i.dir for i in inputs.of(spec)] == ["/data/data/gsm8k", "/data/m"]
    assert all(i.user and not i.fetch for i in inputs.of(spec))


def test_verl_inputs_follow_overridden_data_files():
    over = json.dumps(["data.train_files=/data/mine/a.parquet", "data.val_files=[/data/mine/b.parquet]"])
    spec = load("verl-ppo-gsm8k-0.5b", f"framework.overrides='{over}'", INFRA="kuberay")
    checked = verl.ADAPTER.inputs(spec)
    assert "/data/mine/a.parquet" in checked and "/data/mine/b.parquet" in checked
    assert f"{spec.paths.data_dir}/train.parquet" not in checked


def test_areal_reads_the_snapshot_and_a_user_path_must_name_gsm8k():
    spec = load("areal-grpo-gsm8k", INFRA="gcp")
    (data, _) = inputs.of(spec)
    assert data.dir == spec.paths.data_dir + "-hf" and data.fetch == ("--dataset=gsm8k", "--snapshot")
    assert areal.ADAPTER.experiment(spec)["train_dataset"]["path"] == data.dir
    with pytest.raises(ConfigError, match="data.path='/storage/my-data'.*names gsm8k"):
        load("areal-grpo-gsm8k", "data.path=/storage/my-data", INFRA="gcp")  # the framework's rule, at load


def test_rlinf_model_on_modelscope_is_downloaded_from_there_into_seed_003s_layout():
    spec = load("rlinf-grpo-pipeline-1.5b", INFRA="aistudio", WORK_ROOT="/mnt/w")
    model = next(i for i in inputs.of(spec) if i.what == "model")
    # seed 003's $WORK_ROOT/models/modelscope/<org>/<name>/<revision>: a copy its user made is kept
    assert model.dir == "/mnt/w/models/modelscope/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/" + MS_COMMIT
    assert not model.user and model.fetch == ("--model=deepseek-r1-distill-qwen-1.5b",)
    assert f"deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B@{MS_COMMIT[:12]} on ModelScope: downloaded unless " \
        "its SHA256SUMS verifies" in "\n".join(inputs.layout(spec))
    assert any("-m rlaunch.job.data --model=deepseek-r1-distill-qwen-1.5b --out=" + model.dir in line
               for line in inputs.setup_lines(spec))


@pytest.mark.parametrize(("sets", "key"), [
    ("model.path=/elsewhere/m", "model.path"),
    ("data.path=/elsewhere/d", "data.path"),
    ("data.path=relative/d", "data.path"),
])
def test_user_paths_must_be_on_the_shared_storage(sets, key):
    with pytest.raises(ConfigError, match=rf"^config: {key}=.*storage.mount=/data"):
        load("verl-ppo-gsm8k-0.5b", sets, INFRA="kuberay")  # a rule of the config: before any render


def test_a_hub_id_model_path_is_an_input_prepared_on_the_shared_storage(monkeypatch):
    """Issue 29: another Hub id is downloaded once into the shared storage, like a pinned model
    (tests/unit/test_hub_model.py resolves and downloads one from the Hub stand-in)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load("verl-ppo-gsm8k-0.5b", "model.path=Qwen/Qwen2.5-1.5B-Instruct", INFRA="kuberay")
    assert inputs.model_dir(spec) == inputs.model_path(spec) == "/data/models/Qwen--Qwen2.5-1.5B-Instruct/main"
    assert [i.what for i in inputs.of(spec)] == ["dataset", "model"]


def test_aistudio_checks_the_manifests_where_the_user_paths_are():
    spec = load("rlinf-grpo-pipeline-1.5b", "model.path=/mnt/w/models/modelscope/org/m/sha", INFRA="aistudio",
                WORK_ROOT="/mnt/w")
    dirs = {m["what"]: m["dir"] for m in aistudio.manifests(spec)}
    assert dirs["model"] == "/mnt/w/models/modelscope/org/m/sha"


def test_make_plan_prints_the_layout_it_expects():
    spec = load("verl-ppo-gsm8k-0.5b", INFRA="kuberay")
    lines = inputs.layout(spec)
    assert lines[0].startswith(f"dataset {spec.paths.data_dir}/  (train.parquet, test.parquet, SHA256SUMS)")
    assert "openai/gsm8k main@" in lines[1] and "downloaded unless its SHA256SUMS verifies" in lines[1]
    spec = load("verl-ppo-gsm8k-0.5b", "model.path=/data/Qwen2.5-0.5B-Instruct", INFRA="kuberay")
    assert "yours (model.path): never downloaded; SHA256SUMS computed once" in inputs.layout(spec)[3]


def test_the_rehearsal_has_no_inputs():
    spec = load("rehearsal", INFRA="kuberay")
    assert inputs.of(spec) == [] and inputs.setup_lines(spec) == []
    assert yaml.safe_load(kuberay.BACKEND.render(spec)["kuberay/rayjob.yaml"])["kind"] == "RayJob"

"""The memory lower bound at plan: parameter counts from the model's own config.json facts (pinned,
or real models' config.json in tests/fixtures/models), the accelerators' pinned sizes, the nodes'
host memory from SkyPilot's catalog (tests/fixtures/skypilot-catalog) or the pod's limit, every verl
and AReaL preset passing, and a run that cannot fit failing `make plan` with exit 2, its terms named,
nothing written, its hints each making it fit when applied."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.config import modelfacts, specjson
from rlaunch.config import load as config
from rlaunch.plan import memory
from rlaunch.errors import CheckError

ROOT = Path(__file__).resolve().parents[2]
GB = 10**9


def pinned(model: str):
    """A spec that names a pinned model and no other (the facts modelfacts reads of it)."""
    return specjson.view({"model": {"name": model, "path": ""}, "pins": {"model": {}}})


def spec_of(preset: str, **knobs) -> dict:
    sets = knobs.pop("SET", "")
    return config.load(preset, {"RUN_ID": "mem", **knobs}, sets)


# Each pinned model's parameter count from its facts equals what its safetensors hold (bf16: the
# index's total_size / 2; the 0.5B and 1.5B single files are 988 MB and 3.09 GB).
@pytest.mark.parametrize(("model", "params"), [
    ("qwen2.5-0.5b-instruct", 494_032_768), ("qwen2.5-1.5b-instruct", 1_543_714_304),
    ("qwen2.5-7b-instruct", 7_615_616_512), ("qwen2.5-32b-instruct", 32_763_876_352)])
def test_parameter_count_from_the_pinned_config_facts(model, params):
    facts = modelfacts.of(pinned(model))
    assert facts.params == params
    assert facts.source.startswith("https://huggingface.co/") and facts.source.endswith("/config.json")


def test_tied_embeddings_have_no_separate_head():
    facts = modelfacts.of(pinned("qwen2.5-0.5b-instruct"))
    assert facts.parts["lm_head"] == 0 and facts.tied
    cfg = config_of("qwen2.5-0.5b-instruct")
    untied = modelfacts.param_count({**cfg, "tie_word_embeddings": False})
    assert untied["lm_head"] == untied["embedding"] == 151936 * 896


def config_of(name: str) -> dict:
    from rlaunch.config import pins

    return pins.load_versions()["models"][name]["config"]


@pytest.mark.parametrize(("name", "gb", "word"), [
    ("H200", 141, ""), ("A100-80GB", 80, "named"), ("A100-SXM4-80GB", 80, "named"),
    ("A100-40GB", 40, "named"), ("A100", 80, "largest"), ("GB200", 186, ""), ("B200", 180, ""), ("L4", 24, "")])
def test_accelerator_sizes_are_pinned_and_an_unsized_name_takes_the_largest(name, gb, word):
    nbytes, how = memory.accelerator_memory(name)
    assert nbytes == gb * GB and word in how
    assert memory.accelerator_memory("TPU-v5") is None


PRESETS = [("verl-ppo-gsm8k-0.5b", {"INFRA": "gcp"}), ("verl-ppo-gsm8k-0.5b", {"INFRA": "kuberay"}),
           ("verl-grpo-math-7b", {"INFRA": "gcp"}), ("verl-grpo-math-7b", {"INFRA": "aws"}),
           ("verl-grpo-gsm8k-32b", {"INFRA": "gcp"}), ("verl-grpo-gsm8k-32b", {"INFRA": "kuberay"}),
           ("areal-grpo-gsm8k", {"INFRA": "gcp"}), ("areal-grpo-gsm8k", {"INFRA": "aws"}),
           ("areal-grpo-gsm8k", {"INFRA": "gcp", "NODES": "2", "GPUS_PER_NODE": "8"})]


@pytest.mark.parametrize(("preset", "knobs"), PRESETS)
def test_every_verl_and_areal_preset_fits_and_prints_bound_and_headroom(preset, knobs):
    spec = spec_of(preset, **knobs)
    line = memory.check(spec)
    assert line.startswith("memory bound: ") and " headroom of " in line, line
    b = memory.bound(spec)
    worst = b.worst("gpu")
    assert 0 < worst.total <= b.gpu_bytes


def test_a_32b_run_on_one_node_of_4_a100_80gb_without_offload_fails_naming_its_terms():
    spec = spec_of("verl-grpo-gsm8k-32b", INFRA="gcp", NODES="1", ACCELERATOR="A100-80GB")
    assert spec.cluster.gpus_per_node == 4 and not spec.train.offload
    with pytest.raises(CheckError) as err:
        memory.check(spec)
    text = str(err.value)
    first = text.splitlines()[0]
    # 32.76 B params: fp32 weights, gradients and Adam's two states over 4 GPUs, plus the bf16
    # reference (use_kl_loss): 32.8 + 32.8 + 65.5 + 16.4 GB, on an 80 GB GPU.
    assert first.startswith("check memory: the actor update needs at least 147.4 GB on one A100-80GB (80.0 GB): ")
    for term in ("actor parameters 32.8 GB", "actor gradients 32.8 GB", "actor optimizer 65.5 GB",
                 "reference parameters 16.4 GB"):
        assert term in first
    assert "rollout reserved                 48.0 GB  gpu_memory_utilization 0.6 x 80.0 GB" in text
    levers = text.splitlines()[-1]
    assert levers.startswith("  to make it fit: NODES=2 (the fewest nodes")
    short = text.splitlines()[-2]
    assert short.startswith("  not enough alone: SET=train.offload=true (its actor update still needs 131.1 GB)")
    assert "micro-batch" in short and "micro-batch" not in levers
    assert memory.check(spec_of("verl-grpo-gsm8k-32b", INFRA="gcp", NODES="2", ACCELERATOR="A100-80GB"))


def test_the_bound_is_what_fits_more_nodes_shrink_it_and_offload_moves_state_to_the_host():
    one = memory.bound(spec_of("verl-grpo-gsm8k-32b", INFRA="gcp", NODES="2"))
    two = memory.bound(spec_of("verl-grpo-gsm8k-32b", INFRA="gcp", NODES="4"))
    assert two.worst("gpu").total < one.worst("gpu").total
    plain = memory.bound(spec_of("verl-grpo-math-7b", INFRA="gcp", SET="train.offload=false"))
    offload = memory.bound(spec_of("verl-grpo-math-7b", INFRA="gcp"))
    assert plain.worst("host") is None
    start = {p.name: p for p in offload.phases}["rollout engine start"]
    assert [t.name for t in start.terms] == ["rollout reserved"]  # the actor left for the host
    host = offload.worst("host")
    assert {t.name for t in host.terms} == {"actor parameters", "actor optimizer", "rollout weights asleep"}
    # verl loads the offloaded state back for the update: that phase stays on the GPU.
    assert {p.name: p for p in offload.phases}["actor update"].total == \
        {p.name: p for p in plain.phases}["actor update"].total


def test_offloaded_state_is_checked_against_the_machines_host_memory_never_the_request_floor():
    # SkyPilot: `memory: 32+` is a floor; the H100:1 instance its catalog gives has 234 GiB.
    line = memory.check(spec_of("verl-grpo-math-7b", INFRA="gcp", SET="cluster.memory_gb=32"))
    assert "host 60.9 GB per node" in line and "(gcp a3-highgpu-1g: 234 GiB)" in line
    # KubeRay: requests == limits, so the pod's 32Gi is the machine, and the offloaded state is over it.
    spec = spec_of("verl-grpo-math-7b", INFRA="kuberay", SET="cluster.memory_gb=32 framework.image=rlaunch")
    with pytest.raises(CheckError, match=r"offloaded state \(per node\) needs at least 60.9 GB on a node's host "
                                         r"memory \(34.4 GB: the pod's memory limit 32Gi") as err:
        memory.check(spec)
    hints = str(err.value).splitlines()[-1]
    assert "SET=cluster.memory_gb=57" in hints and "SET=train.offload=false" in hints
    for fix in ("cluster.memory_gb=57 framework.image=rlaunch", "train.offload=false cluster.memory_gb=32 "
                                                                 "framework.image=rlaunch"):
        assert memory.check(spec_of("verl-grpo-math-7b", INFRA="kuberay", SET=fix)).startswith("memory bound: ")


def test_where_the_machine_is_not_known_the_host_bound_warns_and_does_not_refuse(monkeypatch, tmp_path):
    monkeypatch.setenv("RLAUNCH_SKY_CATALOG", str(tmp_path))  # a catalog copy without gcp
    line = memory.check(spec_of("verl-grpo-math-7b", INFRA="gcp", SET="cluster.memory_gb=32"))
    assert "host 60.9 GB per node (warning: not checked: no SkyPilot catalog for gcp" in line


def test_grpo_on_four_nodes_of_8_h100_plans_against_the_a3_highgpu_8g_host():
    # The case: refused before ("cluster.memory_gb=128 ... NODES=5"); an a3-highgpu-8g has 1,872 GiB.
    line = memory.check(spec_of("verl-grpo-math-7b", INFRA="gcp", NODES="4", GPUS_PER_NODE="8"))
    assert "host 144.7 GB per node" in line and "(gcp a3-highgpu-8g: 1872 GiB)" in line


def test_sglang_counts_what_others_hold_against_the_rest_of_its_fraction():
    vllm = {p.name: p for p in memory.bound(spec_of("verl-grpo-gsm8k-32b", INFRA="gcp")).phases}
    sglang = {p.name: p for p in memory.bound(spec_of("verl-grpo-gsm8k-32b", INFRA="gcp",
                                                      SET="rollout.backend=sglang")).phases}
    assert "rollout reserved" in [t.name for t in vllm["rollout engine start"].terms]
    names = [t.name for t in sglang["rollout engine start"].terms]
    assert "rollout weights" in names and "outside the engine's fraction" in names


def test_frameworks_without_a_bound_say_so():
    assert memory.check(spec_of("rehearsal")) == "memory bound: not computed (no memory bound for trl yet)"
    spec = spec_of("verl-ppo-gsm8k-0.5b", INFRA="gcp", ACCELERATOR="MI300X")
    assert "no pinned memory size for cluster.accelerator=MI300X" in memory.check(spec)


def test_a_model_whose_facts_cannot_be_read_is_a_warning_naming_the_checks_not_run(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = spec_of("verl-grpo-math-7b", INFRA="gcp", SET="model.path=SomeOrg/NotCached-9B")
    line = memory.check(spec)
    assert line.startswith("memory bound: not computed (warning: the model's facts are not known, so the memory "
                           "bound and the heads rules did not run: config.json of SomeOrg/NotCached-9B not found")
    assert modelfacts.check(spec).startswith("model: warning: its facts are not known")


def test_make_plan_stops_with_exit_2_before_writing_anything(tmp_path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_KNOB_")}
    proc = subprocess.run([sys.executable, "-m", "rlaunch", "plan", "--PRESET=verl-grpo-gsm8k-32b", "--INFRA=gcp",
                           "--NODES=1", "--ACCELERATOR=A100-80GB", f"--OUT={out}", "--RUN_ID=mem"],
                          cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT / "tools")}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("rlaunch: check memory: the actor update needs at least 147.4 GB")
    assert not out.exists()

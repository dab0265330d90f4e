"""The model's own facts drive plan's checks (rlaunch.config.modelfacts): real models' config.json
(tests/fixtures/models: a dense 8B, a 32B and an MoE), their parameter counts, the memory bound of
each against its own facts (never the preset's model), the attention-heads rules, where facts come
from (a model directory, a facts cache), and the SkyPilot resources line from the catalog."""

from __future__ import annotations

import json
import re

import pytest

from rlaunch.config import modelfacts
from rlaunch.config import load as config
from rlaunch.plan import memory
from rlaunch.backends.skypilot import backend as skypilot
from rlaunch.errors import CheckError, ConfigError

GB = 10**9


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    modelfacts.read.cache_clear()


def spec_of(preset: str = "verl-grpo-math-7b", sets: str = "", **knobs) -> dict:
    return config.load(preset, {"RUN_ID": "facts", "INFRA": "gcp", **knobs}, sets)


# The published sizes: Qwen3-8B 8.19 B; Qwen2.5-32B 32.76 B (its safetensors index: 65,527,752,704
# bytes in bf16); Qwen3-30B-A3B 30.53 B total and 3.35 B active (8 of 128 experts per token).
@pytest.mark.parametrize(("model", "total", "active", "experts"), [
    ("Qwen/Qwen3-8B", 8_190_735_360, 8_190_735_360, 0),
    ("Qwen/Qwen2.5-32B", 32_763_876_352, 32_763_876_352, 0),
    ("Qwen/Qwen3-30B-A3B", 30_532_122_624, 3_353_032_704, 128),
    ("Qwen/Qwen3-32B", 32_762_123_264, 32_762_123_264, 0)])
def test_parameter_counts_of_real_models_from_their_config_json(model, total, active, experts):
    facts = modelfacts.read(model)
    assert (facts.params, facts.active, facts.experts) == (total, active, experts)
    assert facts.source.endswith(f"{model.replace('/', '--')}/main/config.json")
    assert facts.dtype == "bfloat16" and not facts.tied


def test_the_plan_model_line_names_the_facts():
    line = modelfacts.check(spec_of(sets="model.path=Qwen/Qwen3-30B-A3B", NODES="1", GPUS_PER_NODE="8"))
    assert line.startswith("model Qwen/Qwen3-30B-A3B: MoE 30.53 B total, 3.35 B active (128 experts, 8 per token), "
                           "48 layers, hidden 2048, 32 heads / 4 KV heads, vocab 151936, untied embeddings, bfloat16")


@pytest.mark.parametrize(("model", "params"), [
    ("Qwen/Qwen3-8B", 8.19e9), ("Qwen/Qwen2.5-32B", 32.76e9), ("Qwen/Qwen3-30B-A3B", 30.53e9)])
def test_the_memory_bound_counts_the_runs_model_not_the_presets(model, params):
    # The preset's model is Qwen2.5-7B (7.62 B); with model.path another model, the bound is that model's.
    spec = spec_of(sets=f"model.path={model} train.offload=false", NODES="4", GPUS_PER_NODE="8")
    b = memory.bound(spec)
    assert round(b.params / 1e7) == round(params / 1e7)
    update = {p.name: p for p in b.phases}["actor update"]
    # fp32 weights, gradients and Adam's two states, sharded over 32 GPUs: 16 bytes per parameter / 32.
    assert update.total == pytest.approx(16 * b.params / 32)


def test_grpo_qwen3_8b_on_one_node_of_8_h100_plans():
    spec = spec_of(sets="model.path=Qwen/Qwen3-8B", NODES="1", GPUS_PER_NODE="8")
    line = memory.check(spec)
    assert line.startswith("memory bound: ") and "(gcp a3-highgpu-8g: 1872 GiB)" in line, line
    assert modelfacts.check(spec).startswith("model Qwen/Qwen3-8B: 8.19 B parameters")


def test_a_32b_that_does_not_fit_is_refused_and_each_hint_applied_fits():
    sets = "model.path=Qwen/Qwen2.5-32B train.offload=false"
    with pytest.raises(CheckError) as err:
        memory.check(spec_of(sets=sets, NODES="1", GPUS_PER_NODE="8", ACCELERATOR="A100-80GB"))
    text = str(err.value)
    assert text.splitlines()[0].startswith("check memory: the rollout after an update needs at least 114.7 GB "
                                           "on one A100-80GB (80.0 GB)")
    hints = text.splitlines()[-1].removeprefix("  to make it fit: ").split("; ")
    applied = 0
    for hint in hints:
        found = re.match(r"(NODES)=(\d+)|SET=(\S+)", hint)
        if not found:
            continue  # the notes that say what cannot help
        knobs = {"NODES": found.group(2)} if found.group(1) else {}
        extra = found.group(3) or ""
        spec = spec_of(sets=f"{sets} {extra}", **{"NODES": "1", "GPUS_PER_NODE": "8", "ACCELERATOR": "A100-80GB",
                                                   **knobs})
        assert memory.check(spec).startswith("memory bound: "), hint
        modelfacts.check(spec)  # and the heads rules accept it
        applied += 1
    assert applied >= 2, hints  # more nodes, a larger rollout tensor parallel or offload


def test_rollout_tensor_parallel_must_split_the_models_heads():
    # Qwen2.5-7B: 28 heads, 4 KV heads; a TP of 8 splits neither.
    with pytest.raises(ConfigError, match=r"rollout.tp=8: a divisor of the model's 28 attention heads"):
        modelfacts.check(spec_of(sets="rollout.tp=8", NODES="1", GPUS_PER_NODE="8"))
    # Qwen3-30B-A3B: 32 heads, 4 KV heads: TP 8 copies each KV head onto 2 GPUs, which vLLM does.
    modelfacts.check(spec_of(sets="model.path=Qwen/Qwen3-30B-A3B rollout.tp=8", NODES="1", GPUS_PER_NODE="8"))
    with pytest.raises(ConfigError, match=r"a divisor of the model's 28 attention heads \(Ulysses"):
        modelfacts.check(spec_of(sets='framework.overrides=["actor_rollout_ref.actor.ulysses_sequence_parallel_size=8"]',
                                 NODES="1", GPUS_PER_NODE="8"))


def test_facts_from_a_model_directory_and_from_a_facts_cache(tmp_path, monkeypatch):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text((modelfacts.ROOT / "tests/fixtures/models/Qwen--Qwen3-8B/main/config.json")
                                       .read_text())
    facts = modelfacts.read(str(model))
    assert facts.params == 8_190_735_360 and facts.source == f"{model}/config.json"
    cache = tmp_path / "cache" / "Org--Fresh" / "0123456789ab"
    cache.mkdir(parents=True)
    (cache / "config.json").write_text(json.dumps({**json.loads((model / "config.json").read_text()),
                                                   "num_hidden_layers": 2}))
    monkeypatch.setenv("RLAUNCH_MODEL_FACTS", str(tmp_path / "cache"))
    modelfacts.read.cache_clear()
    assert modelfacts.read("Org/Fresh", "0123456789abcdef0123456789abcdef01234567").layers == 2
    assert "not found" in modelfacts.read("Org/Fresh")  # main is another revision: not taken for it


def test_the_resources_line_names_the_catalogs_instance_and_the_clusters_price():
    line = skypilot.resources_line(spec_of(NODES="4", GPUS_PER_NODE="8"))
    # tests/fixtures/skypilot-catalog: a3-highgpu-8g 9.46006 + 8 x H100 33.60609 (us-central1) on demand;
    # spot, cheapest in one region: us-east4 2.0565 + 17.0328. Four nodes.
    assert line == ("4 x gcp a3-highgpu-8g (208 vCPUs, 1872 GiB; the cheapest of 1 for accelerators H100:8, cpus "
                    "16+, memory 128+): $172.26/h on demand, $76.36/h spot for the cluster")


def test_facts_from_the_hub_are_kept_so_the_next_plan_needs_no_network(tmp_path, monkeypatch):
    from fakehub import FakeHub, use_in_process

    commit = "c0ffee" * 6 + "c0ff"
    repo = tmp_path / "hub" / "models" / "Org" / "Eight" / commit
    repo.mkdir(parents=True)
    (repo / "config.json").write_text((modelfacts.ROOT / "tests/fixtures/models/Qwen--Qwen3-8B/main/config.json")
                                      .read_text())
    monkeypatch.setattr(modelfacts, "CACHE", tmp_path / "facts")
    with FakeHub(tmp_path / "hub") as hub:
        use_in_process(monkeypatch, hub.url)
        facts = modelfacts.read("Org/Eight")
    assert facts.params == 8_190_735_360 and facts.source == f"{hub.url}/Org/Eight/blob/main/config.json"
    assert (tmp_path / "facts" / "Org--Eight" / "main" / "config.json").is_file()
    modelfacts.read.cache_clear()
    assert modelfacts.read("Org/Eight").source == str(tmp_path / "facts" / "Org--Eight" / "main" / "config.json")


def test_an_architecture_rlaunch_does_not_count_is_not_guessed(tmp_path):
    # DeepSeek-V3's attention (MLA: q_lora_rank, kv_lora_rank) is not Llama's: its count would be wrong.
    model = tmp_path / "mla"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "hidden_size": 7168,
                                                   "num_hidden_layers": 61, "num_attention_heads": 128,
                                                   "vocab_size": 129280, "intermediate_size": 18432}))
    assert "model_type='deepseek_v3' is not an architecture rlaunch counts" in modelfacts.read(str(model))

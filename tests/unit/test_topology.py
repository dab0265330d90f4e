"""rlaunch's topology rules: a corpus of bad overrides and shapes, each one clear error naming the key.

These are the mistakes verl, AReaL and RLinf only report on GPUs (or never: a hang), caught from the
merged spec before anything is rendered."""

from __future__ import annotations

import pytest

from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.frameworks.areal.allocation import allocation_gpus
from rlaunch.frameworks.rlinf import placement as rlinf
from rlaunch.registry import frameworks

VERL_PPO, VERL_GRPO, VERL_32B = "verl-ppo-gsm8k-0.5b", "verl-grpo-math-7b", "verl-grpo-gsm8k-32b"
AREAL, RLINF = "areal-grpo-gsm8k", "rlinf-grpo-pipeline-1.5b"


def check(preset: str, sets: list[str] = (), **knobs) -> dict:
    spec = config.load(preset, knobs, list(sets))
    frameworks.get(spec.framework.name).check(spec)
    return spec


def fw_overrides(*items: str) -> str:
    # Each item quoted: a Hydra list value ("[console,wandb]") inside SET's YAML list.
    return "framework.overrides=[" + ",".join(f'"{i}"' for i in items) + "]"


# (preset, SET items, knobs, the key the error must name, a word the message must hold)
CORPUS = [
    (VERL_GRPO, ["algo.group_size=1"], {}, "algo.group_size", ">= 2"),
    # an override of a key rlaunch owns is that key's value (rlaunch.config.overrides): the rule names it
    (VERL_GRPO, [fw_overrides("actor_rollout_ref.rollout.n=1")], {}, "algo.group_size", ">= 2"),
    (VERL_PPO, ["train.batch_size=255"], {}, "train.batch_size", "divide evenly"),
    (VERL_PPO, ["train.mini_batch_size=512"], {}, "train.mini_batch_size", "<= the train batch"),
    (VERL_PPO, ["train.micro_batch_size_per_gpu=5"], {}, "train.micro_batch_size_per_gpu", "divisor"),
    (VERL_32B, ["rollout.tp=3"], {}, "rollout.tp", "divisor of cluster.gpus_per_node=4"),
    (VERL_PPO, ["cluster.cpus_per_node=4"], {}, "cluster.cpus_per_node", "TransferQueue"),
    (VERL_PPO, [fw_overrides("trainer.default_local_dir=checkpoints")], {},
     "framework.overrides[trainer.default_local_dir]", "set storage.mount instead"),
    (VERL_PPO, [fw_overrides("trainer.default_local_dir=/tmp/ckpt")], {},
     "framework.overrides[trainer.default_local_dir]", "storage.mount"),
    (VERL_PPO, ["rollout.backend=hf"], {}, "rollout.backend", "vllm, sglang"),
    (VERL_PPO, ["cluster.gpus_per_node=0"], {}, "cluster.gpus_per_node", "GPUs only"),
    (VERL_PPO, [fw_overrides("trainer.nnodes=1")], {"NODES": "2"}, "framework.overrides[trainer.nnodes]",
     "cluster.nodes=2 (from NODES) says otherwise"),
    (VERL_PPO, [fw_overrides("data.train_files=/elsewhere/train.parquet")], {},
     "framework.overrides[data.train_files]", "storage.mount"),
    (VERL_PPO, [fw_overrides("data.train_files=[/storage/train.parquet,/elsewhere/more.parquet]")], {"INFRA": "gcp"},
     "framework.overrides[data.train_files]", "'/elsewhere/more.parquet'"),  # each file of a list
    (RLINF, [fw_overrides("cluster.component_placement.actor=2-5")], {},
     "cluster.component_placement.actor", "resource ranks 0-3"),
    (RLINF, [fw_overrides("cluster.component_placement.inference=2")], {},
     "cluster.component_placement.actor", "both on resource rank 2"),
    (RLINF, ["train.save_freq=3"], {}, "train.save_freq", "divisor of runner.max_steps=2"),
    (RLINF, [fw_overrides("runner.logger.logger_backends=[wandb]")], {},
     "framework.overrides[runner.logger.logger_backends]", "tensorboard"),
    (RLINF, ["cluster.gpus_per_node=3"], {}, "cluster.gpus_per_node", "multiple of 4"),
    (RLINF, ["train.micro_batch_size_per_gpu=3"], {}, "train.micro_batch_size_per_gpu", "2 actor GPUs"),
    (RLINF, [fw_overrides("runner.output_dir=/elsewhere")], {}, "framework.overrides[runner.output_dir]",
     "storage.mount"),
    (RLINF, [fw_overrides("cluster.num_nodes=1")], {"NODES": "2"}, "framework.overrides[cluster.num_nodes]",
     "says otherwise"),
    (AREAL, [fw_overrides("rollout.backend=sglang:d4")], {}, "framework.overrides[rollout.backend]",
     "fit the 2 GPUs"),
    (AREAL, [fw_overrides("cluster.fileroot=/tmp/areal")], {}, "framework.overrides[cluster.fileroot]",
     "storage.mount"),
    (AREAL, [fw_overrides("scheduler.type=local")], {"NODES": "2", "GPUS_PER_NODE": "8"},
     "framework.overrides[scheduler.type]", "ray"),
    (AREAL, [fw_overrides("actor.backend=fsdp.d1")], {}, "framework.overrides[actor.backend]", "colon"),
    (AREAL, [fw_overrides("rollout.backend=trtllm:d1")], {}, "framework.overrides[rollout.backend]",
     "sglang, vllm"),
    (AREAL, ["algo.group_size=1"], {}, "algo.group_size", ">= 2"),
    (AREAL, ["data.dataset=math"], {}, "data.dataset", "gsm8k"),
]


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 15
    assert {c[0] for c in CORPUS} >= {VERL_PPO, VERL_GRPO, AREAL, RLINF}


@pytest.mark.parametrize("preset,sets,knobs,key,word", CORPUS,
                         ids=[f"{c[0]}:{c[3]}:{i}" for i, c in enumerate(CORPUS)])
def test_each_bad_topology_names_its_key(preset, sets, knobs, key, word):
    with pytest.raises(ConfigError) as err:
        check(preset, sets, **knobs)
    assert err.value.key == key, str(err.value)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"config: {key}=")
    assert word in text


@pytest.mark.parametrize("preset", [VERL_PPO, VERL_GRPO, VERL_32B, AREAL, RLINF])
def test_every_preset_passes_its_own_checks(preset):
    check(preset)


@pytest.mark.parametrize("knobs", [{"NODES": "2", "GPUS_PER_NODE": "8"}, {"NODES": "4", "GPUS_PER_NODE": "2"}])
def test_areal_scales_with_the_cluster(knobs):
    check(AREAL, [], **knobs)


def test_rlinf_collocation_on_purpose_is_allowed():
    # Written through the API: a comma key cannot travel inside SET's whitespace-split words.
    spec = config.load(RLINF)
    rlinf.placement(spec, {"actor,rollout": "0-3", "reward": "0"})
    with pytest.raises(ConfigError, match="both on resource rank 0"):
        rlinf.placement(spec, {"actor": "0-3", "rollout": "0"})


def test_parse_ranks_and_allocations():
    assert rlinf.parse_ranks("k", "0-1,4") == [0, 1, 4]
    assert rlinf.parse_ranks("k", 3) == [3]
    with pytest.raises(ConfigError):
        rlinf.parse_ranks("k", "3-1")
    assert allocation_gpus("k", "sglang:d8") == 8
    assert allocation_gpus("k", "fsdp:d4p1t2") == 8
    with pytest.raises(ConfigError, match="colons"):
        allocation_gpus("k", "sglang.d4")


def test_default_placement_scales_seed_003():
    spec = config.load(RLINF)
    assert rlinf.default_placement(spec) == {"rollout": "0", "inference": "1", "actor": "2-3", "reward": "0"}
    spec = config.load(RLINF, {"GPUS_PER_NODE": "4"})
    assert rlinf.default_placement(spec) == {"rollout": "0-1", "inference": "2-3", "actor": "4-7",
                                                "reward": "0-1"}

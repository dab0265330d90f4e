"""The AReaL adapter: one node runs the local scheduler, several the Ray scheduler, on a YAML it renders."""

from __future__ import annotations

import pytest
import yaml

from rlaunch.plan import jobenv
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.frameworks.areal import adapter as areal
from rlaunch.registry import frameworks


def render(sets: list[str] = (), **knobs):
    spec = config.load("areal-grpo-gsm8k", knobs, list(sets))
    fw = frameworks.get("areal")
    fw.check(spec)
    return spec, fw, fw.command(spec), yaml.safe_load(fw.files(spec)["areal.yaml"])


def test_one_node_is_seed_000_single_node():
    spec, _, argv, cfg = render()
    assert argv[:4] == ["python3", "/AReaL/examples/math/gsm8k_rl.py", "--config", "${RLAUNCH_ARTIFACTS}/areal.yaml"]
    for word in ("scheduler.type=local", "cluster.n_nodes=1", "cluster.n_gpus_per_node=2",
                 "rollout.backend=sglang:d1", "actor.backend=fsdp:d1"):
        assert word in argv
    assert cfg["cluster"]["name_resolve"]["type"] == "nfs"


def test_two_nodes_use_the_ray_scheduler_in_the_accepted_form():
    spec, _, argv, cfg = render(NODES="2", GPUS_PER_NODE="8")
    assert "scheduler.type=ray" in argv and "+scheduler.type=ray" not in argv
    assert "scheduler" in cfg  # the section exists, so a plain override is accepted
    assert {"rollout.backend=sglang:d8", "actor.backend=fsdp:d8", "cluster.name_resolve.type=ray"} <= set(argv)
    assert cfg["cluster"]["name_resolve"] == {"type": "ray", "ray_actor_name": "ray_kv_store"}


def test_fileroot_and_outputs_under_the_mount():
    spec, _, _, cfg = render()
    assert cfg["cluster"]["fileroot"] == spec.paths.run_dir
    assert cfg["stats_logger"]["tensorboard"]["path"].startswith(spec.storage.mount + "/")
    assert (cfg["experiment_name"], cfg["trial_name"]) == (spec.run.name, spec.run.id)
    assert cfg["actor"]["path"] == spec.paths.model_dir
    assert "gsm8k" in cfg["train_dataset"]["path"]  # AReaL picks its GSM8K loader by that name


def test_spec_values_reach_the_experiment():
    _, _, _, cfg = render(["algo.group_size=8", "train.batch_size=16", "train.mini_batch_size=4"])
    assert cfg["gconfig"]["n_samples"] == 8
    assert cfg["train_dataset"]["batch_size"] == 16
    assert cfg["actor"]["ppo_n_minibatches"] == 4


def test_env_and_setup():
    spec, fw, _, _ = render()
    env = jobenv.job_env(spec)
    assert env["USER"] and env["NCCL_IB_DISABLE"] == "1"
    assert "--snapshot" in fw.setup(spec)[0]


def test_tokens_per_micro_batch_come_from_the_config_and_must_hold_a_sequence():
    spec = config.load("areal-grpo-gsm8k", {"RUN_ID": "t", "INFRA": "gcp"})
    assert areal.ADAPTER.experiment(spec)["actor"]["mb_spec"]["max_tokens_per_mb"] == 4096  # seed 000, 2 GPUs
    spec = config.load("areal-grpo-gsm8k", {"RUN_ID": "t", "INFRA": "gcp"}, "train.max_tokens_per_mb=0")
    assert areal.ADAPTER.experiment(spec)["actor"]["mb_spec"]["max_tokens_per_mb"] == 10240  # gsm8k_grpo.yaml
    with pytest.raises(ConfigError, match=r"train.max_tokens_per_mb=1024.*= 2048"):  # the rule, at load
        config.load("areal-grpo-gsm8k", {"RUN_ID": "t", "INFRA": "gcp"}, "train.max_tokens_per_mb=1024")

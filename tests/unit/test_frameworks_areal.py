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


STAND_IN = {  # CODE's own areal: what the loader must answer with instead of .venv-areal's
    "areal/__init__.py": "",
    "areal/api/__init__.py": "",
    "areal/api/alloc_mode.py": "class ModelAllocation:\n    @staticmethod\n    def from_str(value):\n"
                               "        return value\n",
    "areal/api/cli_args.py": (
        "from types import SimpleNamespace as N\n\n\nclass GRPOConfig:\n    pass\n\n\n"
        "def load_expr_config(argv, cls):\n    teacher = open(argv[1]).read().split()[-1]\n"
        "    return N(scheduler=N(type='local'), cluster=N(n_nodes=1, n_gpus_per_node=8), rollout=N(backend='vllm:d1'),"
        " actor=N(backend=teacher), gconfig=N(n_samples=4)), None\n"),
    "examples/math/gsm8k_rl.py": "from areal.api.cli_args import GRPOConfig, load_expr_config\n"
                                 "load_expr_config([], GRPOConfig)\n",
    "examples/distillation/gsm8k_grpo_distill.yaml": "teacher:\n  backend: fsdp:d1p1t4\n",
}


def test_the_loader_answers_with_codes_own_areal_when_code_is_an_areal_checkout(tmp_path):
    """PyPI's areal 1.0.4 (.venv-areal) is areal-project/AReaL's a0f3dca20, not tag v1.0.4, and refuses
    v1.0.4's distillation YAML; the nodes run CODE's areal, so CODE's loader answers (stand-in here)."""
    import sys

    from rlaunch.frameworks.areal import loader

    for rel, text in STAND_IN.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    request = {"script": str(tmp_path / "examples/math/gsm8k_rl.py"), "code_root": str(tmp_path), "overrides": [],
               "config_path": str(tmp_path / "examples/distillation/gsm8k_grpo_distill.yaml")}
    try:
        got = loader.answer(request, str(tmp_path / "tmp"))
        assert got["ok"] and "actor fsdp:d1p1t4" in got["summary"] and "(CODE's areal)" in got["summary"], got
        assert sys.modules["areal"].__file__.startswith(str(tmp_path))
        loader._areal_of("")  # a request without CODE's areal: CODE's modules leave, the installed one answers
        assert str(tmp_path) not in sys.path and not any(m.split(".")[0] == "areal" for m in sys.modules)
    finally:
        loader._areal_of("")

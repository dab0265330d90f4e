"""The verl adapter: the spec becomes the exact main_ppo overrides, env and data setup."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from needs import missing
from rlaunch import ROOT
from rlaunch.frameworks.verl import genvalues, values
from rlaunch.plan import jobenv
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.registry import frameworks


def render(preset: str, sets: list[str] = (), **knobs):
    spec = config.load(preset, knobs, list(sets))
    fw = frameworks.get("verl")
    fw.check(spec)
    argv = fw.command(spec)
    return spec, fw, argv, dict(a.split("=", 1) for a in argv[3:])


def test_grpo_is_a_group_with_no_critic():
    spec, _, argv, o = render("verl-grpo-math-7b")
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert o["algorithm.adv_estimator"] == "grpo"
    assert o["actor_rollout_ref.rollout.n"] == "8"  # seed 001 had n=1: not GRPO
    assert not any(k.startswith("critic.") for k in o)
    assert o["trainer.critic_warmup"] == "0"


def test_ppo_has_gae_and_a_critic_on_the_pinned_model():
    spec, _, _, o = render("verl-ppo-gsm8k-0.5b")
    assert o["algorithm.adv_estimator"] == "gae"
    assert o["critic.model.path"] == o["actor_rollout_ref.model.path"] == spec.paths.model_dir
    assert o["critic.optim.lr"] == "1e-05"


def _ppo(overrides: list[str], sets: str = "") -> tuple:
    items = [*sets.split(), f"framework.overrides={json.dumps(overrides)}"]
    spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "gcp", "RUN_ID": "critic1"}, items)
    return spec, [a for a in frameworks.get("verl").command(spec) if a.startswith("critic.model.path=")]


def test_a_critic_on_the_actors_model_is_accepted_and_rendered_once(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # verl v0.9.0's examples/ppo_trainer: critic.model.path names the actor's model, as a hub id
    spec, _ = _ppo([])
    hub_id = spec.pins.model["hf_id"]
    for name in (hub_id, f"{hub_id}@{spec.pins.model['revision']}", spec.paths.model, spec.paths.model + "/"):
        spec, critic = _ppo([f"critic.model.path={name}"])
        assert critic == [f"critic.model.path={spec.paths.model}"], name  # the prepared directory
    # the seeds' own directory on the storage, and another hub id, each given to both
    spec, critic = _ppo(["critic.model.path=/storage/Qwen2.5-0.5B-Instruct"],
                        "storage.mount=/storage model.path=/storage/Qwen2.5-0.5B-Instruct")
    assert critic == ["critic.model.path=/storage/Qwen2.5-0.5B-Instruct"]
    spec, critic = _ppo(["actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct",
                         "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct"])
    assert critic == [f"critic.model.path={spec.paths.model}"] and "1.5B" in spec.paths.model


def test_a_critic_on_another_model_is_refused_and_the_hint_plans(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"critic.model.path\].*the actor's model .*Remove this override"):
        _ppo(["critic.model.path=Qwen/Qwen2.5-1.5B-Instruct"])
    spec, critic = _ppo([])  # the hint applied
    assert critic == [f"critic.model.path={spec.paths.model}"]


def test_a_critic_model_is_refused_only_where_verl_trains_a_critic(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    other = "critic.model.path=Qwen/Qwen2.5-1.5B-Instruct"
    grpo = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "critic2"},
                       [f'framework.overrides=["{other}"]'])  # no critic (verl's need_critic): unused, passed on
    assert other in frameworks.get("verl").command(grpo)
    with pytest.raises(ConfigError, match="the actor's model"):
        config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "critic2"},
                    [f'framework.overrides=["{other}", "critic.enable=True"]'])
    with pytest.raises(ConfigError, match="the actor's model"):
        _ppo([other, "critic.enable=null"])


def test_offload_flags_follow_train_offload():
    _, _, _, on = render("verl-grpo-math-7b")
    _, _, _, off = render("verl-grpo-math-7b", ["train.offload=false"])
    flags = ["actor_rollout_ref.actor.fsdp_config.param_offload", "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
             "actor_rollout_ref.model.enable_gradient_checkpointing", "actor_rollout_ref.rollout.enable_chunked_prefill",
             "actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.ref.fsdp_config.param_offload"]
    assert all(on[f] == "True" for f in flags)
    assert not any(f in off for f in flags)


def test_topology_is_literal_and_storage_is_shared():
    spec, _, _, o = render("verl-ppo-gsm8k-0.5b", NODES="4", GPUS_PER_NODE="2")
    assert (o["trainer.nnodes"], o["trainer.n_gpus_per_node"]) == ("4", "2")
    ckpt = o["trainer.default_local_dir"]
    assert ckpt == spec.paths.ckpt_dir and ckpt.startswith(spec.storage.mount + "/")
    assert o["data.train_files"] == f"{spec.paths.data_dir}/train.parquet"
    assert o["hydra.run.dir"] == f"{spec.paths.run_dir}/hydra"


def test_file_logger_always_wandb_only_when_asked():
    spec, fw, _, o = render("verl-ppo-gsm8k-0.5b")
    assert o["trainer.logger"] == "[console,file]"
    assert fw.env(spec)["VERL_FILE_LOGGER_PATH"] == f"{spec.paths.log_dir}/metrics.jsonl"
    _, _, _, o = render("verl-ppo-gsm8k-0.5b", ["logging.wandb=true"])
    assert o["trainer.logger"] == "[console,file,wandb]"


def test_every_start_resumes_and_rdma_keeps_infiniband():
    # A RayJob retry or RESUME=1 restarts a run as a managed-job recovery does: all resume.
    spec, fw, _, o = render("verl-ppo-gsm8k-0.5b")
    assert o["trainer.resume_mode"] == "auto" and jobenv.job_env(spec)["NCCL_IB_DISABLE"] == "1"
    spec, fw, _, o = render("verl-ppo-gsm8k-0.5b", SPOT="1", RDMA="1")
    assert o["trainer.resume_mode"] == "auto" and "NCCL_IB_DISABLE" not in jobenv.job_env(spec)


def test_rollout_named_and_user_overrides_last():
    _, _, argv, o = render("verl-grpo-gsm8k-32b")
    assert o["actor_rollout_ref.rollout.name"] == "vllm"
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "4"
    assert argv[-1] == "actor_rollout_ref.actor.strategy=fsdp2"


def test_setup_prepares_once(tmp_path):
    """The setup line keeps a data dir whose SHA256SUMS verifies (no download); a changed file is
    prepared again."""
    spec, fw, _, _ = render("verl-ppo-gsm8k-0.5b", [f"storage.mount={tmp_path}"])
    data = Path(spec.paths.data_dir)
    assert data.parent == tmp_path / "data" / "gsm8k"  # one directory per pinned revision
    data.mkdir(parents=True)
    (data / "train.parquet").write_text("x")
    subprocess.run(["bash", "-c", "cd \"$1\" && sha256sum train.parquet > SHA256SUMS", "_", str(data)], check=True)
    # The python the line runs: the check for real, a download recorded and failed.
    calls, stub = tmp_path / "calls", tmp_path / "python"
    stub.write_text(f'#!/bin/bash\necho "$*" >> {calls}\n[[ "$3" == --check=* ]] && exec {sys.executable} "$@"\nexit 1\n')
    stub.chmod(0o755)
    env = {"RLAUNCH_PYTHON": str(stub), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "tools")}
    line = fw.setup(spec)[0]
    done = subprocess.run(["bash", "-c", line], env=env)
    assert done.returncode == 0 and "--dataset" not in calls.read_text()
    (data / "train.parquet").write_text("changed")
    redo = subprocess.run(["bash", "-c", line], env=env)
    assert redo.returncode != 0 and "--dataset=gsm8k" in calls.read_text()  # a changed file is prepared again
    assert f"{data}/train.parquet" in fw.inputs(spec)


def test_install_on_the_official_base_image_only_and_at_the_pin():
    from rlaunch.config import load as config
    from rlaunch.config import pins
    from rlaunch.plan import imagecheck

    official = config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t-inst", "INFRA": "gcp"})
    lines = imagecheck.install_lines(official)
    version = pins.get_str("frameworks.verl.version")
    # the requirement the plan's image check resolves: verl with the rollout engine's extra, and Ray's pin
    assert f"verl[verl-core,vllm]=={version}" in " ".join(lines)
    assert f"ray[default]=={pins.get_str('ray')}" in " ".join(lines)
    assert imagecheck.install_lines(config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t-inst", "INFRA": "gcp"},
                                    "framework.image=rlaunch")) == []


def test_log_prob_micro_batches_default_to_the_actors_and_follow_the_config():
    spec = config.load("verl-grpo-gsm8k-32b", {"RUN_ID": "t", "INFRA": "kuberay"},
                       "train.log_prob_micro_batch_size_per_gpu=0 train.ref_log_prob_micro_batch_size_per_gpu=0")
    o = dict(x.split("=", 1) for x in frameworks.get("verl").overrides(spec))
    assert o["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] == "8" == \
        o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"]  # 0: the actor's micro-batch
    spec = config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t", "INFRA": "gcp"})
    o = dict(x.split("=", 1) for x in frameworks.get("verl").overrides(spec))
    assert (o["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"],
            o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"]) == ("8", "4")  # seeds 001/002


def test_verls_own_estimators_plan_and_another_is_refused():
    # gdpo: verl 0.9.1's, missing from rlaunch's own older list
    s = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "est1"},
                    ['framework.overrides=["algorithm.adv_estimator=gdpo"]'])
    assert "algorithm.adv_estimator=gdpo" in frameworks.get("verl").command(s)
    assert config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "est1"},
                       ["algo.adv_estimator=optimal_token_baseline"]).algo.adv_estimator == "optimal_token_baseline"
    with pytest.raises(ConfigError, match=r"algo\.adv_estimator='gdpoo'.*one of gae, grpo, .*gdpo"):
        config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "est1"}, ["algo.adv_estimator=gdpoo"])


def test_the_estimators_are_read_from_verls_registry_enum_members_and_strings():
    source = ("class AdvantageEstimator(str, Enum):\n    GAE = 'gae'\n    NEW = 'new_one'\n"
              "@register_adv_est(AdvantageEstimator.GAE)\ndef a(): pass\n"
              "@register_adv_est(\n    AdvantageEstimator.NEW\n)\ndef b(): pass\n"
              "@register_adv_est('plain')\ndef c(): pass\n@other('x')\ndef d(): pass\n")
    assert genvalues.registered_estimators(source) == ("gae", "new_one", "plain")


def test_the_estimators_are_the_pinned_verls_registry():
    from rlaunch.config import pins
    from rlaunch.validate import loaders

    venv = loaders.venv_python("verl").parents[1]
    try:
        packages = genvalues.site_packages(venv)
    except FileNotFoundError as err:
        missing(str(err))
    pinned = pins.get_str("frameworks.verl.version")
    assert genvalues.installed_version(packages) == pinned, "rebuild .venv-verl: make setup-validators"
    registry = genvalues.registered_estimators((packages / genvalues.CORE_ALGOS).read_text(encoding="utf-8"))
    # a difference: regenerate with `python -m rlaunch.frameworks.verl.genvalues --write`
    assert values.ADV_ESTIMATORS == registry
    assert f"# verl {pinned}," in Path(values.__file__).read_text(encoding="utf-8")

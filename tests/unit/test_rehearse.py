"""REHEARSE=1 (rlaunch.config.rehearse, rlaunch.frameworks.verl.cpu.rewrites, rlaunch.plan.rehearsal):
a verl preset keeps everything that is not a size, each change is listed with why, a launch it
cannot stand in for is refused naming the knob, and a reward function that raises stops the plan in
seconds, naming the function and the line. The run itself: tests/e2e/test_rehearse_verl.py."""

from __future__ import annotations

import time

import pytest

from rlaunch.config import load as config
from rlaunch.errors import CheckError, ConfigError
from rlaunch.config import topology
from rlaunch.frameworks.verl.cpu import plan as rehearsal
from needs import missing
from rlaunch.registry import frameworks

PRESET = "verl-grpo-math-7b"


def spec_of(*sets: str, preset: str = PRESET, **knobs: str):
    return config.load(preset, {"REHEARSE": "1", **knobs}, list(sets))


def command(spec) -> list[str]:
    return frameworks.get("verl").command(spec)


def rewrites(spec) -> dict:
    return {r.key: r for r in rehearsal.rewrites(spec, frameworks.get("verl")._overrides(spec))}


def test_a_verl_preset_becomes_two_cpu_nodes_and_a_tiny_model_and_keeps_its_experiment():
    real, spec = config.load(PRESET, {}, []), spec_of()
    assert (spec.infra.name, spec.cluster.nodes, spec.cluster.gpus_per_node) == ("local", 2, 0)
    assert topology.total_gpus(spec) == 2  # one declared Ray GPU per node: verl's placement
    assert spec.model.path.endswith("/rehearsal/verl-cpu-1/model")
    assert spec.data.path.endswith("/rehearsal/verl-cpu-1/math")
    # Not sizes, so not changed: the algorithm, the dataset and its reward source, the checkpoint wiring.
    for key in ("algo", "logging"):
        assert getattr(spec, key) == getattr(real, key)
    assert spec.data.dataset == real.data.dataset
    assert spec.pins.dataset == real.pins.dataset
    argv = command(spec)
    for kept in ("algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=8", "trainer.resume_mode=auto",
                 "trainer.logger=[console,file]", "data.truncation=error"):
        assert kept in argv
    assert "trainer.n_gpus_per_node=1" in argv and "trainer.n_gpus_per_node=0" not in argv
    assert "actor_rollout_ref.actor.strategy=fsdp2" in argv and "trainer.device=cpu" in argv
    assert "trainer.total_training_steps=3" in argv and "trainer.save_freq=1" in argv


def test_every_rewrite_is_in_the_plan_with_its_reason_and_the_value_it_replaced():
    spec = spec_of()
    found = rewrites(spec)
    assert found["train.batch_size"].was == 32 and found["train.batch_size"].value == 4
    assert found["cluster.gpus_per_node"].was == 1
    assert found["model.path"].why.endswith("in place of qwen2.5-7b-instruct")
    assert found["framework.overrides[actor_rollout_ref.actor.strategy]"].was is None
    assert all(r.why for r in found.values())
    text = "\n".join(frameworks.get("verl").rehearsal_lines(spec))
    assert "framework.overrides[actor_rollout_ref.rollout.enable_sleep_mode]: unset -> 'False'" in text
    assert "not rehearsed: GPU kernels, GPU memory (OOM), FSDP1, flash-attn" in text
    assert frameworks.get("verl").rehearsal_lines(config.load(PRESET, {}, [])) == []  # a real launch has none


def test_the_users_own_overrides_stay_unless_the_cpu_needs_them_otherwise_and_then_the_plan_says_so():
    spec = spec_of("framework.overrides=[actor_rollout_ref.actor.strategy=fsdp,"
                   "algorithm.norm_adv_by_std_in_grpo=False]")
    argv = command(spec)
    assert "algorithm.norm_adv_by_std_in_grpo=False" in argv
    assert [a for a in argv if a.startswith("actor_rollout_ref.actor.strategy=")] == \
        ["actor_rollout_ref.actor.strategy=fsdp2"]
    found = rewrites(spec)
    assert found["framework.overrides[actor_rollout_ref.actor.strategy]"].was == "fsdp"


def test_the_sizes_a_user_set_are_replaced_and_listed():
    spec = spec_of("train.batch_size=64", "data.max_response_length=1024")
    assert (spec.train.batch_size, spec.data.max_response_length) == (4, 8)
    found = rewrites(spec)
    assert found["train.batch_size"].was == 64 and found["data.max_response_length"].was == 1024


@pytest.mark.parametrize("knobs, sets, key, allowed", [
    ({"INFRA": "gcp"}, [], "INFRA", "local, or none (REHEARSE=1 runs on this machine"),
    ({}, ["infra.name=kuberay"], "infra.name", "launch INFRA=kuberay without REHEARSE"),
    ({"FRAMEWORK": "trl"}, [], "REHEARSE", "the trl presets are CPU rehearsals already"),
    ({"FRAMEWORK": "areal"}, [], "REHEARSE", "AReaL's CPU rehearsal is not built yet"),
])
def test_a_launch_the_rehearsal_cannot_stand_in_for_is_refused_naming_the_knob(knobs, sets, key, allowed):
    with pytest.raises(ConfigError) as err:
        spec_of(*sets, **knobs)
    assert err.value.key == key and allowed in err.value.allowed


def test_a_bad_rehearse_value_names_the_key():
    with pytest.raises(ConfigError) as err:
        config.load(PRESET, {"REHEARSE": "maybe"}, [])
    assert err.value.key == "train.rehearse"


def test_the_job_makes_the_tiny_inputs_before_preflight_and_a_real_launch_does_not():
    from rlaunch.plan import artifacts

    job = artifacts.common(spec_of())["job.sh"]
    prepare = job.index("-m rlaunch.frameworks.verl.cpu.prepare --model=")
    assert prepare < job.index("--adopt=") < job.index("rlaunch.verify.preflight")
    assert "verl_hooks" in job  # VERL_USE_EXTERNAL_MODULES in the job's env
    gpu_job = artifacts.common(config.load(PRESET, {"INFRA": "gcp"}, []))["job.sh"]
    assert "rlaunch.frameworks.verl.cpu" not in gpu_job


def test_a_top_level_custom_reward_function_is_refused_with_the_key_verl_reads():
    # verl 0.9.1's main_ppo reads reward.custom_reward_function only: the rehearsal found the
    # top-level key ignored (verl's default reward scored the rows: NotImplementedError for their source).
    with pytest.raises(ConfigError) as err:
        config.load(PRESET, {"INFRA": "gcp"}, ["framework.overrides=[custom_reward_function.path=/storage/r.py]"])
    assert err.value.key == "framework.overrides[custom_reward_function.path]"
    assert err.value.allowed.startswith("reward.custom_reward_function.path: ")
    fixed = config.load(PRESET, {"INFRA": "gcp"}, ["framework.overrides=[reward.custom_reward_function.path=/storage/r.py]"])
    assert "reward.custom_reward_function.path=/storage/r.py" in command(fixed)


# ---------------------------------------------------------------- the reward check (.venv-verlcpu)

def _venv():
    if not rehearsal.venv_python().exists():
        missing(f".venv-verlcpu missing: run `make setup-verlcpu` ({rehearsal.venv_python()})")


def test_a_reward_function_that_raises_stops_the_plan_in_seconds_naming_it_and_its_line(tmp_path):
    _venv()
    reward = tmp_path / "my_reward.py"
    reward.write_text("import math\n\n\ndef my_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                      "    answer = solution_str.split('boxed{')[1]\n"
                      "    return float(answer[0] == ground_truth)\n")
    spec = spec_of(f"framework.overrides=[reward.custom_reward_function.path={reward},"
                   "reward.custom_reward_function.name=my_score]")
    started = time.monotonic()
    with pytest.raises(CheckError) as err:
        rehearsal.check(spec)
    took = time.monotonic() - started
    print(f"reward check: failed in {took:.1f} s")
    text = str(err.value)
    assert f"my_score ({reward}) raised IndexError" in text
    assert f"at {reward}:5 in my_score: answer = solution_str.split('boxed{{')[1]" in text
    assert took < 120


def test_a_reward_function_that_loads_and_scores_gets_a_line_in_the_plan(tmp_path):
    _venv()
    reward = tmp_path / "ok.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                      "    return {'score': float(ground_truth in solution_str), 'acc': True}\n")
    spec = spec_of(f"framework.overrides=[reward.custom_reward_function.path={reward}]")
    [line] = rehearsal.check(spec)
    assert line.startswith(f"reward: compute_score ({reward}) answered 8 calls")
    assert "right answers [1.0, 1.0, 1.0, 1.0], wrong [0.0, 0.0, 0.0, 0.0]" in line
    [default] = rehearsal.check(spec_of())
    assert "verl's default_compute_score for data_source DigitalLearningGmbH/MATH-lighteval" in default
    assert "right answers [1.0, 1.0, 1.0, 1.0]" in default  # verl's MATH reward, on the MATH-format rows


def test_a_ppo_preset_rehearses_its_critic_on_cpu_too_with_micro_batches_that_divide():
    spec = spec_of(preset="verl-ppo-gsm8k-0.5b")
    argv = command(spec)
    for needed in ("critic.strategy=fsdp2", "critic.model.use_remove_padding=False",
                   "+critic.model.override_config.attn_implementation=sdpa", "algorithm.adv_estimator=gae"):
        assert needed in argv
    # 4 prompts x n=1 over 2 GPUs: 2 per GPU, so micro-batches of 2 (GRPO's n=8 gives 4).
    assert spec.train.micro_batch_size_per_gpu == 2 and spec_of().train.micro_batch_size_per_gpu == 4
    assert spec.data.path.endswith("/rehearsal/verl-cpu-1/gsm8k")
    assert "critic.strategy=fsdp2" not in command(spec_of())  # GRPO has no critic


def test_the_rollout_is_vllm_cpu_whatever_the_preset_serves_with():
    spec = spec_of(preset="verl-grpo-math-7b", **{"FRAMEWORK": "verl"})
    assert spec.rollout.backend == "vllm"
    sglang = spec_of("rollout.backend=sglang")
    assert sglang.rollout.backend == "vllm"
    assert rewrites(sglang)["rollout.backend"].was == "sglang"


def test_the_reward_check_calls_the_function_as_verl_does_keywords_async_and_reward_kwargs(tmp_path):
    # verl's reward loop calls compute_score(data_source=..., solution_str=..., ...) with the
    # config's reward_kwargs, and awaits a coroutine function: a valid reward must pass the check.
    _venv()
    reward = tmp_path / "kw.py"
    reward.write_text("async def scored(**kw):\n"
                      "    return float(kw['ground_truth'] in kw['solution_str']) * kw['scale']\n")
    spec = spec_of(f"framework.overrides=[reward.custom_reward_function.path={reward},"
                   "reward.custom_reward_function.name=scored,+reward.custom_reward_function.reward_kwargs.scale=2]")
    [line] = rehearsal.check(spec)
    assert "right answers [2.0, 2.0, 2.0, 2.0], wrong [0.0, 0.0, 0.0, 0.0]" in line

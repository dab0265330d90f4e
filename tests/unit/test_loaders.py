"""The frameworks' own config loaders at the pinned versions, in the validator environments.

Needs `make setup-validators` (CI builds them); without an environment the tests of that framework
skip, saying so, and loader_check answers "skipped: ..." instead of a pass. One loader process per
framework answers all of a test module's requests (AReaL's imports alone take ~10 s)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rlaunch.config import load as config
from rlaunch.errors import CheckError
from rlaunch.registry import frameworks
from rlaunch.validate import loaders
from needs import missing
from test_cmd import RLINF

NEED = "validator env missing: run `make setup-validators` ({})"


def need(framework: str):
    if not loaders.available(framework):
        missing(NEED.format(loaders.venv_python(framework)))


def spec_of(preset: str, sets: list[str] = (), **knobs) -> dict:
    return config.load(preset, knobs, list(sets))


CODE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"


def cmd_request(tmp_path_factory, name: str, cmd: str, **knobs) -> dict:
    """The loader request of CMD= with the fixture CODE tests/fixtures/code/<name> (copied out of git)."""
    root = tmp_path_factory.mktemp("code") / name
    shutil.copytree(CODE_FIXTURES / name, root)
    spec = config.load("", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(root), "CMD": cmd, **knobs})
    return frameworks.get(spec.framework.name).loader_request(spec)


def test_missing_env_is_skipped_never_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path))
    spec = spec_of("verl-ppo-gsm8k-0.5b")
    line = frameworks.get("verl").loader_check(spec, {})
    assert "skipped: run `make setup-validators`" in line and "accepted" not in line


# --- verl ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def verl_results(tmp_path_factory):
    need("verl")
    fw = frameworks.get("verl")
    recipe = cmd_request(tmp_path_factory, "verl", "python3 -m verl.experimental.one_step_off_policy.main_ppo "
                         "--config-path recipe/one_step/config --config-name one_step_trainer")
    good = [fw.loader_request(spec_of(p)) for p in ("verl-ppo-gsm8k-0.5b", "verl-grpo-math-7b",
                                                     "verl-grpo-gsm8k-32b")]
    typo = fw.loader_request(spec_of("verl-ppo-gsm8k-0.5b",
                                     ['framework.overrides=["actor_rollout_ref.rollout.nme=vllm"]']))
    unnamed = {"overrides": [o for o in good[0]["overrides"] if "rollout.name=" not in o],
               "required": good[0]["required"]}
    own = [fw.loader_request(spec_of("", RUN_ID="t", INFRA="gcp", CMD=f"python3 -m verl.experimental.{entry} "
                                     "trainer.n_gpus_per_node=4 rollout.n_gpus_per_node=4 " + extra))
           for entry, extra in (("fully_async_policy.fully_async_main", "async_training.require_batches=2"),
                                ("one_step_off_policy.main_ppo", ""))]
    return loaders.run("verl", good + [typo, unnamed, recipe, {**recipe, "config_name": "nope"}] + own)


def test_a_loader_writes_its_bytecode_despite_the_users_setting(monkeypatch):
    """Recompiling AReaL's imports on each plan doubled its loader's CPU: the validator venvs keep bytecode."""
    need("verl")
    import importlib.util

    cached = Path(importlib.util.cache_from_source(str(loaders.script("verl"))))
    cached.unlink(missing_ok=True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    [result] = loaders._spawn("verl", [frameworks.get("verl").loader_request(spec_of("verl-ppo-gsm8k-0.5b"))])
    assert result["ok"] and cached.exists()


def test_verl_presets_compose(verl_results):
    for res in verl_results[:3]:
        assert res["ok"], res
        assert "verl 0.9.1" in res["loader"]


def test_verl_unknown_key_named(verl_results):
    res = verl_results[3]
    assert not res["ok"] and res["key"] == "actor_rollout_ref.rollout.nme"
    with pytest.raises(CheckError, match="key actor_rollout_ref.rollout.nme"):
        loaders.result_line("verl", res)


def test_verl_rollout_name_is_mandatory(verl_results):
    assert verl_results[4]["key"] == "actor_rollout_ref.rollout.name"


def test_verl_composes_the_config_cmd_names_from_code(verl_results):
    """A recipe's --config-path/--config-name: its config (verl's ppo_trainer through its searchpath,
    its own keys on top) is what composes, not main_ppo's."""
    assert verl_results[5]["ok"], verl_results[5]
    assert not verl_results[6]["ok"] and verl_results[6]["key"] == "--config-name"


def test_verls_own_entries_compose_their_own_config_without_a_checkout(verl_results):
    """No CODE: fully_async_main's fully_async_ppo_trainer (async_training.*) composes from the pinned verl;
    one-step-off's reads `file://verl/trainer/config` from the working directory, which only a checkout
    (CODE) gives: refused, naming CODE."""
    assert verl_results[7]["ok"] and verl_results[7]["summary"].startswith("fully_async_ppo_trainer: 1x4"), verl_results[7]
    assert not verl_results[8]["ok"] and verl_results[8]["key"] == "code.dir", verl_results[8]
    assert "file://verl/trainer/config" in verl_results[8]["error"] and "set CODE= to a verl checkout" in verl_results[8]["error"]


# --- AReaL ---------------------------------------------------------------------------------------

def seed_ray_yaml(spec: dict) -> str:
    """Seed 000's examples/skypilot/gsm8k_grpo_ray.yaml shape: no `scheduler` section at all."""
    cfg = frameworks.get("areal").experiment(spec)
    del cfg["scheduler"]
    return yaml.safe_dump(cfg, sort_keys=False)


@pytest.fixture(scope="module")
def areal_results(tmp_path_factory):
    need("areal")
    fw = frameworks.get("areal")
    one, two = spec_of("areal-grpo-gsm8k"), spec_of("areal-grpo-gsm8k", NODES="2", GPUS_PER_NODE="8")
    seed_cli = ["scheduler.type=ray", "experiment_name=gsm8k-grpo", "trial_name=trial0", "cluster.n_nodes=2",
                "cluster.n_gpus_per_node=8", "rollout.backend=sglang:d8", "actor.backend=fsdp:d8"]
    requests = [
        fw.loader_request(one),
        fw.loader_request(two),
        {"config_text": seed_ray_yaml(two), "overrides": seed_cli},                       # the seed's form
        {"config_text": seed_ray_yaml(two), "overrides": ["+" + seed_cli[0], *seed_cli[1:]]},
        {**fw.loader_request(one), "overrides": fw.cli(one) + ["rollout.backend=sglang.d1"]},
        {**fw.loader_request(one), "overrides": fw.cli(one) + ["actor.eps_clipp=0.2"]},
    ]
    # CMD= (issue 47): AReaL's multi-turn example, whose config class is its own (examples/.../config.py),
    # and the same with that class defined in the entry script, which AReaL's workers cannot import.
    mt = cmd_request(tmp_path_factory, "areal", "python3 examples/multi_turn_math/gsm8k_rl_mt.py --config "
                     "examples/multi_turn_math/gsm8k_grpo_mt.yaml scheduler.type=ray")
    main = Path(mt["code_root"]) / "examples" / "multi_turn_math" / "main_class.py"
    main.write_text("from dataclasses import dataclass\nfrom areal.api.cli_args import GRPOConfig, load_expr_config\n"
                    "@dataclass\nclass Mine(GRPOConfig):\n    pass\nload_expr_config([], Mine)\n")
    requests += [mt, {**mt, "script": str(main)}]
    return loaders.run("areal", requests)


def test_areal_rendered_forms_load(areal_results):
    assert areal_results[0]["ok"], areal_results[0]
    assert "scheduler=local" in areal_results[0]["summary"]
    assert areal_results[1]["ok"], areal_results[1]
    assert "scheduler=ray 2x8" in areal_results[1]["summary"]


def test_areal_seed_multi_node_form_fails_in_the_real_loader(areal_results):
    seed, fixed = areal_results[2], areal_results[3]
    assert not seed["ok"] and seed["key"] == "scheduler.type"
    assert "+scheduler.type=ray" in seed["error"]
    assert fixed["ok"], fixed


def test_areal_cmd_loads_the_users_yaml_with_the_scripts_own_config_class(areal_results):
    assert areal_results[6]["ok"], areal_results[6]
    assert "gsm8k_rl_mt.py MultiTurnGRPOConfig: scheduler=ray 1x8" in areal_results[6]["summary"]
    assert not areal_results[7]["ok"] and areal_results[7]["key"] == "code.command"
    assert "Mine is defined in main_class.py (__main__)" in areal_results[7]["error"]


def test_areal_allocation_and_key_errors_named(areal_results):
    assert areal_results[4]["key"] == "rollout.backend" and "colons" in areal_results[4]["error"]
    assert areal_results[5]["key"] == "actor.eps_clipp"


# --- RLinf ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rlinf_results(tmp_path_factory):
    need("rlinf")
    fw = frameworks.get("rlinf")
    good = fw.loader_request(spec_of("rlinf-grpo-pipeline-1.5b"))
    seq = {**good, "overrides": ["runner.seq_length=128"]}  # <= max_prompt_length 256
    typo = {**good, "overrides": ["runner.max_stepz=3"]}
    cmd = cmd_request(tmp_path_factory, "rlinf", RLINF, INFRA="aistudio")  # its placeholder paths given
    return loaders.run("rlinf", [good, seq, typo, cmd])


def test_rlinf_preset_composes_and_validates(rlinf_results):
    res = rlinf_results[0]
    assert res["ok"], res
    assert "'actor': '2-3'" in res["summary"] and "max_steps=2" in res["summary"]


def test_rlinf_own_validation_and_keys(rlinf_results):
    assert not rlinf_results[1]["ok"] and "seq_length" in rlinf_results[1]["error"]
    assert rlinf_results[2]["key"] == "runner.max_stepz"


def test_rlinf_cmd_composes_the_users_config_dir_with_its_relative_defaults(rlinf_results):
    """Seed 003's form: Hydra composes CODE's config, `../hybrid_engines/fsdp@...` from its own directory."""
    res = rlinf_results[3]
    assert res["ok"], res
    assert "1 nodes, placement {'actor,rollout,reward': 'all'}" in res["summary"]

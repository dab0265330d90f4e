"""framework.overrides and rlaunch's keys agree (issue 29): each framework's table (its adapter's
`owned`) maps an override of a key rlaunch renders onto rlaunch's key, so every check sees the value
that runs, or refuses it naming the key to use."""

from __future__ import annotations

import json

import pytest

from rlaunch.cli import importer
from rlaunch.config import load as config
from rlaunch.config import spec
from rlaunch.errors import ConfigError
from rlaunch.registry import frameworks

PRESETS = {"verl": ("verl-grpo-math-7b", {"INFRA": "gcp"}), "areal": ("areal-grpo-gsm8k", {"INFRA": "gcp"}),
           "rlinf": ("rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio"})}
EXTRA = {"rlinf": "storage.mount=/mnt/rl"}


def load(fw: str, overrides: list[str], sets: str = "", **knobs):
    preset, infra = PRESETS[fw]
    items = [*f"{EXTRA.get(fw, '')} {sets}".split(), f"framework.overrides={json.dumps(overrides)}"]
    return config.load(preset, {**infra, "RUN_ID": "ov1", **knobs}, items)


@pytest.mark.parametrize("fw", sorted(PRESETS))
def test_every_table_names_rlaunch_keys_and_keys_its_adapter_renders(fw):
    adapter = frameworks.get(fw)
    assert adapter.owned
    specs = [load(fw, []), load(fw, [], "train.steps=6 train.save_freq=2"), load(fw, [], SMOKE="1")]
    rendered = "".join(json.dumps(adapter.files(s)) + " ".join(adapter.command(s)) for s in specs)
    for name, owned in adapter.owned.items():
        assert owned.key in spec.KEYS, (name, owned.key)
        # the table is about keys rlaunch really renders: its last part is in what the framework gets
        assert name.rsplit(".", 1)[-1] in rendered, name


def test_verl_batch_size_override_is_the_batch_size_every_check_sees():
    s = load("verl", ["data.train_batch_size=1024", "actor_rollout_ref.rollout.n=4", "trainer.save_freq=5"])
    assert (s.train.batch_size, s.algo.group_size, s.train.save_freq) == (1024, 4, 5)
    argv = frameworks.get("verl").command(s)
    assert "data.train_batch_size=1024" in argv and "data.train_batch_size=32" not in " ".join(argv)
    assert s.framework.overrides == []  # rendered once, from rlaunch's key


def test_a_mapped_override_goes_through_rlaunchs_own_rules():
    # a batch of 8 prompts under the preset's mini-batch of 16: the batch rule sees 8, not the preset's 32
    with pytest.raises(ConfigError, match=r"<= the train batch \(train\.batch_size=8\)"):
        load("verl", ["data.train_batch_size=8"])
    with pytest.raises(ConfigError, match="rollout.backend"):
        load("verl", ["actor_rollout_ref.rollout.name=trtllm"])


def test_an_override_contradicting_a_knob_or_set_is_refused_naming_both():
    with pytest.raises(ConfigError, match=r"train\.batch_size=64 \(from SET\) says otherwise"):
        load("verl", ["data.train_batch_size=1024"], "train.batch_size=64")
    with pytest.raises(ConfigError, match=r"cluster\.nodes=4 \(from NODES\)"):
        load("verl", ["trainer.nnodes=2"], NODES="4")
    assert load("verl", ["data.train_batch_size=64"], "train.batch_size=64").train.batch_size == 64


@pytest.mark.parametrize("fw, override, key", [
    ("verl", "trainer.default_local_dir=/storage/ck", "storage.mount"),
    ("areal", "experiment_name=x", "run.name"),
    ("areal", "actor.ppo_n_minibatches=4", "train.mini_batch_size"),
    ("rlinf", "runner.output_dir=/x", "storage.mount"),
])
def test_what_rlaunch_keeps_is_refused_naming_the_key_to_use(fw, override, key):
    with pytest.raises(ConfigError, match=rf"rlaunch's own: set {key} instead"):
        load(fw, [override])


def test_areal_and_rlinf_map_their_own_spellings():
    s = load("areal", ["train_dataset.batch_size=64", "gconfig.n_samples=4", "stats_logger.wandb.mode=online"])
    assert (s.train.batch_size, s.algo.group_size, s.logging.wandb) == (64, 4, True)
    assert s.secrets == ["WANDB_API_KEY"]  # the logger an override turns on forwards its key
    r = load("rlinf", ["runner.max_steps=-1", "runner.max_epochs=3"])
    assert (r.train.steps, r.train.epochs) == (0, 3)


def test_verl_logger_override_turns_wandb_on_and_still_reaches_verl():
    s = load("verl", ["trainer.logger=[console,file,wandb]"])
    assert s.logging.wandb and s.secrets == ["WANDB_API_KEY"]
    assert s.framework.overrides == ["trainer.logger=[console,file,wandb]"]


def test_an_interpolated_value_of_an_owned_key_is_refused():
    with pytest.raises(ConfigError, match="a value, not an interpolation"):
        load("verl", ["data.train_batch_size=${data.val_batch_size}"])


@pytest.mark.parametrize("override", ["trainer.resume_mode=auto", "++trainer.resume_mode=auto"])
def test_an_override_equal_to_what_rlaunch_renders_is_accepted(override):
    # verl's own examples (and `make import`'s source scripts) say trainer.resume_mode=auto: rlaunch's value
    s = load("verl", [override])
    argv = frameworks.get("verl").command(s)
    assert [a for a in argv if "resume_mode" in a] == ["trainer.resume_mode=auto"]  # rendered once


def test_another_value_of_a_fixed_key_is_refused_with_a_hint_that_plans():
    with pytest.raises(ConfigError, match=r"always auto .*: remove this override") as err:
        load("verl", ["trainer.resume_mode=disable", "trainer.val_before_train=True"])
    assert "set storage.mount" not in str(err.value)
    with pytest.raises(ConfigError, match="remove this override"):
        load("verl", ["~trainer.resume_mode"])
    s = load("verl", ["trainer.val_before_train=True"])  # the hint applied: the override removed
    assert "trainer.resume_mode=auto" in frameworks.get("verl").command(s)


def test_verl_batch_size_zero_is_refused_for_its_true_reason_and_the_hint_plans(tmp_path):
    # 0 is verl's fully-async trainer's (its rollouter asserts it); main_ppo, which rlaunch runs, refuses it
    with pytest.raises(ConfigError, match=r"data\.train_batch_size\]='0'.*fully_async_main.*main_ppo's "
                                          r"validate_config refuses") as err:
        load("verl", ["data.train_batch_size=0"])
    assert "an integer >= 1" not in str(err.value)
    mini = load("verl", []).train.mini_batch_size
    assert load("verl", [f"data.train_batch_size={mini}"]).train.batch_size == mini  # the hint applied
    # `make import` keeps it for make plan to say the same
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=0 trainer.nnodes=1\n")
    result = importer.convert(script.read_text())
    assert "data.train_batch_size=0" in result.preset["framework"]["overrides"]
    assert "batch_size" not in result.preset.get("train", {})

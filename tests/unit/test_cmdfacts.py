"""CMD= of AReaL and RLinf (issue 47, Build 4): the model facts, memory bound and checkpoint size read the
model the user's command and config name (not the preset's), and every path their config names as a
file is in CODE, on the shared storage, or a hub id; `~` and this machine's paths are refused naming the
YAML file and the key. CODE trees are the fixtures of tests/fixtures/code, copied and edited here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rlaunch.config import ckptsize, cmdfacts, inputs, modelfacts
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.plan import memory
from rlaunch.registry import frameworks
from test_cmd import AREAL, FIXTURES, RLINF, RLINF_PATHS, RLINF_STORE

AREAL_YAML = "examples/math/gsm8k_grpo.yaml"
RLINF_YAML = "examples/reasoning/config/math/qwen2.5-1.5b-grpo-fsdp.yaml"
RLINF_BARE = RLINF.removesuffix(" " + RLINF_PATHS)  # the published command: the config's own paths
RLINF_DATA = " ".join(a for a in RLINF_PATHS.split() if a.startswith("data."))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """The hubs unreachable: hub ids keep their revision, facts come from tests/fixtures/models."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def tree(tmp_path: Path, name: str, edit: dict[str, object] | None = None, files: tuple[str, ...] = ()) -> Path:
    """The fixture CODE `name`, its YAML's keys set as `edit` says (None: deleted), `files` added."""
    root = Path(shutil.copytree(FIXTURES / name, tmp_path / name))
    rel = AREAL_YAML if name == "areal" else RLINF_YAML
    cfg = yaml.safe_load((root / rel).read_text())
    for key, value in (edit or {}).items():
        *parents, leaf = key.split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    (root / rel).write_text(yaml.safe_dump(cfg))
    for path in files:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("{}\n")
    return root


def plan(root: Path, cmd: str, sets: list[str] | None = None, **knobs: str):
    return config.load("", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(root), "CMD": cmd, **knobs}, sets or [])


def refused(root: Path, cmd: str, **knobs: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        plan(root, cmd, **knobs)
    return err.value


# ---------------------------------------------------------------- the model the checks read


def test_the_commands_model_is_the_one_the_facts_memory_bound_and_checkpoints_count(tmp_path):
    spec = plan(tree(tmp_path, "areal"), f"{AREAL} actor.path=Qwen/Qwen3-8B", INFRA="aistudio")  # no sky import
    assert spec.model.path == "Qwen/Qwen3-8B"
    facts = modelfacts.of(spec)
    assert not isinstance(facts, str) and facts.params == 8_190_735_360  # tests/fixtures/models, not the 1.5B
    bound, estimate = memory.bound(spec), ckptsize.of(spec)
    assert bound is not None and bound.params == facts.params
    assert not isinstance(estimate, str) and estimate.params == facts.params
    where = spec.paths.model  # the hub id's directory on the storage: downloaded once, loaded from there
    assert where == f"{spec.storage.mount}/models/Qwen--Qwen3-8B/main"
    assert cmdfacts.line(spec) == (f"model: Qwen/Qwen3-8B, from CMD's actor.path: downloaded by the inputs step to "
                                   f"{where}, which the command's actor.path becomes; the memory bound and "
                                   "checkpoint size read it")
    [model] = inputs.of(spec)
    assert (model.dir, model.fetch) == (where, ("--hf-id=Qwen/Qwen3-8B", "--revision=main"))
    argv = frameworks.get("areal").command(spec)  # the user's argument, then the copy (ref.path follows it)
    assert argv.index("actor.path=Qwen/Qwen3-8B") < argv.index(f"++actor.path={where}")
    assert not any(a.startswith(("++ref.path", "++tokenizer_path")) for a in argv)


def test_the_yamls_model_is_read_through_its_references_and_named_with_its_file(tmp_path):
    spec = plan(tree(tmp_path, "areal", {"actor.path": "Qwen/Qwen3-32B"}), AREAL, INFRA="aistudio")
    assert spec.model.path == "Qwen/Qwen3-32B" and "from examples/math/gsm8k_grpo.yaml's actor.path" in cmdfacts.line(spec)
    bound = memory.bound(spec)
    assert bound is not None and bound.params == modelfacts.read("Qwen/Qwen3-32B").params  # type: ignore[union-attr]
    # RLinf: actor.model.model_path is ${rollout.model.model_path}; a directory on the storage, facts unknown here
    model = f"{RLINF_STORE}/models/Mine"
    root = tree(tmp_path, "rlinf", {"actor.model.model_path": "${rollout.model.model_path}",
                                    "rollout.model.model_path": model, "actor.tokenizer.tokenizer_model": model})
    spec = plan(root, f"{RLINF_BARE} {RLINF_DATA}", INFRA="aistudio")
    assert spec.model.path == model and spec.paths.model == model
    assert f"from {RLINF_YAML}'s rollout.model.model_path" in cmdfacts.line(spec)
    assert "not readable on this machine" in str(modelfacts.of(spec))  # read where the storage is


def test_a_config_naming_no_model_keeps_the_presets_and_says_so(tmp_path):
    spec = plan(tree(tmp_path, "areal", {"actor.path": None}), AREAL)
    assert spec.model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert cmdfacts.line(spec) == ("model: CMD's config names none (actor.path): the memory bound "
                                      "and checkpoint size count the preset's, Qwen/Qwen2.5-1.5B-Instruct")


def test_a_model_only_the_run_resolves_is_unknown_not_the_presets(tmp_path):
    spec = plan(tree(tmp_path, "areal", {"actor.path": "${oc.env:MODEL_DIR}"}), AREAL)
    assert "which only the run resolves" in str(modelfacts.of(spec)) and memory.bound(spec) is None
    assert "not read here" in cmdfacts.line(spec)


def test_a_set_model_path_that_contradicts_the_command_is_refused_naming_both(tmp_path):
    with pytest.raises(ConfigError) as err:
        plan(tree(tmp_path, "areal"), f"{AREAL} actor.path=Qwen/Qwen3-8B", ["model.path=Qwen/Qwen3-32B"])
    assert err.value.key == "model.path" and "what CMD's actor.path says" in str(err.value)


# ---------------------------------------------------------------- the paths in the user's YAML


@pytest.mark.parametrize(("edit", "key", "needle"), [
    ({"actor.path": "~/models/q"}, f"code.command[{AREAL_YAML}: actor.path]", "does not expand ~"),
    ({"train_dataset.path": "/home/me/gsm8k"}, f"code.command[{AREAL_YAML}: train_dataset.path]",
     "on this machine, outside storage.mount"),
    ({"valid_dataset.path": "data/gsm8k/test.jsonl"}, f"code.command[{AREAL_YAML}: valid_dataset.path]",
     "data/gsm8k/test.jsonl is not in"),
    ({"actor.path": "models/tiny"}, f"code.command[{AREAL_YAML}: actor.path]", "models/tiny is in CODE"),
    ({"train_dataset.path": "../gsm8k/train.jsonl"}, f"code.command[{AREAL_YAML}: train_dataset.path]",
     "../gsm8k/train.jsonl is not in"),
])
def test_areal_yaml_paths_refused_name_the_file_the_key_and_the_fix(tmp_path, edit, key, needle):
    err = refused(tree(tmp_path, "areal", edit, files=("models/tiny/config.json",)), AREAL)
    assert err.key == key and needle in str(err), str(err)
    if "is in CODE" not in needle:  # the fix names the key in its file
        assert f"{key.split(': ')[1][:-1]}: <path in it> in {AREAL_YAML}), or on the shared storage" in str(err)


def test_areal_yaml_paths_in_code_on_the_storage_or_on_the_hub_plan(tmp_path):
    root = tree(tmp_path, "areal", {"train_dataset.path": "data/gsm8k", "valid_dataset.path": "/storage/gsm8k/test"},
                files=("data/gsm8k/train.jsonl",))
    spec = plan(root, AREAL)  # a directory in CODE, one on the storage (gcp: /storage), a hub model
    assert spec.model.path == "Qwen/Qwen2.5-1.5B-Instruct"


def test_rlinf_config_paths_refused_name_the_file_the_key_and_the_fix(tmp_path):
    # the published placeholders: a model path of no node's storage
    err = refused(tree(tmp_path, "rlinf"), RLINF_BARE, INFRA="aistudio")
    assert err.key == "model.path" and err.source == f"{RLINF_YAML}'s actor.model.model_path", str(err)
    # data: local files only (no hub id), in CODE or on the storage
    err = refused(tree(tmp_path / "b", "rlinf"), f"{RLINF} data.val_data_paths=[boba/val.jsonl]", INFRA="aistudio")
    assert err.key == "code.command[data.val_data_paths]" and "a path in CODE or under storage.mount:" in str(err)
    err = refused(tree(tmp_path / "c", "rlinf", {"data.train_data_paths": ["/dataset/boba.jsonl"]}),
                  RLINF.removesuffix(" " + RLINF_DATA), INFRA="aistudio")
    assert err.key == f"code.command[{RLINF_YAML}: data.train_data_paths]" and "/dataset/boba.jsonl is on this" in str(err)


def test_the_moving_revision_warnings_hint_names_the_commands_key_and_works(tmp_path):
    root = tree(tmp_path, "areal")
    spec = plan(root, f"{AREAL} actor.path=Qwen/Qwen3-8B", INFRA="aistudio")
    hint = "name a commit: actor.path=Qwen/Qwen3-8B@<40-hex commit>"
    assert any(hint in line for line in inputs.layout(spec))
    commit = "0123456789abcdef0123456789abcdef01234567"
    spec = plan(root, f"{AREAL} actor.path=Qwen/Qwen3-8B@{commit}", INFRA="aistudio")  # the hint applied
    assert not any("WARNING" in line for line in inputs.layout(spec))
    assert f"++actor.path={spec.storage.mount}/models/Qwen--Qwen3-8B/{commit[:12]}" in frameworks.get("areal").command(spec)


def test_aistudios_setup_prepares_the_commands_model_and_clones_nothing(tmp_path):
    from rlaunch.backends.base import LaunchPlan
    from rlaunch.registry import backends

    spec = plan(tree(tmp_path, "rlinf"), RLINF, INFRA="aistudio")
    files = LaunchPlan.render(spec).files
    setup = files["setup.sh"]
    assert f"--adopt={RLINF_STORE}/models/DeepSeek-R1-Distill-Qwen-1.5B --what=model" in setup and "git clone" not in setup
    [step] = [s for s in backends.get("aistudio").plan(spec, files) if "setup.sh" in s]
    assert "clones" not in step


def test_rlinf_paths_from_the_configs_its_hydra_defaults_include_are_checked_as_composed(tmp_path, monkeypatch):
    """The composed config (the loader's compose_only answer, stubbed here; tests/unit/test_loaders.py runs
    the real one) holds a data path only an included defaults file names: refused naming the config "with its defaults"."""
    from rlaunch.validate import loaders

    spec = plan(tree(tmp_path, "rlinf"), RLINF, INFRA="aistudio")
    composed = yaml.safe_load(f"data: {{train_data_paths: ['{RLINF_STORE}/data/a.jsonl', '~/boba.jsonl']}}")
    asked = []

    def run(framework, requests, run_id=""):
        asked.extend(requests)
        return [{"ok": True, "loader": "rlinf", "summary": "fine"}, {"ok": True, "config": composed}]

    monkeypatch.setattr(loaders, "run", run)
    with pytest.raises(ConfigError) as err:
        frameworks.get("rlinf").loader_check(spec, {})
    assert err.value.key == f"code.command[{RLINF_YAML} with its defaults: data.train_data_paths]", err.value
    assert "does not expand ~" in str(err.value) and asked[1] == {**asked[0], "compose_only": True}
    composed["data"]["train_data_paths"] = [f"{RLINF_STORE}/data/a.jsonl"]
    assert frameworks.get("rlinf").loader_check(spec, {}) == "rlinf accepted: fine"


def test_areals_memory_bound_reads_the_users_allocation_not_rlaunchs_half_and_half(tmp_path):
    spec = plan(tree(tmp_path, "areal", {"sglang.mem_fraction_static": 0.5}),
                f"{AREAL} actor.path=Qwen/Qwen3-8B rollout.backend=sglang:d1t2 actor.backend=fsdp:d6", INFRA="aistudio")
    bound = memory.bound(spec)
    assert bound is not None and "1 rollout replica(s) on 2 GPU(s), the actor on 6" in bound.notes
    terms = {t.name: t for p in bound.phases for t in p.terms}
    assert terms["actor parameters"].bytes == pytest.approx(8_190_735_360 * 2 / 6)  # bf16 over 6, not 4
    assert terms["rollout weights"].bytes == pytest.approx(8_190_735_360)  # tensor parallel 2
    assert "sglang.mem_fraction_static 0.5" in terms["outside the engine's fraction"].how  # the YAML's


def test_the_heads_rule_reads_the_commands_rollout_tensor_parallel_and_names_its_key(tmp_path):
    root = tree(tmp_path, "areal", {"rollout.backend": "sglang:d1t3"})
    spec = plan(root, f"{AREAL} actor.path=Qwen/Qwen3-8B", INFRA="aistudio")
    with pytest.raises(ConfigError) as err:  # Qwen3-8B: 32 heads, 8 KV heads
        modelfacts.check(spec)
    assert err.value.key == f"code.command[{AREAL_YAML}: rollout.backend]" and "32 attention heads" in str(err.value)
    spec = plan(root, f"{AREAL} actor.path=Qwen/Qwen3-8B rollout.backend=sglang:d1t4", INFRA="aistudio")
    assert modelfacts.check(spec).startswith("model Qwen/Qwen3-8B: 8.19 B")


def test_the_checkpoints_counted_are_the_saves_the_commands_config_makes(tmp_path):
    root = tree(tmp_path, "areal", {"total_train_steps": 100})
    spec = plan(root, f"{AREAL} saver.freq_steps=30", INFRA="aistudio")
    estimate = ckptsize.of(spec)
    assert not isinstance(estimate, str) and estimate.kept == 4  # steps 30, 60, 90 and the last
    assert "100 steps / save_freq 30 (CMD's config: total_train_steps, saver.freq_steps)" in estimate.line()
    estimate = ckptsize.of(plan(root, AREAL, INFRA="aistudio"))  # the YAML saves by epoch
    assert not isinstance(estimate, str) and "CMD's config gives no saver.freq_steps" in estimate.line()


def test_a_node_counts_the_same_checkpoints_from_code_as_staged_there(tmp_path):
    """Preflight's storage check on a node, where code.dir is the planning machine's path: the config is
    read from CODE as staged (paths.code_dir), and the count is the plan's."""
    from rlaunch.config import specjson

    root = tree(tmp_path, "areal", {"total_train_steps": 100})
    spec = plan(root, f"{AREAL} saver.freq_steps=30", INFRA="aistudio")
    data = spec.model_dump(mode="json")
    staged = shutil.copytree(root, tmp_path / "staged")
    data["code"]["dir"], data["paths"]["code_dir"] = str(tmp_path / "not-here"), str(staged)
    estimate = ckptsize.of(specjson.view(data), offline=True)
    assert not isinstance(estimate, str) and estimate.kept == 4 and estimate.kept == ckptsize.of(spec).kept  # type: ignore[union-attr]

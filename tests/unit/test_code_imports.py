"""What the workers import of the user's code, imported at plan time (issue 47, Build item 4): the
loader (validate/import_loader.py) answered in this process on small CODE trees, and the plan's path
through validate.loaders with this Python standing in for the pinned venv (no torch, no verl: fast)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.validate import import_loader, imports, loaders

FILES = {
    "pkg/__init__.py": "",
    "pkg/reward.py": "import json\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                     "    return 1.0\n",
    "pkg/needs.py": "import not_installed_anywhere\n\ndef compute_score(*a):\n    return 0.0\n",
    "pkg/gone.py": "from pkg.moved import compute_score\n",  # a module of CODE's own that is not there
    "recipe/x/old.py": "import verl.trainer.gone\n",  # the framework's own module, not in its pinned version
    "pkg/data.py": "class MyDataset:\n    pass\n\nNOT_CALLABLE = 3\n",
    # An entry module that trains at import, and under its guard: checking it must run neither.
    "recipe/__init__.py": "", "recipe/x/__init__.py": "",
    "recipe/x/main.py": "import json\n\ndef main():\n    raise SystemExit('trained')\n\nmain()\n"
                        "if __name__ == '__main__':\n    main()\n",
    "recipe/x/broken.py": "from pkg import missing_module\n",
    "recipe/x/renamed.py": "from pkg.reward import compute_score_v2\n",
    # AReaL-style entry scripts: a workflow in the entry script, guarded or training at import.
    "examples/__init__.py": "", "examples/ok/__init__.py": "", "examples/bad/__init__.py": "",
    "examples/ok/train.py": "from helper import X\n\nclass Flow:\n    pass\n\nif __name__ == '__main__':\n"
                            "    raise SystemExit('trained')\n",
    "examples/ok/helper.py": "X = 1\n",
    # A lazy module (as transformers' are): an attribute it lacks is an import, which must not be made.
    "pkg/lazy.py": "def __getattr__(name):\n    raise ImportError('made an import: ' + name)\n\nclass Flow:\n    pass\n",
    "ns/deep/mod.py": "class Flow:\n    pass\n",  # namespace packages (no __init__.py), as AReaL's examples/
    "examples/bad/train.py": "class Flow:\n    pass\n\ntrainer = object()\nprint('training')\n",
}


@pytest.fixture(scope="module")
def user(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def ask(root: Path, *targets: dict, entry: str = "", path: tuple[str, ...] = ()) -> dict:
    req = {"code": str(root), "path": [str(root / p) for p in path], "entry": entry, "own": ["verl", "recipe"],
           "targets": [{"arg": "ARG", "what": "thing", **t} for t in targets]}
    return import_loader.answer(req, "")


def test_a_reward_file_imports_and_names_a_callable(user):
    assert ask(user, {"file": "pkg/reward.py", "name": "compute_score"})["ok"]
    assert "defines no 'nope'" in ask(user, {"file": "pkg/reward.py", "name": "nope"})["error"]
    assert "'NOT_CALLABLE' is not callable" in ask(user, {"file": "pkg/data.py", "name": "NOT_CALLABLE"})["error"]


def test_a_missing_import_names_the_module_the_file_and_the_argument(user):
    got = ask(user, {"file": "pkg/gone.py", "name": "compute_score"})  # CODE's own module: refused
    assert not got["ok"] and got["key"] == "ARG" and got["index"] == 0
    assert "no module named 'pkg.moved'" in got["error"] and "pkg/gone.py:1" in got["error"]
    got = ask(user, {"module": "recipe.x.old"})  # the framework's own: refused
    assert "no module named 'verl'" in got["error"] and "recipe/x/old.py:1" in got["error"]
    got = ask(user, {"module": "recipe.x.broken"})
    assert "importing recipe.x.broken" in got["error"] and "pkg/__init__.py" not in got["error"]
    assert "no module named 'recipe.nope'" in ask(user, {"module": "recipe.nope.main"})["error"]
    got = ask(user, {"module": "recipe.x.renamed"})  # a recipe written for another version of the framework
    assert "cannot import name 'compute_score_v2' from 'pkg.reward'" in got["error"]
    assert "recipe/x/renamed.py:1" in got["error"] and "not in the pinned framework's version" in got["error"]


def test_a_third_party_package_the_validator_lacks_is_a_warning_never_a_refusal(user):
    """The image may hold what the validator's environment does not (sglang, flash-attn, math-verify)."""
    got = ask(user, {"file": "pkg/needs.py", "name": "compute_score"}, {"module": "recipe.x.main"})
    assert got["ok"] and got["summary"].startswith("1 import(s) resolve")
    assert got["warnings"] == ["importing pkg/needs.py: no module named 'not_installed_anywhere' at "
                               f"{user}/pkg/needs.py:1 (a package the validator's environment lacks: not "
                               "checked, the image may have it)"]


def test_an_entry_module_is_imported_without_running_it(user):
    got = ask(user, {"module": "recipe.x.main"})  # main() at top level would raise SystemExit('trained')
    assert got["ok"], got
    assert "recipe" not in sys.modules and str(user) not in sys.path  # nothing of CODE's stays behind
    assert ask(user, {"dotted": "pkg.lazy.Flow"})["ok"] and "pkg.lazy" not in sys.modules
    for _ in range(2):  # namespace packages too, and the next request finds them again
        assert ask(user, {"dotted": "ns.deep.mod.Flow"})["ok"] and "ns" not in sys.modules and "ns.deep" not in sys.modules


def test_a_workflow_in_main_or_in_an_entry_script_that_trains_at_import_is_refused_with_the_fix(user):
    got = ask(user, {"dotted": "__main__.Flow"}, entry="examples/ok/train.py")
    assert "is defined in the entry script (examples/ok/train.py)" in got["error"]
    assert "move Flow to a module in CODE" in got["error"]
    got = ask(user, {"dotted": "examples.bad.train.Flow"}, entry="examples/bad/train.py")
    assert "which runs at import (examples/bad/train.py:5: print('training'))" in got["error"]
    # Guarded, and its sibling import found as AReaL's launcher finds it (the script's directory on the path).
    got = ask(user, {"dotted": "examples.ok.train.Flow"}, entry="examples/ok/train.py", path=("examples/ok",))
    assert got["ok"] and not got["warnings"]
    assert "no module named 'helper'" in ask(user, {"dotted": "examples.ok.train.Flow"},
                                               entry="examples/ok/train.py")["warnings"][0]


@pytest.mark.parametrize(("files", "want"), [
    ({"verl/version/version": "0.9.1\n"}, ("verl", "0.9.1")),
    ({"areal/version.py": "", "pyproject.toml": '[project]\nname = "areal"\nversion = "1.0.4"\n'}, ("areal", "1.0.4")),
    ({"rlinf/__init__.py": "", "pyproject.toml": 'version = "0.4.0"\n'}, ("rlinf", "0.4.0")),
    ({"pkg/__init__.py": ""}, None),
])
def test_a_framework_checkout_is_found_with_its_version(tmp_path, files, want):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert imports.checkout(tmp_path) == want


# ---------------------------------------------------------------- the plan's path (this Python as the venv)


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """.venv-verlcpu whose python is this one (stdlib harness): the loader process, not the pinned libraries."""
    bin_ = tmp_path / "validators" / ".venv-verlcpu" / "bin"
    bin_.mkdir(parents=True)
    os.symlink(sys.executable, bin_ / "python")
    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path / "validators"))
    monkeypatch.setenv("RLAUNCH_LOADER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "_CACHE", {})
    return bin_


def verl(user: Path, cmd: str, *sets: str):
    spec = config.load("verl-grpo-math-7b", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(user), "CMD": cmd}, list(sets))
    from rlaunch.registry import frameworks

    return spec, frameworks.get("verl")


def test_verls_reward_dataset_class_and_entry_module_are_imported_before_any_gpu(user, venv):
    spec, fw = verl(user, "python3 -m recipe.x.main reward.custom_reward_function.path=pkg/reward.py "
                    "data.custom_cls.path=pkg/data.py data.custom_cls.name=MyDataset")
    lines = fw.import_check(spec)
    assert lines == ["imports (.venv-verlcpu, CODE first on sys.path): 3 import(s) resolve: "
                     "pkg/reward.py:compute_score, pkg/data.py:MyDataset, recipe.x.main"]
    spec, fw = verl(user, "python3 -m recipe.x.main reward.custom_reward_function.path=pkg/gone.py")
    with pytest.raises(ConfigError) as err:
        fw.import_check(spec)
    assert err.value.key == "framework.overrides[reward.custom_reward_function.path]"
    assert err.value.value == "pkg/gone.py" and "no module named 'pkg.moved'" in str(err.value)
    assert str(err.value).count("\n") == 0
    spec, fw = verl(user, "python3 -m recipe.x.main reward.custom_reward_function.path=pkg/needs.py")
    assert fw.import_check(spec)[1].startswith("WARNING imports: importing pkg/needs.py: no module named "
                                               "'not_installed_anywhere'")


def test_a_recipe_that_does_not_resolve_is_refused_naming_the_import(user, venv):
    spec, fw = verl(user, "python3 -m recipe.sppo.main_sppo")
    with pytest.raises(ConfigError) as err:
        fw.import_check(spec)
    assert err.value.key == "code.command" and "no module named 'recipe.sppo'" in str(err.value)


def test_an_accepted_import_is_kept_by_codes_hash_and_a_missing_venv_is_said(user, venv, monkeypatch):
    (venv.parent / ".rlaunch-verlcpu").write_text("stamp")  # the venv's identity: answers kept on disk
    spec, fw = verl(user, "python3 -m recipe.x.main")
    first = fw.import_check(spec)
    monkeypatch.setattr(loaders, "_CACHE", {})
    monkeypatch.setattr(loaders, "_spawn", lambda *a, **k: pytest.fail("asked again"))
    assert fw.import_check(spec) == first  # the same CODE hash, request and venv: from disk
    spec = spec.model_copy(update={"pins": spec.pins.model_copy(update={"code": {**spec.pins.code, "hash": "0" * 64}})})
    with pytest.raises(BaseException, match="asked again"):  # another CODE: asked again
        fw.import_check(spec)
    monkeypatch.setattr(loaders, "_CACHE", {})
    os.unlink(venv / "python")
    assert fw.import_check(spec)[0].startswith("WARNING imports: not checked (.venv-verlcpu")


def test_code_that_is_a_verl_checkout_runs_as_itself_and_a_version_off_the_pin_is_said(tmp_path):
    (tmp_path / "verl" / "version").mkdir(parents=True)
    (tmp_path / "verl" / "version" / "version").write_text("0.8.0.dev\n")
    spec = config.load("verl-grpo-math-7b", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(tmp_path)})
    lines = imports.checkout_lines(spec)
    assert lines[0].startswith("code: CODE is a verl checkout, version 0.8.0.dev: it is the verl that runs")
    assert lines[1] == (f"WARNING code: CODE's verl is 0.8.0.dev, not the pinned {spec.pins.framework_version}: "
                        "the run uses CODE's 0.8.0.dev; checks of the pinned version's config keys may not hold for it")
    from rlaunch.registry import frameworks

    assert frameworks.get("verl").loader_request(spec)["config_dir"] == str(tmp_path / "verl/trainer/config")
    (tmp_path / "verl" / "version" / "version").write_text(f"{spec.pins.framework_version}\n")
    assert len(imports.checkout_lines(spec)) == 1  # at the pin: said, no warning


def test_a_commands_own_loggers_run_with_rlaunchs_file_logger_added(user):
    spec, fw = verl(user, "python3 -m recipe.x.main trainer.logger=['console','tensorboard']")
    assert fw.command(spec)[-1] == "trainer.logger=[console,tensorboard,file]" and not spec.logging.wandb
    spec, fw = verl(user, "python3 -m recipe.x.main trainer.logger=[console,file,wandb]")
    assert fw.command(spec)[-1] == "trainer.logger=[console,file,wandb]" and spec.logging.wandb


def test_an_areal_workflow_in_main_is_refused_naming_the_command_and_the_fix(tmp_path, monkeypatch):
    """AReaL's entry script hands the trainer dotted paths; one in __main__ no worker can import. (CMD
    reaches AReaL with wt/cmd: the spec is given its command here.)"""
    bin_ = tmp_path / "validators" / ".venv-areal" / "bin"
    bin_.mkdir(parents=True)
    os.symlink(sys.executable, bin_ / "python")
    monkeypatch.setenv("RLAUNCH_VALIDATORS", str(tmp_path / "validators"))
    monkeypatch.setattr(loaders, "_CACHE", {})
    root = tmp_path / "user"
    (root / "examples" / "x").mkdir(parents=True)
    script = root / "examples" / "x" / "train.py"
    script.write_text("class Flow:\n    pass\n\n\ndef main(trainer):\n    trainer.train(workflow='__main__.Flow')\n")
    spec = config.load("areal-grpo-gsm8k", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(root)})
    cmd = "python3 examples/x/train.py --config examples/x/c.yaml"
    spec = spec.model_copy(update={"code": spec.code.model_copy(update={"command": cmd})})
    from rlaunch.registry import frameworks

    with pytest.raises(ConfigError) as err:
        frameworks.get("areal").import_check(spec)
    assert err.value.key == "code.command" and err.value.value == "__main__.Flow"
    assert "defined in the entry script (examples/x/train.py)" in str(err.value)
    assert "move Flow to a module in CODE" in str(err.value)
    script.write_text(script.read_text().replace("__main__.Flow", "examples.x.train.Flow"))
    assert frameworks.get("areal").import_check(spec) == [
        "imports (.venv-areal, CODE first on sys.path): 1 import(s) resolve: examples.x.train.Flow"]

"""`make import SCRIPT=...` (issue 29) on published verl and AReaL launch scripts (tests/fixtures/import,
cited in its README): the script is read, never run; rlaunch's keys are mapped, the rest kept as
framework.overrides, what rlaunch makes itself dropped with why; the preset plans and its rendered
command line carries the script's values."""

from __future__ import annotations

import datetime
import hashlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import CONFIGS, ROOT
from rlaunch.cli import importer
from rlaunch.plan import artifacts
from rlaunch.config import knobs, pins
from rlaunch.config import load as config
from rlaunch.registry import frameworks
from rlaunch.registry.backends import get as backend
from test_launch_corpus import CHECKOUT, CORPUS, code_tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
AREAL_PIN = f"{pins.get('frameworks.areal.repo')}@{pins.get('frameworks.areal.commit')}"

# script -> values its rendered command line must carry (verl's Hydra overrides)
CASES = {
    "verl-run_qwen2-7b.sh": ["data.train_batch_size=1024", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.save_freq=20",
                             "trainer.test_freq=5", "trainer.total_epochs=15", "trainer.n_gpus_per_node=8",
                             "trainer.nnodes=1", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40",
                             "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "trainer.logger=[console,file,wandb]"],
    "verl-run_qwen2-7b_math.sh": ["data.max_prompt_length=1024", "actor_rollout_ref.actor.use_kl_loss=False",
                                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"],
}  # AReaL's: test_an_areal_quickstart_imports_as_its_own_command_and_plans_with_no_further_knob


@pytest.fixture()
def imported(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    made = []

    def run(script: str, name: str = ""):
        name = name or f"test-import-{Path(script).stem.lower().replace('_', '-')}"
        proc = subprocess.run([sys.executable, "-m", "rlaunch.cli.importer", str(FIXTURES / script), f"--name={name}"],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        made.append(CONFIGS / "presets" / f"{name}.yaml")
        return name, proc.stdout
    yield run
    for path in made:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("script", sorted(CASES))
def test_an_imported_script_plans_and_runs_its_own_values(imported, script, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "k")
    name, printed = imported(script)
    assert "read, not run" in printed and "mapped" in printed and "dropped" in printed
    spec = config.load(name, {"INFRA": "gcp", "RUN_ID": "imp1"})
    files = artifacts.finish(spec, backend("gcp").render(spec))
    fw = frameworks.get(spec.framework.name)
    rendered = " ".join(fw.command(spec)) + "".join(fw.files(spec).values())
    for value in CASES[script]:
        key, _, want = value.partition("=")
        assert value in rendered or f"{key.rsplit('.', 1)[-1]}: {want}" in rendered, value
    assert "task.yaml" in files


def test_a_long_imported_name_plans_without_run_id(imported):
    # verl's examples/grpo_trainer/run_qwen2-7b.sh imported as imported-grpo-run-qwen2-7b: <name>-<stamp>
    # was 42 characters, over the run id's 40, and nothing said to set RUN_ID
    name, _ = imported("verl-run_qwen2-7b.sh", "test-imported-grpo-run-qwen2-7b")
    now = datetime.datetime(2026, 12, 6, 9, 30, 5, tzinfo=datetime.timezone.utc)
    spec = config.load(name, {"INFRA": "gcp"}, now=now)
    assert spec.run.id == "test-imported-grpo-run-q-20261206-093005" and len(spec.run.id) <= knobs.RUN_ID_MAX
    assert spec.run.name == name  # the run directory keeps the whole name
    assert config.load(name, {"INFRA": "gcp"}, now=now).run.id == spec.run.id  # the same cut every time
    smoke = config.load(name, {"INFRA": "gcp", "SMOKE": "1"}, now=now).run.id
    assert smoke == "test-imported-grpo-smoke-20261206-093005"
    files = artifacts.finish(spec, backend("gcp").render(spec))
    assert "task.yaml" in files


def test_a_verl_script_with_its_own_entry_records_cmd_and_plans_with_code(imported, tmp_path):
    """`python3 -m recipe.my_grpo.main ...` (the user's module, not main_ppo): the preset records
    code.command, the report says to pass CODE=, and with CODE= it plans with no further knob."""
    name, printed = imported("written/verl-own-entry-recipe.sh")
    assert "code.command='python3 -m recipe.my_grpo.main'" in printed and f"PRESET={name} INFRA=... CODE=" in printed
    user = tmp_path / "checkout"
    (user / "recipe" / "my_grpo").mkdir(parents=True)
    for path in ("recipe/__init__.py", "recipe/my_grpo/__init__.py", "recipe/my_grpo/main.py"):
        (user / path).write_text("")
    (user / "recipe" / "my_grpo" / "reward.py").write_text("def compute_score(*args): return 0.0\n")
    spec = config.load(name, {"INFRA": "gcp", "RUN_ID": "imp2", "CODE": str(user)})
    argv = frameworks.get("verl").command(spec)
    assert argv[:3] == ["python3", "-m", "recipe.my_grpo.main"] and "data.train_batch_size=64" in argv
    assert f"reward.custom_reward_function.path={spec.paths.code_dir}/recipe/my_grpo/reward.py" in argv
    with pytest.raises(config.ConfigError, match="relative to CODE= \\(not set\\)"):
        config.load(name, {"INFRA": "gcp", "RUN_ID": "imp2"})  # the recipe's files: only CODE= has them


def test_the_report_says_what_was_mapped_and_dropped_and_why():
    result = importer.convert((FIXTURES / "verl-run_qwen2-7b_math.sh").read_text())
    assert "train.batch_size=1024: from data.train_batch_size" in result.mapped
    assert any(d.startswith("data.train_files=") and "data files are rlaunch's" in d for d in result.dropped)
    assert any(d.startswith("trainer.experiment_name=") and "run.name" in d for d in result.dropped)
    assert result.preset["data"]["dataset"] == "gsm8k"  # the first train file's dataset
    assert result.unresolved == ["HOME"]
    assert "actor_rollout_ref.actor.kl_loss_type=low_var_kl" in result.preset["framework"]["overrides"]


def test_the_script_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "run.sh"
    script.write_text(f"touch {marker}\nN=${{NODES:-2}}\npython3 -m verl.trainer.main_ppo \\\n"
                      "  trainer.nnodes=$N trainer.n_gpus_per_node=8 $(touch /tmp/never)\n")
    result = importer.convert(script.read_text())
    assert not marker.exists()
    assert result.preset["cluster"]["nodes"] == 2  # ${NODES:-2}: the default, NODES being undefined
    assert not Path("/tmp/never").exists()


def test_a_script_without_a_trainer_is_one_error_line(tmp_path):
    script = tmp_path / "x.sh"
    script.write_text("echo hello\n")
    proc = subprocess.run([sys.executable, "-m", "rlaunch.cli.importer", str(script), f"--out={tmp_path}"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "verl.trainer.main_ppo" in proc.stderr


# ---------------------------------------------------------------- AReaL: the script's own command as CMD


@pytest.fixture(scope="module")
def areal_pin(tmp_path_factory):
    """A stand-in for AReaL's checkout at the pin in RLAUNCH_CODE_CACHE (where `make plan` fetches
    <repo>@<commit> to): the checkout's markers, tests/fixtures/code/areal and the files of the corpus's
    AReaL launches (tests/unit/test_launch_corpus.py), so the imported presets plan offline."""
    cache = tmp_path_factory.mktemp("code-cache")
    url, commit = AREAL_PIN.rsplit("@", 1)
    root = cache / hashlib.sha256(url.encode()).hexdigest()[:16] / commit
    shutil.copytree(FIXTURES.parent / "code" / "areal", root)
    for rel, text in CHECKOUT["areal"].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for entry in CORPUS:
        if entry["framework"] == "areal" and entry["expect"] == "plans":
            one = code_tree(entry, tmp_path_factory.mktemp("entry"))
            for path in one.rglob("*"):
                if path.is_file() and not (root / path.relative_to(one)).exists():
                    (root / path.relative_to(one)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, root / path.relative_to(one))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLAUNCH_CODE_CACHE", str(cache))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield root


@pytest.fixture()
def import_here(capsys, tmp_path):
    """`make import` in this process (fast): script text -> (preset name, what it printed)."""
    made = []

    def run(text: str, name: str):
        script = tmp_path / f"{name}.sh"
        script.write_text(text)
        assert importer.main([str(script), f"--name={name}"]) == 0
        made.append(CONFIGS / "presets" / f"{name}.yaml")
        return name, capsys.readouterr().out
    yield run
    for path in made:
        path.unlink(missing_ok=True)


def _plan(name: str, **knobs: str):
    spec = config.load(name, {"INFRA": "gcp", **knobs})
    files = artifacts.finish(spec, backend("gcp").render(spec))
    return spec, frameworks.get("areal").command(spec), files


# fixture -> (the command the preset records, nodes x GPUs it runs at)
QUICKSTARTS = {
    "areal-quickstart-ray.sh": ("python3 -m areal.infra.launcher.ray examples/math/gsm8k_rl.py --config "
                                "examples/math/gsm8k_grpo.yaml ++allocation_mode=sglang:d12p1t1+fsdp:d4p1t1 "
                                "cluster.n_nodes=4 cluster.n_gpus_per_node=4 actor.backend=fsdp:d4p1t1", (4, 4)),
    "areal-quickstart-slurm.sh": ("python3 -m areal.infra.launcher.ray examples/math/gsm8k_rl.py --config "
                                  "examples/math/gsm8k_grpo.yaml ++allocation_mode=sglang:d96p1t1+fsdp:d32p1t1 "
                                  "cluster.n_nodes=16 cluster.n_gpus_per_node=8 actor.backend=fsdp:d32p1t1", (16, 8)),
    "areal-quickstart-local.sh": ("python3 examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml", (1, 8)),
}


@pytest.mark.parametrize("script", sorted(QUICKSTARTS))
def test_an_areal_quickstart_imports_as_its_own_command_and_plans_with_no_further_knob(areal_pin, import_here, script):
    """AReaL's quickstart (written before the pin: areal.launcher.*, gsm8k_grpo.py, `sglang.d12p1t1+d4p1t1`)
    becomes CMD at the pinned AReaL, its allocation kept, CODE the pinned checkout: it plans with INFRA alone."""
    want, size = QUICKSTARTS[script]
    name, printed = import_here((FIXTURES / script).read_text(), f"test-import-{Path(script).stem}")
    assert f"code.dir={AREAL_PIN!r}" in printed and f"then: make plan PRESET={name} INFRA=...\n" in printed
    assert "dropped  experiment_name=<your experiment name>: the experiment name is the run's" in printed
    spec, argv, files = _plan(name)
    assert spec.code.command == want and spec.code.dir == AREAL_PIN
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == size  # the command's and its YAML's
    given = shlex.split(want)
    entry = given.index("--config") - 1
    assert argv[:entry] == given[:entry] and argv[entry] == f"{spec.paths.code_dir}/{given[entry]}"
    assert all(arg in argv for arg in given[entry + 3:])  # allocation_mode and cluster.* as given
    assert spec.paths.code_dir in files["task.yaml"]
    assert len(spec.run.id) <= knobs.RUN_ID_MAX


AREAL_LAUNCHES = [pytest.param(e, id=e["id"]) for e in CORPUS if e["framework"] == "areal" and e["id"] in
                  ("areal-quickstart-local", "areal-drgrpo", "areal-distillation", "areal-multi-turn-math")]


@pytest.mark.parametrize("entry", AREAL_LAUNCHES)
def test_an_areal_example_from_the_corpus_imports_and_plans_at_its_own_size(areal_pin, import_here, entry):
    name, _ = import_here(f"{entry['cmd']}\n", f"test-import-{entry['id']}")
    spec, argv, _files = _plan(name)
    own = [a for a in shlex.split(entry["cmd"]) if not a.startswith(("experiment_name=", "trial_name="))]
    assert shlex.split(spec.code.command) == own and spec.code.dir == AREAL_PIN
    assert [spec.cluster.nodes, spec.cluster.gpus_per_node] == entry["gpus"]
    assert f"{spec.paths.code_dir}/{own[1]}" == argv[1] and all(a in argv for a in own[4:])


def test_an_areal_script_with_its_own_entry_records_cmd_and_says_to_pass_code(areal_pin, import_here, tmp_path):
    name, printed = import_here("python3 train.py --config my.yaml allocation_mode=sglang:d4+fsdp:d4 "
                                "actor.path=Qwen/Qwen3-1.7B\n", "test-import-areal-own")
    assert "code.dir=" not in printed and f"PRESET={name} INFRA=... CODE=<your checkout>" in printed
    user = tmp_path / "mine"
    shutil.copytree(areal_pin, user)  # the user's AReaL checkout, with their entry and YAML
    shutil.copy(user / "examples/math/gsm8k_rl.py", user / "train.py")
    shutil.copy(user / "examples/math/gsm8k_grpo.yaml", user / "my.yaml")
    spec, argv, _files = _plan(name, CODE=str(user))
    assert argv[1] == f"{spec.paths.code_dir}/train.py" and "actor.path=Qwen/Qwen3-1.7B" in argv


def test_a_long_imported_areal_name_plans_without_run_id(areal_pin, import_here):
    name, _ = import_here((FIXTURES / "areal-quickstart-ray.sh").read_text(), "test-imported-areal-quickstart-ray-4x4")
    spec, _argv, _files = _plan(name)
    assert spec.run.id.startswith("test-imported-areal-qu") and len(spec.run.id) <= knobs.RUN_ID_MAX

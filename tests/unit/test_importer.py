"""`make import SCRIPT=...` (issue 29) on published verl and AReaL launch scripts (tests/fixtures/import,
cited in its README): the script is read, never run; rlaunch's keys are mapped, the rest kept as
framework.overrides, what rlaunch makes itself dropped with why; the preset plans and its rendered
command line carries the script's values."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import CONFIGS, ROOT
from rlaunch.cli import importer
from rlaunch.plan import artifacts
from rlaunch.config import knobs
from rlaunch.config import load as config
from rlaunch.registry import frameworks
from rlaunch.registry.backends import get as backend

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"

# script -> values its rendered command line must carry (verl: Hydra overrides; AReaL: its CLI / YAML)
CASES = {
    "verl-run_qwen2-7b.sh": ["data.train_batch_size=1024", "actor_rollout_ref.rollout.n=5",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.save_freq=20",
                             "trainer.test_freq=5", "trainer.total_epochs=15", "trainer.n_gpus_per_node=8",
                             "trainer.nnodes=1", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40",
                             "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "trainer.logger=[console,file,wandb]"],
    "verl-run_qwen2-7b_math.sh": ["data.max_prompt_length=1024", "actor_rollout_ref.actor.use_kl_loss=False",
                                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"],
    "areal-quickstart-ray.sh": ["cluster.n_nodes=4", "cluster.n_gpus_per_node=4", "scheduler.type=ray"],
}


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

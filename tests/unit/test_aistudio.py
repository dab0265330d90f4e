"""INFRA=aistudio: the RuntimeEnv check, the rendered paste files, the install on shared storage, and
the run script's refusals that come before any Ray is touched (the full run on a real cluster is in
test_aistudio_run.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.aistudio import backend as aistudio
from rlaunch.errors import CheckError, MissingPrerequisite
from rlaunch.backends.base import LaunchPlan
from needs import missing

ROOT = Path(__file__).resolve().parents[2]
SHELLCHECK = ROOT / ".venv" / "bin" / "shellcheck"
PRESET = "rlinf-grpo-pipeline-1.5b"


def load(preset: str = "rehearsal", sets: str = "", **knobs) -> dict:
    return config.load(preset, {"INFRA": "aistudio", "RUN_ID": "t-aistudio", **knobs}, sets)


def render(spec: dict) -> dict[str, str]:
    return artifacts.finish(spec, aistudio.BACKEND.render(spec))


def valid_env(spec: dict) -> dict:
    return {"working_dir": f"{spec.storage.mount}/code/checkouts/abc", "excludes": ["/.git/"],
            "env_vars": {"NCCL_IB_DISABLE": "1"}}


# ---------------------------------------------------------------- the RuntimeEnv check


def test_runtime_env_accepts_the_seed_shape():
    spec = load()
    lines = aistudio.validate_runtime_env(valid_env(spec), spec)
    assert "accepted by ray.runtime_env.RuntimeEnv" in lines[0]


def test_runtime_env_rejects_an_unknown_key():
    spec = load()
    env = {**valid_env(spec), "env_var": {"A": "1"}}  # a typo Ray itself would keep and ignore
    with pytest.raises(CheckError, match=r"unknown key 'env_var'; allowed: .*env_vars"):
        aistudio.validate_runtime_env(env, spec)


def test_runtime_env_rejects_a_non_string_env_value():
    spec = load()
    env = valid_env(spec)
    env["env_vars"]["NCCL_IB_DISABLE"] = 1
    with pytest.raises(CheckError, match=r"env_vars.NCCL_IB_DISABLE=1: values must be strings"):
        aistudio.validate_runtime_env(env, spec)


def test_runtime_env_rejects_pip_with_conda():
    spec = load()
    env = {**valid_env(spec), "pip": ["numpy"], "conda": "base"}
    with pytest.raises(CheckError, match=r"'pip' field.*'conda' field.*cannot be specified at the same time"):
        aistudio.validate_runtime_env(env, spec)


def test_runtime_env_rejects_what_the_platform_owns_and_secrets():
    spec = load(sets="secrets=[WANDB_API_KEY]")
    env = valid_env(spec)
    env["env_vars"]["RAY_ADDRESS"] = "10.0.0.1:6379"
    with pytest.raises(CheckError, match=r"env_vars.RAY_ADDRESS: the platform sets it"):
        aistudio.validate_runtime_env(env, spec)
    env = valid_env(spec)
    env["env_vars"]["WANDB_API_KEY"] = "x"
    with pytest.raises(CheckError, match=r"env_vars.WANDB_API_KEY is a secret"):
        aistudio.validate_runtime_env(env, spec)


def test_runtime_env_working_dir_must_be_on_the_shared_storage():
    spec = load()
    env = {**valid_env(spec), "working_dir": "/home/me/RLinf"}
    with pytest.raises(CheckError, match=r"working_dir=/home/me/RLinf is not on the shared storage"):
        aistudio.validate_runtime_env(env, spec)


def test_check_validates_the_rendered_runtime_env_file():
    spec = load()
    files = render(spec)
    files["runtime_env.json"] = json.dumps({"env_vars": {"A": "1"}, "py_module": ["x"]})
    with pytest.raises(CheckError, match="unknown key 'py_module'"):
        aistudio.BACKEND.check(spec, files)


# ---------------------------------------------------------------- rendering


def test_render_has_the_paste_files_and_scripts_parse():
    spec = load()
    files = render(spec)
    assert {"spec.json", "job.sh", "run.sh", "startup.sh", "runtime_env.json", "form.md",
            "form.json"} <= set(files)
    env = json.loads(files["runtime_env.json"])
    assert "_generated_by" not in env  # the file is exactly the RuntimeEnv: its header is PROVENANCE
    assert aistudio.validate_runtime_env(env, spec)
    assert aistudio.bash_syntax(files) == ["bash -n: startup.sh, run.sh, job.sh"]


def test_startup_command_pins_the_final_run_script():
    spec = load()
    files = render(spec)
    digest = hashlib.sha256(files["run.sh"].encode()).hexdigest()
    assert f"echo '{digest}  '" in files["startup.sh"]
    assert "/rlaunch/launches/t-aistudio/run.sh" in files["startup.sh"]
    assert "ray start" not in files["startup.sh"].replace("`ray start`", "")
    assert files["startup.sh"] in files["form.md"]  # the Markdown shows exactly what to paste
    assert len([ln for ln in files["startup.sh"].splitlines() if not ln.startswith("#")]) <= 6


def test_scripts_are_shellcheck_clean(tmp_path):
    if not SHELLCHECK.exists():
        missing("shellcheck not installed (make setup)")
    files = render(load())
    for name in ("run.sh", "startup.sh"):
        (tmp_path / name).write_text(files[name])
    proc = subprocess.run([str(SHELLCHECK), "-s", "bash", "run.sh", "startup.sh"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_no_rdma_disables_ib_and_rdma_keeps_it():
    off = json.loads(render(load())["runtime_env.json"])
    assert off["env_vars"]["NCCL_IB_DISABLE"] == "1"
    on = json.loads(render(load(RDMA="1"))["runtime_env.json"])
    assert "NCCL_IB_DISABLE" not in on["env_vars"]


def test_pythonpath_keeps_megatron_between_the_checkout_and_rlaunch():
    """Seed 003: the RLinf image's /opt/Megatron-LM stays on PYTHONPATH, in the RuntimeEnv and run.sh."""
    spec = load(PRESET)
    files = render(spec)
    code = f"{spec.storage.mount}/code/checkouts/{spec.pins.framework_commit}"
    want = f"{code}:/opt/Megatron-LM:{aistudio.launch_dir(spec)}/home/tools"
    assert json.loads(files["runtime_env.json"])["env_vars"]["PYTHONPATH"] == want
    assert f"export PYTHONPATH={want}\n" in files["run.sh"]
    rehearsal = json.loads(render(load())["runtime_env.json"])["env_vars"]["PYTHONPATH"]
    assert "Megatron" not in rehearsal  # the image's fact, not every framework's


def test_input_paths_must_be_absolute_and_clean():
    from rlaunch.errors import ConfigError

    for sets, key in (("data.path=datasets/x", "data.path"), ("model.path=/mnt/a/../b", "model.path")):
        with pytest.raises(ConfigError, match=f"{key}=.*an absolute path"):
            load(PRESET, sets=sets)
    # A Hub id that is not the pin is its own model (issue 29): its own directory, never the pin's revision.
    model_dir = load(PRESET, sets="model.path=org/other-model").paths.model_dir
    assert "/models/org--other-model/" in model_dir and not model_dir.endswith("/6fc93244f442")


def test_form_without_image_bin_keeps_the_image_path():
    form = json.loads(render(load())["form.json"])
    assert form["env"] == {"WORK_ROOT": "/mnt/rlaunch", "RUN_ID": "t-aistudio", "TARGET_STEPS": "300"}
    assert form["tensorboard_path"] == "/mnt/rlaunch/runs/rehearsal/${RUN_ID}/tensorboard"
    assert form["distributed_framework"] == "Ray"


def test_secret_values_never_rendered_installed_or_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_API_KEY", "sekret-value")
    spec = load(sets=f"secrets=[WANDB_API_KEY] storage.mount={tmp_path}")
    files = render(spec)
    assert "WANDB_API_KEY" in files["form.md"]
    assert aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out")) == 0
    printed = capsys.readouterr().out
    assert "WANDB_API_KEY=<your secret" in printed
    assert "sekret-value" not in printed
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"sekret-value" not in path.read_bytes(), path
    assert all("sekret-value" not in text for text in files.values())


# ---------------------------------------------------------------- install (make launch)


def test_launch_installs_and_prints_the_three_things(tmp_path, capsys):
    spec = load(sets=f"storage.mount={tmp_path}")
    assert aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out")) == 0
    out = capsys.readouterr().out
    target = tmp_path / "rlaunch/launches/t-aistudio"
    assert f"installed: {target}" in out
    assert "submission is manual" in out
    for title in ("1. Task form", "2. Ray RuntimeEnv (JSON)", "3. Startup command"):
        assert title in out
    assert "_generated_by" not in out  # the JSON printed is exactly the one to paste
    assert (target / "home/tools/rlaunch/backends/aistudio/backend.py").is_file()
    assert not list(target.rglob("__pycache__"))
    check = subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"], cwd=target,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout
    assert os.access(target / "run.sh", os.X_OK)
    assert not (tmp_path / "runs").exists()  # installing starts nothing


def test_launch_again_is_idempotent_but_never_overwrites_a_different_version(tmp_path, capsys):
    spec = load(sets=f"storage.mount={tmp_path}")
    aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out"))
    assert aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out")) == 0
    assert "already installed, unchanged" in capsys.readouterr().out
    changed = load(sets=f"storage.mount={tmp_path} train.steps=7")
    with pytest.raises(CheckError, match=r"holds a different version of run t-aistudio .*run.sh"):
        aistudio.BACKEND.launch(LaunchPlan.render(changed, tmp_path / "out"))
    assert "RENDERED_TARGET_STEPS=300" in (tmp_path / "rlaunch/launches/t-aistudio/run.sh").read_text()
    assert not [p for p in (tmp_path / "rlaunch/launches").iterdir() if p.name.startswith(".")]


def test_launch_refuses_a_used_run_id_and_a_missing_work_root(tmp_path):
    spec = load(sets=f"storage.mount={tmp_path}")
    (tmp_path / "runs/rehearsal/t-aistudio").mkdir(parents=True)
    with pytest.raises(CheckError, match="RUN_ID=t-aistudio was already used"):
        aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out"))
    gone = load(WORK_ROOT=str(tmp_path / "not-mounted"))
    with pytest.raises(MissingPrerequisite, match="not-mounted: not a directory here: mount the shared"):
        aistudio.BACKEND.launch(LaunchPlan.render(gone, tmp_path / "out"))


def test_install_root_is_where_this_machine_sees_the_storage(tmp_path, capsys):
    spec = load(sets=f"infra.install_root={tmp_path}")  # workers mount it at /mnt/rlaunch, this machine at tmp_path
    aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out"))
    out = capsys.readouterr().out
    assert (tmp_path / "rlaunch/launches/t-aistudio/run.sh").is_file()
    assert "env: WORK_ROOT=/mnt/rlaunch" in out
    assert "RENDERED_WORK_ROOT=/mnt/rlaunch" in (tmp_path / "rlaunch/launches/t-aistudio/run.sh").read_text()


def test_status_logs_down_dashboard_say_what_to_do(tmp_path, capsys):
    spec = load(sets=f"storage.mount={tmp_path}")
    backend = aistudio.BACKEND
    run = backend.handle(LaunchPlan(spec, tmp_path, {}))
    for verb in ("status", "logs", "down", "dashboard"):
        assert getattr(backend, verb)(run) == 0
    out = capsys.readouterr().out
    assert "no public API" in out and "AIStudio console" in out
    run_dir = tmp_path / "runs/rehearsal/t-aistudio"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "driver.log").write_text("line\nRLAUNCH_RUN_STATUS=passed\n")
    (run_dir / "verification.json").write_text('{"passed": true}')
    backend.status(run)
    backend.logs(run)
    out = capsys.readouterr().out
    assert "verification.json: passed" in out and "RLAUNCH_RUN_STATUS=passed" in out


# ---------------------------------------------------------------- run.sh before the job


def installed(tmp_path: Path, sets: str = "", preset: str = "rehearsal") -> tuple[dict, Path]:
    spec = load(preset, sets=f"storage.mount={tmp_path} {sets}")
    aistudio.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out"))
    return spec, tmp_path / "rlaunch/launches" / spec.run.id


def run_script(spec: dict, launch: Path, **env) -> subprocess.CompletedProcess:
    full = {"PATH": os.environ["PATH"], "WORK_ROOT": spec.storage.mount, "RUN_ID": spec.run.id,
            **env}
    return subprocess.run(["bash", str(launch / "run.sh")], env=full, capture_output=True, text=True,
                          timeout=60, check=False)


def test_run_script_refuses_task_values_it_was_not_rendered_for(tmp_path, capsys):
    spec, launch = installed(tmp_path)
    capsys.readouterr()
    cases = {
        "RUN_ID=other": ({"RUN_ID": "other"}, "rendered for RUN_ID=t-aistudio"),
        "WORK_ROOT": ({"WORK_ROOT": "/mnt/elsewhere"}, "rendered for the shared storage at"),
        "TARGET_STEPS": ({"TARGET_STEPS": "5"}, "rendered for 300 steps"),
        "no RUN_ID": ({"RUN_ID": ""}, "RUN_ID is not set"),
    }
    for name, (env, message) in cases.items():
        proc = run_script(spec, launch, **env)
        assert proc.returncode == 2, (name, proc.stderr)
        assert message in proc.stderr, (name, proc.stderr)
    assert not (tmp_path / "runs").exists()


def test_run_script_refuses_a_reused_run_id_before_anything_starts(tmp_path):
    spec, launch = installed(tmp_path)
    run_dir = Path(spec.paths.run_dir)
    run_dir.mkdir(parents=True)
    proc = run_script(spec, launch)
    assert proc.returncode == 2
    assert f"refusing to reuse RUN_ID=t-aistudio: {run_dir} already exists" in proc.stderr
    assert proc.stdout.splitlines()[-1] == "RLAUNCH_RUN_STATUS=refused run_id=t-aistudio exit_code=2 (nothing started)"
    assert list(run_dir.iterdir()) == []  # nothing written into the old run
    assert "=== 4. inputs" not in proc.stdout


def test_run_script_refuses_an_altered_launch(tmp_path):
    spec, launch = installed(tmp_path)
    cli = launch / "home/tools/rlaunch/cli/commands.py"
    cli.write_text(cli.read_text() + "\n# edited on the shared storage\n")
    proc = run_script(spec, launch)
    assert proc.returncode == 3
    assert "launch file home/tools/rlaunch/cli/commands.py missing or altered" in proc.stderr
    assert not Path(spec.paths.run_dir).exists()


def test_startup_command_refuses_a_run_script_that_differs(tmp_path):
    spec, launch = installed(tmp_path)
    startup = render(spec)["startup.sh"]
    env = {"PATH": os.environ["PATH"], "WORK_ROOT": str(tmp_path), "RUN_ID": "t-aistudio"}
    run = launch / "run.sh"
    run.write_text(run.read_text().replace("say \"=== 1.", "echo tampered; say \"=== 1."))
    proc = subprocess.run(["bash", "-c", startup], env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 3
    assert "differs from the rendered run script" in proc.stderr
    assert "tampered" not in proc.stdout
    shutil.rmtree(launch)
    proc = subprocess.run(["bash", "-c", startup], env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 3 and "run.sh not found" in proc.stderr

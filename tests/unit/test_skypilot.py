"""The SkyPilot backend's rendering (pure, fast) and rlaunch's own offline rules on its task.

SkyPilot's parser itself (a child process, seconds) is exercised in test_skypilot_check.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.skypilot import backend as sp
from rlaunch.errors import CheckError, ConfigError
from rlaunch.registry import frameworks
from rlaunch.validate import skypilot as v

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sekret-value"


def spec_for(preset: str = "rehearsal", SET: str = "", **knobs) -> dict:  # noqa: N803
    knobs = {"INFRA": "gcp", "RUN_ID": "t-sky", **knobs}
    return config.load(preset, knobs, SET)


def render(spec: dict) -> dict[str, str]:
    return artifacts.finish(spec, sp.BACKEND.render(spec))


def task_of(spec: dict) -> dict:
    return yaml.safe_load(render(spec)["task.yaml"])


GPU = {"ACCELERATOR": "H100", "GPUS_PER_NODE": "1"}


def test_task_carries_the_spec_shape():
    spec = spec_for(SET="cluster.memory_gb=128 cluster.cpus_per_node=8 framework.image=official", **GPU)
    task = task_of(spec)
    res = task["resources"]
    assert res["infra"] == "gcp"
    assert res["accelerators"] == "H100:1"
    assert (res["cpus"], res["memory"], res["disk_size"]) == ("8+", "128+", 64)
    assert res["image_id"] == "docker:" + spec.pins.image
    assert res["ports"] == [8265]
    assert res["autostop"] == {"idle_minutes": 10, "down": True}
    assert "job_recovery" not in res and "use_spot" not in res
    assert task["num_nodes"] == 2
    assert task["name"] == "t-sky"
    assert task["workdir"] == str(ROOT)
    assert task["file_mounts"] == {
        "/storage": {"name": "rlaunch-t-sky", "store": "gcs", "mode": "MOUNT"},
        "/rlaunch/run": spec.run.out,
    }
    assert "secrets" not in task and "config" not in task
    envs = task["envs"]
    assert envs["RUN_ID"] == "t-sky"
    assert envs["RLAUNCH_ARTIFACTS"] == "/rlaunch/run"
    assert envs["RLAUNCH_RAY_PORT"] == "6379" and envs["RLAUNCH_DASHBOARD_PORT"] == "8265"
    assert envs["RLAUNCH_DEADLINE_S"] == "600"
    assert envs["NCCL_IB_DISABLE"] == "1"
    assert "RLAUNCH_HOME" not in envs  # the workdir: the run script takes $PWD
    assert all(isinstance(value, str) for value in envs.values())


def test_cpu_nodes_have_no_accelerators_and_no_bounds():
    res = task_of(spec_for(SET="cluster.cpus_per_node=0 cluster.memory_gb=0"))["resources"]
    assert not {"accelerators", "cpus", "memory"} & set(res)


@pytest.mark.parametrize(("knobs", "infra", "store"), [
    ({"INFRA": "aws"}, "aws", "s3"),
    ({"INFRA": "azure"}, "azure", "azure"),
    ({"INFRA": "k8s"}, "k8s", "gcs"),
    ({"INFRA": "sky", "INFRA_SPEC": "gcp/us-central1"}, "gcp/us-central1", "gcs"),
    ({"INFRA": "sky", "INFRA_SPEC": "k8s/my-context"}, "k8s/my-context", "gcs"),
])
def test_infra_and_default_bucket_store(knobs, infra, store):
    task = task_of(spec_for(**knobs))
    assert task["resources"]["infra"] == infra
    assert task["file_mounts"]["/storage"]["store"] == store


def test_existing_bucket_is_mounted_with_its_mode():
    task = task_of(spec_for(SET="storage.source=s3://my-bucket/rl storage.mode=MOUNT_CACHED"))
    assert task["file_mounts"]["/storage"] == {"source": "s3://my-bucket/rl", "mode": "MOUNT_CACHED"}


def test_named_new_bucket_and_another_mount_path():
    spec = spec_for(SET="storage.bucket=my-sky-bucket storage.store=r2 storage.mount=/mnt/shared")
    task = task_of(spec)
    assert task["file_mounts"]["/mnt/shared"] == {"name": "my-sky-bucket", "store": "r2", "mode": "MOUNT"}
    assert spec.paths.ckpt_dir.startswith("/mnt/shared/")


def test_sky_infra_needs_a_string_and_a_known_store():
    with pytest.raises(ConfigError, match="infra.sky_infra"):
        render(spec_for(INFRA="sky"))
    with pytest.raises(ConfigError, match="storage.store"):
        render(spec_for(INFRA="sky", INFRA_SPEC="lambda"))
    task = task_of(spec_for(INFRA="sky", INFRA_SPEC="lambda", SET="storage.source=s3://b"))
    assert task["resources"]["infra"] == "lambda"


def test_spot_is_a_managed_job_with_recovery_and_no_autostop():
    spec = spec_for(SPOT="1", SET="infra.recovery_strategy=FAILOVER infra.max_restarts_on_errors=2")
    task = task_of(spec)
    res = task["resources"]
    assert res["use_spot"] is True
    # 75: job.sh lost a node (rlaunch.job.nodewatch): recovered like a preemption, resumed from the checkpoints.
    assert res["job_recovery"] == {"strategy": "FAILOVER", "max_restarts_on_errors": 2, "recover_on_exit_codes": [75]}
    assert "autostop" not in res  # the jobs controller tears a managed job's cluster down
    assert sp.launch_argv(spec, "/o")[:4] == ["jobs", "launch", "-n", "t-sky"]
    # Recoveries resume in the run dir, which is bound to the first task id that used it.
    assert spec.paths.run_dir + "/skypilot-task-id" in task["run"]


def test_spot_on_kubernetes_recovers_pods_but_rents_no_spot_instances():
    res = task_of(spec_for(INFRA="k8s", SPOT="1"))["resources"]
    assert "use_spot" not in res and res["job_recovery"]["strategy"] == "EAGER_NEXT_REGION"


def test_rdma_on_kubernetes_adds_ipc_lock_and_keeps_infiniband_on():
    task = task_of(spec_for(INFRA="k8s", RDMA="1"))
    container = task["config"]["kubernetes"]["pod_config"]["spec"]["containers"][0]
    assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert "NCCL_IB_DISABLE" not in task["envs"]
    assert "network_tier" not in task["resources"]


def test_rdma_on_a_cloud_asks_for_the_best_network_tier():
    task = task_of(spec_for(RDMA="1"))
    assert task["resources"]["network_tier"] == "best"
    assert "config" not in task


def test_autostop_zero_is_off():
    assert task_of(spec_for(SET="infra.autostop_idle_minutes=0"))["resources"]["autostop"] is False


def test_rlaunch_image_carries_the_repository():
    task = task_of(spec_for(SET="framework.image=rlaunch"))
    assert "workdir" not in task
    assert task["envs"]["RLAUNCH_HOME"] == sp.IMAGE_HOME
    assert task["resources"]["image_id"].startswith("docker:ghcr.io/rlaunch/")


def test_cluster_name_starts_with_a_letter():
    assert sp.cluster_name(spec_for(RUN_ID="7run")) == "r-7run"
    assert sp.cluster_name(spec_for(RUN_ID="run-7")) == "run-7"


def test_secrets_are_null_references_and_their_values_go_nowhere(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    monkeypatch.setenv("HF_TOKEN", SECRET + "-hf")
    spec = spec_for(SET="secrets=[WANDB_API_KEY,HF_TOKEN]", SPOT="1")
    files = render(spec)
    task = yaml.safe_load(files["task.yaml"])
    assert task["secrets"] == {"WANDB_API_KEY": None, "HF_TOKEN": None}
    assert not [rel for rel, text in files.items() if SECRET in text]
    argv = sp.launch_argv(spec, "/o")
    assert argv[-5:] == ["--secret", "WANDB_API_KEY", "--secret", "HF_TOKEN", "-y"]
    assert SECRET not in " ".join(argv)
    assert SECRET not in "\n".join(sp.BACKEND.plan(spec, files))


def test_framework_env_reaches_every_node(monkeypatch):
    trl = frameworks.get("trl")
    monkeypatch.setattr(type(trl), "env", lambda self, spec: {"VLLM_USE_V1": "1"})
    assert task_of(spec_for())["envs"]["VLLM_USE_V1"] == "1"
    monkeypatch.setattr(type(trl), "env", lambda self, spec: {"WANDB_API_KEY": "x"})
    with pytest.raises(ConfigError, match="secret"):
        render(spec_for(SET="secrets=[WANDB_API_KEY]"))


# --- the run and setup sections are shell that SkyPilot runs: they must parse, and lint clean --

def _shell_ok(text: str, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("#!/usr/bin/env bash\n" + text)
    subprocess.run(["bash", "-n", str(path)], check=True)
    shellcheck = shutil.which("shellcheck") or str(ROOT / ".venv/bin/shellcheck")
    if Path(shellcheck).exists():
        out = subprocess.run([shellcheck, "-S", "warning", str(path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("knobs", [{}, {"SPOT": "1"}])
def test_run_section_is_valid_shell_without_a_top_level_exit(knobs, tmp_path):
    run = task_of(spec_for(**knobs))["run"]
    _shell_ok(run, tmp_path, "run.sh")
    # SkyPilot appends a flush of cached mounts that reads `$?`: the script must end, not exit.
    top = [line for line in run.splitlines() if line and not line.startswith((" ", "#", ")"))]
    assert top == ["("], top
    assert "scripts/ray-up" in run and "/job.sh" in run and "scripts/ray-down" in run


def test_the_cpu_step_runs_the_adapters_lines_once(monkeypatch, tmp_path):
    lines = ['mkdir -p "${OUT_DIR}/data"', "cat >\"${OUT_DIR}/data/x\" <<'EOF'\n  kept as is\nEOF",
             'echo ran >>"${OUT_DIR}/count"']
    monkeypatch.setattr(type(frameworks.get("trl")), "setup", lambda self, spec: lines)
    files = render(spec_for())
    step = yaml.safe_load(files[sp.INPUTS_TASK])
    assert step["num_nodes"] == 1 and "accelerators" not in step["resources"]
    _shell_ok(files["setup.sh"].split("\n", 1)[1], tmp_path, "setup.sh")
    artifacts_dir = tmp_path / "artifacts"
    artifacts_dir.mkdir()
    (artifacts_dir / "setup.sh").write_text(files["setup.sh"])
    env = {"PATH": "/usr/bin:/bin", "RLAUNCH_ARTIFACTS": str(artifacts_dir), "OUT_DIR": str(tmp_path)}
    subprocess.run(["bash", "-c", step["run"]], env=env, check=True, cwd=ROOT)
    assert (tmp_path / "count").read_text() == "ran\n"
    assert (tmp_path / "data" / "x").read_text() == "  kept as is\n"  # a heredoc stays intact


def test_the_gpu_task_only_checks_what_the_cpu_step_prepared_on_the_same_storage_and_infra(tmp_path):
    files = render(spec_for("verl-ppo-gsm8k-0.5b", INFRA_SPEC="gcp/us-east4", INFRA="sky", SPOT="1",
                            SET="train.save_freq=20"))
    task, step = yaml.safe_load(files["task.yaml"]), yaml.safe_load(files[sp.INPUTS_TASK])
    mount = "/storage"
    assert step["file_mounts"][mount] == task["file_mounts"][mount]  # the same bucket
    assert step["resources"]["infra"] == task["resources"]["infra"] == "gcp/us-east4"
    assert "use_spot" not in step["resources"] and "job_recovery" not in step["resources"]
    setup = task["setup"]
    assert f"/{sp.CHECK_SCRIPT}" in setup and '"${SKYPILOT_SETUP_NODE_RANK:-0}" == 0' in setup
    check = files[sp.CHECK_SCRIPT]
    assert check.count("--check=") == 2 and "--out=" not in check and "--adopt" not in check
    # SPOT=1: one managed job, the CPU task first, then this very GPU task.
    docs = list(yaml.safe_load_all(files[sp.PIPELINE]))
    assert docs == [{"name": "t-sky"}, step, task]
    assert sp.launch_argv(spec_for("verl-ppo-gsm8k-0.5b", SPOT="1", SET="train.save_freq=20"), "/o")[4] == \
        f"/o/{sp.PIPELINE}"


def test_no_setup_section_and_no_cpu_step_without_setup_lines():
    files = render(spec_for())
    assert "setup" not in yaml.safe_load(files["task.yaml"]) and "setup.sh" not in files
    assert sp.INPUTS_TASK not in files and sp.PIPELINE not in render(spec_for(SPOT="1"))


# --- rlaunch's own rules (SkyPilot does not check these offline) --------------------------------

def rendered(spec: dict) -> tuple[dict, dict[str, str]]:
    files = render(spec)
    return yaml.safe_load(files["task.yaml"]), files


def storage_check(spec, task, files, argv=None):
    parsed = {rel: yaml.safe_load(text) for rel, text in files.items() if rel.endswith(".json")
              and rel != "spec.json"}
    fw = frameworks.get(spec.framework.name)
    return v.check_storage(spec, task, argv if argv is not None else fw.command(spec), parsed, sp.ARTIFACTS_MOUNT)


def test_image_without_docker_prefix_fails():
    task, _ = rendered(spec_for())
    assert v.check_image(task).startswith("image_id docker:")
    for bad in ("rayproject/ray:2.60.0", "docker:", "docker:docker:x", ""):
        task["resources"]["image_id"] = bad
        with pytest.raises(CheckError, match="image"):
            v.check_image(task)


def test_storage_paths_agree_with_the_mount():
    spec = spec_for()
    task, files = rendered(spec)
    assert "under /storage" in storage_check(spec, task, files)


def test_mount_path_mismatch_fails():
    spec = spec_for()
    task, files = rendered(spec)
    task["file_mounts"]["/data"] = task["file_mounts"].pop("/storage")
    with pytest.raises(CheckError, match="storage.mount='/storage'"):
        storage_check(spec, task, files)


def test_framework_path_off_the_mount_fails():
    spec = spec_for()
    task, files = rendered(spec)
    files["trl.json"] = files["trl.json"].replace(spec.paths.run_dir, "/home/me/runs/x")
    with pytest.raises(CheckError, match="trl.json:run_dir='/home/me/runs/x'"):
        storage_check(spec, task, files)


@pytest.mark.parametrize("word", [
    "trainer.default_local_dir=checkpoints",            # relative: lands in Ray's job working dir
    "cluster.fileroot=/tmp/areal/experiments",          # AReaL's fileroot off the mount
    "data.train_files=[/storage/data/a.parquet,$HOME/data/b.parquet]",
])
def test_framework_overrides_off_the_mount_fail(word):
    spec = spec_for()
    task, files = rendered(spec)
    with pytest.raises(CheckError, match="not under storage.mount"):
        storage_check(spec, task, files, argv=["python3", "-m", "x", word])


def test_remote_urls_and_paths_under_the_mount_pass():
    spec = spec_for()
    task, files = rendered(spec)
    ok = ["trainer.default_hdfs_dir=hdfs://nn/x", "+cluster.fileroot=/storage/experiments",
          "data.val_files=['/storage/data/gsm8k/test.parquet']"]
    assert storage_check(spec, task, files, argv=ok)


def test_interpolated_paths_in_framework_yaml_are_resolved():
    """AReaL/RLinf YAML point many keys at ${cluster.fileroot}: judge what they resolve to."""
    spec = spec_for()
    task, _ = rendered(spec)
    doc = {"cluster": {"fileroot": "/storage/exp"}, "saver": {"fileroot": "${cluster.fileroot}"},
           "stats": {"log_path": "${cluster.fileroot}/logs"}, "x": {"output_dir": "${oc.env:HOME}"}}
    check = lambda d: v.check_storage(spec, task, [], {"areal.yaml": d}, sp.ARTIFACTS_MOUNT)  # noqa: E731
    assert "under /storage" in check(doc)
    doc["cluster"]["fileroot"] = "/tmp/exp"
    with pytest.raises(CheckError, match="areal.yaml:cluster.fileroot='/tmp/exp'"):
        check(doc)
    doc["cluster"]["fileroot"] = "/storage/exp"
    doc["stats"]["log_path"] = "/home/${cluster.fileroot}"
    with pytest.raises(CheckError, match="stats.log_path='/home//storage/exp'"):
        check(doc)


def test_artifacts_mount_must_be_the_rendered_directory():
    spec = spec_for()
    task, files = rendered(spec)
    task["file_mounts"]["/rlaunch/run"] = "/somewhere/else"
    with pytest.raises(CheckError, match="not the rendered artifacts"):
        storage_check(spec, task, files)
    overlapping = spec_for(SET="storage.mount=/rlaunch")
    with pytest.raises(CheckError, match="overlaps"):
        storage_check(overlapping, task | {"file_mounts": {"/rlaunch": {}, **task["file_mounts"]}}, files)


def test_inline_secret_value_fails(monkeypatch):
    spec = spec_for(SET="secrets=[WANDB_API_KEY]")
    task, files = rendered(spec)
    assert "by reference only" in v.check_secrets(spec, task, files)
    task["secrets"]["WANDB_API_KEY"] = "abc"
    with pytest.raises(CheckError, match="null"):
        v.check_secrets(spec, task, files)


def test_a_secret_value_in_any_file_fails(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    spec = spec_for(SET="secrets=[WANDB_API_KEY]")
    task, files = rendered(spec)
    files["job.sh"] += f"\nexport WANDB_API_KEY={SECRET}\n"
    with pytest.raises(CheckError, match="value of WANDB_API_KEY is in job.sh"):
        v.check_secrets(spec, task, files)


def test_kubernetes_cannot_stop_a_cluster():
    task = task_of(spec_for(INFRA="k8s", SET="infra.autostop_down=false"))
    with pytest.raises(CheckError, match="autostop_down"):
        v.check_kubernetes(task, on_k8s=True)
    assert v.check_kubernetes(task, on_k8s=False) is None


FACTS = {"accelerators": ["A100", "A100-80GB", "H100"], "tpus": ["tpu-v5p-8"],
         "recovery_strategies": ["EAGER_NEXT_REGION", "FAILOVER"]}


@pytest.mark.parametrize(("acc", "ok"), [
    ("H100:1", True), ("a100-80gb:8", True), ("tpu-v5p-8:1", True),
    ("H1000:1", False), ("tpu-v9-8:1", False), ("H100:0", False), ("H100", False),
])
def test_accelerator_rule(acc, ok):
    task = {"resources": {"accelerators": acc}}
    if ok:
        assert "known to SkyPilot" in v.check_accelerator(task, FACTS)
    else:
        with pytest.raises(CheckError, match="accelerator"):
            v.check_accelerator(task, FACTS)


def test_recovery_rule():
    assert v.check_recovery({"resources": {}}, FACTS) is None
    task = {"resources": {"job_recovery": {"strategy": "failover", "max_restarts_on_errors": 1}}}
    assert "FAILOVER" in v.check_recovery(task, FACTS)
    task["resources"]["job_recovery"]["strategy"] = "RETRY_FOREVER"
    with pytest.raises(CheckError, match="infra.recovery_strategy='RETRY_FOREVER'"):
        v.check_recovery(task, FACTS)

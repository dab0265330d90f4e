"""The AIStudio run script of preset rlinf-grpo-pipeline-1.5b, run for real.

Input checks run without a cluster: a missing or altered input stops the run before anything
starts, naming the file. The cluster test stands in for the platform: a real 2-node
network-namespace Ray cluster (scripts/local-cluster), the startup command submitted as a Ray job
with the pasted RuntimeEnv and the form's env vars, exactly what AIStudio does with a task. The
cluster has no GPUs: the installed spec.json says so (see cpu_standin), so preflight records its GPU
checks as skipped instead of failing them; everything else runs exactly as rendered for 2 x 2 A100,
the A100 rule's workaround included (for real on both nodes; nothing to hide in this venv).
Inputs in seed 003's own layout, and an image Python with only the modules the job's steps import,
are run up to the job without a cluster.

What the run reads from the shared storage is made here: a pinned RLinf checkout whose entrypoint
(the checkout's own examples/reasoning/main_grpo.py, so the adapter's real command line and the
rendered RLinf config are what runs) writes RLinf 0.3's documented outputs; a model and a dataset
with SHA256SUMS manifests; a versions file pinning the stand-in checkout's commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.aistudio import backend as aistudio
from rlaunch.backends.base import LaunchPlan
from rlaunch.job import data
from needs import missing

ROOT = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = ROOT / "scripts" / "local-cluster"
SHELLCHECK = ROOT / ".venv" / "bin" / "shellcheck"
PRESET = "rlinf-grpo-pipeline-1.5b"
PY_BIN = str(Path(sys.executable).parent)

# ---------------------------------------------------------------- stand-ins on the shared storage

MAIN_GRPO = r'''
"""Stand-in for RLinf's examples/reasoning/main_grpo.py (rlaunch tests): writes RLinf 0.3's outputs."""
import os
import sys
from pathlib import Path

import yaml


def load(argv):
    """RLinf's Hydra entry: --config-path DIR --config-name NAME, then key=value overrides."""
    opts, overrides, it = {}, [], iter(argv)
    for arg in it:
        if arg in ("--config-path", "--config-name"):
            opts[arg] = next(it)
        elif arg.split("=", 1)[0] in ("--config-path", "--config-name"):
            key, value = arg.split("=", 1)
            opts[key] = value
        else:
            overrides.append(arg)
    name = opts["--config-name"]
    cfg = yaml.safe_load(Path(opts["--config-path"], name if name.endswith(".yaml") else name + ".yaml").read_text())
    for item in overrides:
        key, _, value = item.lstrip("+").partition("=")
        node = cfg
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if value else value
    return cfg


def actor_ranks(placement):
    for key, value in placement.items():
        if "actor" in str(key).split(","):
            value = value["placement"] if isinstance(value, dict) else value
            ranks = set()
            for part in str(value).split(","):
                low, _, high = part.partition("-")
                ranks.update(range(int(low), int(high or low) + 1))
            return sorted(ranks)
    raise SystemExit("stand-in: no actor in cluster.component_placement")


def write_shards(dcp, ranks, per_node):
    """One .distcp per actor rank, each written by a Ray task on the node its resource rank is on."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level="WARNING")
    nodes = sorted((n for n in ray.nodes() if n["Alive"]),
                   key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeManagerAddress"]))

    @ray.remote(num_cpus=0)
    def shard(path, rank):
        Path(path).write_bytes(b"distcp rank %d " % rank + os.urandom(64))
        return ray.util.get_node_ip_address()

    refs = [shard.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                nodes[min(rank // per_node, len(nodes) - 1)]["NodeID"], soft=False)
            ).remote(str(dcp / f"__{i}_0.distcp"), i) for i, rank in enumerate(ranks)]
    print("stand-in: actor shards written on", " ".join(ray.get(refs, timeout=120)), flush=True)


def main():
    cfg = load(sys.argv[1:])
    runner = cfg["runner"]
    steps = int(runner["max_steps"])
    out = Path(runner["output_dir"]) / str(runner["experiment_name"])
    hydra_dir = Path(((cfg.get("hydra") or {}).get("run") or {}).get("dir") or out / "hydra") / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    (hydra_dir / "config.yaml").write_text(yaml.safe_dump(cfg))

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(Path(runner["logger"]["log_path"]) / "tensorboard"))
    for step in range(1, steps + 1):
        writer.add_scalar("rollout/reward_scores", 0.25 * step, step)
        writer.add_scalar("actor/training/actor/final_loss", 1.0 / step, step)
        writer.add_scalar("actor/training/actor/grad_norm", 0.5, step)
        writer.add_scalar("actor/training/actor/lr", 1e-6, step)
    writer.close()

    step_dir = out / "checkpoints" / f"global_step_{steps}"
    dcp = step_dir / "actor" / "dcp_checkpoint"
    dcp.mkdir(parents=True, exist_ok=True)
    (dcp / ".metadata").write_bytes(b"dcp metadata " + os.urandom(32))
    write_shards(dcp, actor_ranks(cfg["cluster"]["component_placement"]),
                 int(os.environ.get("STANDIN_GPUS_PER_NODE", "2")))
    (step_dir / "data").mkdir(parents=True, exist_ok=True)
    (step_dir / "data" / "data.pt").write_bytes(b"dataloader state " + os.urandom(16))
    line = f"Step limit given by max_steps={steps} reached. Stopping run"
    (out / "log").mkdir(parents=True, exist_ok=True)
    (out / "log" / "main.log").write_text(f"stand-in RLinf\n{line}\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
'''


def _git(cwd: Path, *args: str) -> str:
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **who}, capture_output=True,
                          text=True, check=True).stdout.strip()


def make_checkout(checkouts: Path) -> tuple[Path, str]:
    """A git checkout holding the stand-in RLinf (an importable `rlinf` 0.3.0), at code/checkouts/<commit>."""
    work = checkouts / "new"
    files = {"examples/reasoning/main_grpo.py": MAIN_GRPO, "rlinf/__init__.py": '__version__ = "0.3.0"\n',
             "docs/index.md": "never uploaded: the RuntimeEnv excludes /docs/\n"}
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "stand-in RLinf")
    commit = _git(work, "rev-parse", "HEAD")
    return work.rename(checkouts / commit), commit


def write_manifest(directory: Path, files: dict[str, bytes]) -> None:
    """Files plus their SHA256SUMS, as `sha256sum` writes it."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, data in sorted(files.items()):
        (directory / name).write_bytes(data)
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}")
    (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")


@pytest.fixture()
def storage(tmp_path, monkeypatch):
    """WORK_ROOT with the pinned inputs in place; configs/versions.yaml pins the stand-in's commit
    and version."""
    work_root = tmp_path / "w"
    (work_root / "code/checkouts").mkdir(parents=True)
    code, commit = make_checkout(work_root / "code/checkouts")
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["frameworks"]["rlinf"]["commit"] = commit
    # The stand-in's nodes have the published RLinf (loader_version), not the pinned commit's 0.4.0.
    rlinf = versions["frameworks"]["rlinf"]
    rlinf["version"] = rlinf.get("loader_version", rlinf["version"])
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions, sort_keys=False))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    make_inputs(load(work_root, "t-inputs"))
    return {"root": work_root, "code": code, "commit": commit}


def make_inputs(spec: dict) -> None:
    """The pinned model and dataset where the spec says they are, each with its SHA256SUMS."""
    for item in aistudio.manifests(spec):
        files = {name: f"{item['what']} {name}\n".encode() for name in item["required"] if "*" not in name}
        if item["what"] == "model":
            files["model.safetensors"] = b"weights" * 100
        write_manifest(Path(item["dir"]), files)


def load(work_root: Path, run_id: str, sets: str = "") -> dict:
    return config.load(PRESET, {"INFRA": "aistudio", "RUN_ID": run_id}, f"storage.mount={work_root} {sets}")


def install(spec: dict) -> Path:
    aistudio.BACKEND.launch(LaunchPlan.render(spec, Path(spec.run.out)))
    return Path(aistudio.launch_dir(spec))


def form_env(spec: dict) -> dict[str, str]:
    env = json.loads(artifacts.finish(spec, aistudio.BACKEND.render(spec))["form.json"])["env"]
    # The form's PATH puts the image's venv first; here the launcher's venv is "the image".
    env["PATH"] = f"{PY_BIN}:{aistudio.SYSTEM_PATH}"
    return env


def run_script(spec: dict, launch: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(launch / "run.sh")], env={**form_env(spec), **env}, capture_output=True,
                          text=True, timeout=120, check=False)


def no_cluster() -> dict[str, str]:
    """A RAY_ADDRESS nobody listens on, and a short deadline: the job's first Ray step fails at once."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return {"RAY_ADDRESS": f"127.0.0.1:{port}", "RLAUNCH_PREFLIGHT_TIMEOUT_S": "1"}


# ---------------------------------------------------------------- inputs, before anything starts


MARKERS = {"WORKER_TOPOLOGY", "RLINF_PREFLIGHT_STATUS", "RLINF_VERIFICATION_STATUS", "STARTUP_EXIT_CODE"}


def test_preset_renders_the_seed_topology(storage):
    spec = load(storage["root"], "t-topology")
    files = artifacts.finish(spec, aistudio.BACKEND.render(spec))
    form = json.loads(files["form.json"])
    env = json.loads(files["runtime_env.json"])
    assert env["working_dir"] == str(storage["code"])
    assert env["excludes"] == ["/.git/", "/docs/"]
    assert env["env_vars"]["NCCL_IB_DISABLE"] == "1"
    assert env["env_vars"]["PYTHONPATH"].split(":")[0] == str(storage["code"])
    assert form["env"]["TARGET_STEPS"] == "2"
    assert form["env"]["PATH"].startswith("/opt/venv/reason/bin:")
    assert f"RLAUNCH_FRAMEWORK_COMMIT={storage['commit']}" in files["run.sh"]
    assert (form["workers"], form["gpus_per_worker"], form["gpu"]) == (2, 2, "A100-SXM4-80GB")
    assert form["spot"] and not form["rdma"]
    placement = yaml.safe_load(files["rlinf/rlaunch-grpo.yaml"])["cluster"]["component_placement"]
    assert placement == {"rollout": "0", "inference": "1", "actor": "2-3", "reward": "0"}


def _refused(spec: dict, launch: Path, message: str) -> None:
    proc = run_script(spec, launch)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not Path(spec.paths.run_dir).exists()  # nothing started, RUN_ID still unused
    assert "preflight" not in proc.stdout


def test_a_missing_model_file_is_named(storage):
    spec = load(storage["root"], "t-missing")
    launch = install(spec)
    model = Path(spec.paths.model_dir)
    (model / "model.safetensors").unlink()
    _refused(spec, launch, f"model: input {model}/model.safetensors missing or altered")


def test_an_altered_data_file_is_named(storage):
    spec = load(storage["root"], "t-altered")
    launch = install(spec)
    item = next(i for i in aistudio.manifests(spec) if i["what"] == "dataset")
    data_file = Path(item["dir"]) / item["required"][0]
    data_file.write_bytes(data_file.read_bytes() + b"x")
    _refused(spec, launch, f"dataset: input {data_file} missing or altered (does not match")


def test_a_manifest_that_omits_a_required_file_is_refused(storage):
    spec = load(storage["root"], "t-omitted")
    launch = install(spec)
    manifest = Path(spec.paths.model_dir) / "SHA256SUMS"
    manifest.write_text("".join(ln for ln in manifest.read_text().splitlines(True) if "config.json" not in ln))
    _refused(spec, launch, f"model: {manifest} does not list config.json")


def test_a_model_without_weights_is_refused(storage):
    spec = load(storage["root"], "t-noweights")
    launch = install(spec)
    model = Path(spec.paths.model_dir)
    (model / "SHA256SUMS").write_text("".join(
        ln for ln in (model / "SHA256SUMS").read_text().splitlines(True) if ".safetensors" not in ln))
    _refused(spec, launch, f"model: {model}/SHA256SUMS does not list *.safetensors")


SEED_MODEL = "models/modelscope/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03"
SEED_DATA = "datasets/inclusionAI/AReaL-boba-Data/1799c00be3f1216ab55a5cae3562d654dbfd7d82"


def test_inputs_in_the_seed_layout_are_checked_where_they_are(storage):
    """Seed 003's layout: model.path and data.path move the manifest checks, the RLinf config and
    preflight's inputs with them; rlaunch's own directories are not looked at."""
    root = storage["root"]
    spec = load(root, "t-seed-layout", f"model.path={root}/{SEED_MODEL} data.path={root}/{SEED_DATA}")
    assert (spec.paths.model_dir, spec.paths.data_dir) == (f"{root}/{SEED_MODEL}", f"{root}/{SEED_DATA}")
    shutil.rmtree(root / "models")
    shutil.rmtree(root / "data")  # rlaunch's layout is gone: only the seed's is there
    make_inputs(spec)
    assert data.verify(root / SEED_MODEL)[2]  # the prepare step's stamp, on the model only
    launch = install(spec)
    cfg = yaml.safe_load((launch / "rlinf/rlaunch-grpo.yaml").read_text())
    assert cfg["actor"]["model"]["model_path"] == f"{root}/{SEED_MODEL}"
    assert cfg["data"]["train_data_paths"] == [f"{root}/{SEED_DATA}/AReaL-boba-106k.jsonl"]
    proc = run_script(spec, launch, **no_cluster())
    assert f"model: 3 files match {root}/{SEED_MODEL}/SHA256SUMS (by its stamp: no file read)" in proc.stdout, \
        proc.stdout + proc.stderr
    # Without a stamp, every byte is hashed, and the line before says how many.
    assert f"dataset {root}/{SEED_DATA}: no SHA256SUMS.stamp (not verified since it was written): a full check " \
           "reads" in proc.stdout
    assert f"dataset: 1 files match {root}/{SEED_DATA}/SHA256SUMS\n" in proc.stdout
    assert "=== 5. run directory" in proc.stdout  # every input check passed
    # The job's first step is the accelerator rule's, and with no cluster it fails, naming why.
    assert "rlaunch-job: accelerator rule a100-flash-attn-4 on every node" in proc.stdout
    assert "accelerator: FAILED ray cluster: cannot connect to RAY_ADDRESS=127.0.0.1:" in proc.stdout
    assert proc.returncode != 0 and "RLAUNCH_RUN_STATUS=failed" in proc.stdout
    (Path(spec.paths.model_dir) / "model.safetensors").unlink()
    spec2 = load(root, "t-seed-layout-2", f"model.path={root}/{SEED_MODEL} data.path={root}/{SEED_DATA}")
    _refused(spec2, install(spec2), f"model: input {root}/{SEED_MODEL}/model.safetensors missing or altered")


def image_python(tmp_path: Path, modules: list[str]) -> str:
    """A stand-in for the image's python: the launcher's interpreter seeing only these packages."""
    import importlib.util

    site = tmp_path / "image-site"
    site.mkdir(parents=True)
    for name in modules:
        (site / name).symlink_to(Path(importlib.util.find_spec(name).origin).parent)
    wrapper = tmp_path / "image-python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_image_needs_only_what_the_jobs_steps_import(storage, tmp_path):
    """ray, yaml and tensorboard for RLinf's steps, and never fire (no step imports it)."""
    spec = load(storage["root"], "t-modules")
    launch = install(spec)
    lacking = image_python(tmp_path / "a", ["ray", "tensorboard"])
    proc = run_script(spec, launch, RLAUNCH_PYTHON=lacking)
    assert proc.returncode == 3 and "lacks modules the job's steps import: yaml" in proc.stderr, proc.stderr
    assert not Path(spec.paths.run_dir).exists()
    enough = image_python(tmp_path / "b", ["ray", "yaml", "tensorboard"])  # no fire
    proc = run_script(spec, launch, RLAUNCH_PYTHON=enough, **no_cluster())
    assert "lacks modules" not in proc.stderr and "=== 5. run directory" in proc.stdout, proc.stdout + proc.stderr


def test_the_preset_scripts_are_shellcheck_clean(storage, tmp_path):
    if not SHELLCHECK.exists():
        missing("shellcheck not installed (make setup)")
    spec = load(storage["root"], "t-lint")
    files = artifacts.finish(spec, aistudio.BACKEND.render(spec))
    for name in ("run.sh", "startup.sh"):
        (tmp_path / name).write_text(files[name])
    proc = subprocess.run([str(SHELLCHECK), "-s", "bash", "run.sh", "startup.sh"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_a_checkout_off_its_pin_or_dirty_is_refused(storage):
    spec = load(storage["root"], "t-dirty")
    launch = install(spec)
    entry = storage["code"] / "examples/reasoning/main_grpo.py"
    entry.write_text(entry.read_text() + "# local edit\n")
    _refused(spec, launch, f"rlinf checkout {storage['code']} has local changes")
    _git(storage["code"], "commit", "-qam", "edit")
    _refused(spec, launch, f"is at {_git(storage['code'], 'rev-parse', 'HEAD')}, pinned {storage['commit']}")


def test_make_launch_installs_and_says_submission_is_manual(storage, tmp_path, monkeypatch, capsys):
    from rlaunch.cli import commands as cli

    monkeypatch.setattr(cli, "LAST_RUN", tmp_path / "last-run")  # not the repo's build/last-run
    root, out = storage["root"], tmp_path / "out"
    sets = f"storage.mount={root}"
    knobs = [f"--PRESET={PRESET}", "--INFRA=aistudio", f"--WORK_ROOT={root}", "--RUN_ID=t-cli", f"--OUT={out}"]
    assert cli.main(["launch", *knobs, f"--SET={sets}"]) == 0
    printed = capsys.readouterr().out
    assert "runtime_env.json accepted by ray.runtime_env.RuntimeEnv" in printed  # plan's checks ran
    assert "submission is manual" in printed
    assert (root / "rlaunch/launches/t-cli/SHA256SUMS").is_file()
    assert (out / "form.md").is_file() and (out / "startup.sh").is_file()
    assert cli.main(["status", f"--OUT={out}"]) == 0
    assert cli.main(["down", f"--OUT={out}"]) == 0
    assert "stop the task in the AIStudio console" in capsys.readouterr().out


# ---------------------------------------------------------------- on a real cluster

SUBMIT = r'''
"""The platform's part: submit the startup command as a Ray job with the pasted RuntimeEnv."""
import json, shlex, sys, time
from ray.job_submission import JobSubmissionClient

address, runtime_env, startup, form_env, deadline = sys.argv[1:6]
env = json.load(open(runtime_env))
entry = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in json.loads(form_env).items())
entry += " bash -c " + shlex.quote(open(startup).read())
client = JobSubmissionClient(address)
job = client.submit_job(entrypoint=entry, runtime_env=env)
end = time.monotonic() + float(deadline)
status = "PENDING"
while time.monotonic() < end and status not in ("SUCCEEDED", "FAILED", "STOPPED"):
    time.sleep(0.5)
    status = str(client.get_job_status(job))
print(client.get_job_logs(job))
print(f"JOB_STATUS={status}")
'''


@pytest.fixture()
def cluster(tmp_path):
    """A real 2-node network-namespace Ray cluster, removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        missing("needs root and iproute2 for network namespaces")
    name = f"ais{os.getpid() % 100000}"
    env = {**os.environ, "RLAUNCH_CLUSTER_NAME": name, "RLAUNCH_NODES": "2",
           "RLAUNCH_STATE_DIR": str(tmp_path / "cluster"), "RLAUNCH_RAY": f"{PY_BIN}/ray",
           "RLAUNCH_LOCAL_MODE": "netns", "RLAUNCH_DEADLINE_S": "240"}
    up = subprocess.run([str(LOCAL_CLUSTER), "up"], env=env, capture_output=True, text=True, timeout=300,
                        check=False)
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads((tmp_path / "cluster" / "cluster.json").read_text())
        yield {"env": env, "address": f"http://{info['head_ip']}:{info['dashboard_port']}"}
    finally:
        subprocess.run([str(LOCAL_CLUSTER), "down"], env=env, capture_output=True, timeout=120, check=False)


def submit(cluster: dict, spec: dict, launch: Path, tmp_path: Path) -> str:
    """Run one task the way the platform does; returns the job's log (ends with JOB_STATUS=...)."""
    (tmp_path / "submit.py").write_text(SUBMIT)
    env = {**form_env(spec), "STANDIN_GPUS_PER_NODE": "2"}  # the preset's 2 GPUs per worker
    argv = [str(LOCAL_CLUSTER), "exec", "0", "--", sys.executable, str(tmp_path / "submit.py"),
            cluster["address"], str(launch / "runtime_env.json"), str(launch / "startup.sh"),
            json.dumps(env), "240"]
    proc = subprocess.run(argv, env={**cluster["env"], "RAY_AUTH_MODE": "disabled"}, capture_output=True,
                          text=True, timeout=300, check=False)
    assert "JOB_STATUS=" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout


def cpu_standin(launch: Path) -> None:
    """Tell preflight the truth about the stand-in platform: its nodes have no GPUs, and its image's
    venv is the launcher's.

    The RLinf adapter rightly refuses to render a GPU-less RLinf run, and preflight rightly fails a
    2-GPU spec on nodes without GPUs, so the installed spec.json (and its SHA256SUMS line) is the one
    thing changed: cluster.gpus_per_node=0, and preflight records its GPU checks as skipped;
    infra.image_bin is the launcher venv's bin, which the form's PATH puts first here (form_env).
    cluster.accelerator stays A100, what the run was rendered for, so the A100 rule applies: the
    workaround runs on every node for real (this venv has no flash-attn-4: "absent"), preflight checks
    the metadata for real and skips the compute capability and the imports (no GPU, no CUDA). run.sh,
    job.sh, the startup command, the RuntimeEnv and the RLinf config run exactly as rendered.
    """
    path = launch / "spec.json"
    spec = json.loads(path.read_text())
    spec["cluster"]["gpus_per_node"] = 0
    spec["infra"]["image_bin"] = PY_BIN
    path.write_text(json.dumps(spec, indent=2) + "\n")
    (launch / aistudio.MANIFEST).write_text(aistudio.manifest_text(launch))


@pytest.mark.cluster
@pytest.mark.slow  # about 2 minutes: cluster formation, two task submissions, teardown
def test_run_script_on_a_cluster_standing_in_for_the_platform(storage, cluster, tmp_path):
    spec = load(storage["root"], "t-cluster")
    launch = install(spec)
    cpu_standin(launch)
    run_dir = Path(spec.paths.run_dir)
    started = time.monotonic()
    log = submit(cluster, spec, launch, tmp_path)
    print(log)
    assert "JOB_STATUS=SUCCEEDED" in log, log
    print(f"first run: {time.monotonic() - started:.1f} s")
    assert "RLAUNCH_RUN_STATUS=passed" in log
    # Seed 003's markers beside it, from the same reports; STARTUP_EXIT_CODE after them, as there.
    assert "WORKER_TOPOLOGY=rank=0 role=Ray Head" in log and "WORKER_TOPOLOGY=rank=1 role=Ray Worker" in log
    assert "NVIDIA_DRIVER_VERSION_NODE_0=" in log and "NVIDIA_DRIVER_VERSION_NODE_1=" in log
    assert "RLINF_PREFLIGHT_STATUS=passed" in log and "RLINF_VERIFICATION_STATUS=passed" in log
    assert log.index("RLAUNCH_RUN_STATUS=passed") < log.index("RLINF_VERIFICATION_STATUS") < log.index("STARTUP_EXIT_CODE=0")
    assert "preflight: passed on 2 nodes" in log
    assert "postflight: passed (rlinf" in log
    preflight = json.loads((run_dir / "preflight.json").read_text())
    verification = json.loads((run_dir / "verification.json").read_text())
    assert preflight["passed"] and verification["passed"]
    # The A100 rule: the workaround ran on both nodes before preflight, then preflight's checks.
    assert log.index("accelerator: applied a100-flash-attn-4 on 2 nodes") < log.index("preflight: passed")
    accel = json.loads((run_dir / "accelerator.json").read_text())
    assert accel["passed"] and len(accel["nodes"]) == 2
    assert {r["action"] for n in accel["nodes"] for r in n["rules"]["a100-flash-attn-4"]} == {"absent"}
    checks = {c["name"]: c for c in preflight["checks"]}
    assert checks["a100-flash-attn-4 metadata"]["passed"] and not checks["a100-flash-attn-4 metadata"].get("skipped")
    for name in ("a100-flash-attn-4 compute capability", "a100-flash-attn-4 imports"):
        assert checks[name]["skipped"] and "cluster.gpus_per_node=0" in checks[name]["detail"]
    assert checks["python executable"]["detail"] == f"under {PY_BIN} on all 2 nodes"
    assert all(n["python_executable"].startswith(PY_BIN + "/") for n in preflight["nodes"])
    checks = {c["name"]: c for c in verification["checks"]}
    assert checks["resolved placement"]["passed"] and checks["resolved outputs"]["passed"]
    assert "/opt/Megatron-LM" in json.loads((launch / "runtime_env.json").read_text())["env_vars"]["PYTHONPATH"]
    assert (run_dir / "logs/exit_code").read_text().strip() == "0"
    worker_ip = sorted(n["ip"] for n in preflight["nodes"])[-1]
    assert f"actor shards written on {worker_ip} {worker_ip}" in log  # actor ranks 2-3: worker 1
    driver_log = (run_dir / "driver.log").read_text()
    # rlaunch's status line, then seed 003's markers, STARTUP_EXIT_CODE last (issue 31).
    lines = driver_log.rstrip().splitlines()
    status = [i for i, line in enumerate(lines) if line.startswith("RLAUNCH_RUN_STATUS=")]
    assert status and lines[status[-1]].startswith("RLAUNCH_RUN_STATUS=passed run_id=t-cluster exit_code=0")
    assert lines[-1] == "STARTUP_EXIT_CODE=0"
    assert all(line.split("=")[0] in MARKERS or line.startswith("NVIDIA_DRIVER_VERSION_NODE_")
               for line in lines[status[-1] + 1:])
    for name in ("RLAUNCH_FRAMEWORK_COMMIT=" + storage["commit"], "NCCL_IB_DISABLE=1", "RUN_ID=t-cluster"):
        assert name in driver_log
    assert "ray start" not in driver_log

    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    again = submit(cluster, spec, launch, tmp_path)
    assert "JOB_STATUS=FAILED" in again
    assert f"refusing to reuse RUN_ID=t-cluster: {run_dir} already exists" in again
    assert "preflight" not in again.split("=== 3.")[-1]
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")} == before

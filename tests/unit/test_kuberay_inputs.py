"""The inputs Job of INFRA=kuberay: rendered, and its script (setup.sh) run for real against a local
directory standing in for the PVC, with rlaunch's real download code (huggingface_hub, datasets)
fetching from a local Hugging Face Hub stand-in (tests/fakehub.py). A second run downloads nothing;
inputs a user put there in the seeds' layout get their manifests computed once.

No root: setup.sh run by bash on a mount under tmp_path. Root (seconds): the Job's pod run by the
KubeRay harness's kubelet (tests/kuberay_harness.py run_pod), the hub in the cluster's network.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kuberay_harness as kh
from fakehub import FakeHub, gsm8k_repo
from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.backends.kuberay import backend as kuberay
from rlaunch.backends.kuberay import manifests
from rlaunch.backends.kuberay import names

ROOT = Path(__file__).resolve().parents[2]
PRESET = "verl-ppo-gsm8k-0.5b"  # seed 002 on VKE: verl, the pinned Qwen2.5-0.5B-Instruct and GSM8K
SEED_LAYOUT = "model.path=/data/Qwen2.5-0.5B-Instruct data.path=/data/data/gsm8k"  # seed 002's paths


def render(sets: str = "", run_id: str = "inp"):
    spec = config.load(PRESET, {"INFRA": "kuberay", "RUN_ID": run_id}, sets)
    return spec, artifacts.finish(spec, kuberay.BACKEND.render(spec))


def hub_tree(root: Path) -> Path:
    """The pinned model and dataset repositories, at their pinned commits, a few bytes each."""
    versions = pins.load_versions()
    model, dataset = versions["models"]["qwen2.5-0.5b-instruct"], versions["datasets"]["gsm8k"]
    m = root / "models" / model["hf_id"] / model["revision"]
    m.mkdir(parents=True)
    (m / "config.json").write_text('{"model_type": "qwen2"}\n')
    (m / "tokenizer_config.json").write_text("{}\n")
    (m / "model.safetensors").write_bytes(b"\0" * 4096)
    gsm8k_repo(root, dataset["hf_id"], dataset["revision"])
    return root


def seed_layout(pvc: Path) -> None:
    """What a user of seeds 002/004 uploaded: the model's git clone and verl's GSM8K parquet."""
    model = pvc / "Qwen2.5-0.5B-Instruct"
    (model / ".git").mkdir(parents=True)
    (model / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (model / "config.json").write_text('{"model_type": "qwen2"}\n')
    (model / "tokenizer_config.json").write_text("{}\n")
    (model / "model.safetensors").write_bytes(b"\1" * 4096)
    data = pvc / "data" / "gsm8k"
    data.mkdir(parents=True)
    (data / "train.parquet").write_bytes(b"PAR1 train")
    (data / "test.parquet").write_bytes(b"PAR1 test")


def verified(directory: Path) -> bool:
    return subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"], cwd=directory,
                          capture_output=True).returncode == 0


# ---------------------------------------------------------------- rendered (pure)


def test_the_inputs_job_is_rendered_and_runs_setup_sh_on_the_shared_volume():
    spec, files = render("secrets=[HF_TOKEN]")
    job = yaml.safe_load(files["kuberay/inputs.yaml"])
    assert job["kind"] == "Job" and job["metadata"]["name"] == "inp-inputs"
    assert job["metadata"]["labels"]["rlaunch.io/run"] == "inp"
    assert job["spec"]["activeDeadlineSeconds"] == spec.infra.kuberay.inputs_timeout_s
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["bash", "/opt/rlaunch-run/setup.sh"] and c["image"] == spec.pins.image
    assert "nvidia.com/gpu" not in c["resources"]["limits"] and "tolerations" not in pod  # a CPU pod
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"}  # on nodes of the image's architecture
    assert c["resources"]["requests"] == c["resources"]["limits"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "inp-secrets", "key": "HF_TOKEN"}}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/data"]]["persistentVolumeClaim"]["claimName"] == names.pvc_name(spec)
    assert volumes[mounts["/opt/rlaunch-run"]]["configMap"]["items"] == [{"key": "setup.sh", "path": "setup.sh"}]
    # setup.sh travels in the artifacts ConfigMap, exactly as rendered.
    assert manifests.configmap_manifest(spec, files)["data"]["setup.sh"] == files["setup.sh"]
    assert "--model=qwen2.5-0.5b-instruct --out=/data/models/qwen2.5-0.5b-instruct/" in files["setup.sh"]


def test_no_inputs_no_job():
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "r"})
    files = kuberay.BACKEND.render(spec)
    assert "kuberay/inputs.yaml" not in files and "setup.sh" not in files


def test_plan_applies_the_rayjob_only_after_the_inputs_job():
    spec, files = render()
    lines = kuberay.BACKEND.plan(spec, files)
    wait = next(i for i, line in enumerate(lines) if line.startswith("wait for Job inp-inputs"))
    assert "inputs.yaml" in lines[wait - 1] and "rayjob.yaml" not in lines[wait - 1]
    assert lines[wait + 1].endswith("/kuberay/rayjob.yaml")


def test_user_paths_in_the_seeds_layout_are_used_by_verl_and_adopted_not_downloaded():
    spec, files = render(SEED_LAYOUT)
    argv = files["job.sh"]
    assert "actor_rollout_ref.model.path=/data/Qwen2.5-0.5B-Instruct" in argv
    assert "data.train_files=/data/data/gsm8k/train.parquet" in argv
    setup = files["setup.sh"]
    assert "--adopt=/data/Qwen2.5-0.5B-Instruct --what=model" in setup
    assert "--adopt=/data/data/gsm8k --what=dataset --require=train.parquet --require=test.parquet" in setup
    assert "--model=" not in setup and "--dataset=" not in setup


# ---------------------------------------------------------------- setup.sh for real, no root


def run_setup(script: Path, hub: FakeHub, tmp: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "RLAUNCH_HOME": str(ROOT),
           "RLAUNCH_PYTHON": sys.executable, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp / "hf-home"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HOME": str(tmp)}
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)


def pinned_setup(tmp_path: Path) -> tuple[dict, Path]:
    """The preset's setup.sh with the shared volume at tmp_path/pvc."""
    spec, files = render(f"storage.mount={tmp_path / 'pvc'}")
    script = tmp_path / "setup.sh"
    script.write_text(files["setup.sh"])
    return spec, script


def test_setup_sh_downloads_the_pinned_inputs_once_and_a_second_run_downloads_nothing(tmp_path):
    spec, script = pinned_setup(tmp_path)
    with FakeHub(hub_tree(tmp_path / "hub")) as hub:
        first = run_setup(script, hub, tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        got = hub.file_gets()
        assert any(p.endswith("/model.safetensors") for p in got) and any(p.endswith("train-00000-of-00001.parquet") for p in got)
        model, data = Path(spec.paths.model_dir), Path(spec.paths.data_dir)
        assert verified(model) and verified(data)
        assert (data / "train.parquet").is_file() and (model / "config.json").is_file()
        before = len(hub.requests)
        second = run_setup(script, hub, tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
        assert hub.requests[before:] == []  # not one request: everything passed its manifest
        assert second.stdout.count("matches its SHA256SUMS: kept") == 2


def test_a_changed_pinned_file_is_downloaded_again(tmp_path):
    spec, script = pinned_setup(tmp_path)
    with FakeHub(hub_tree(tmp_path / "hub")) as hub:
        assert run_setup(script, hub, tmp_path).returncode == 0
        (Path(spec.paths.model_dir) / "config.json").write_text("{}")  # a torn copy
        before = len(hub.requests)
        again = run_setup(script, hub, tmp_path)
        assert again.returncode == 0, again.stderr
        assert any("/Qwen2.5-0.5B-Instruct/" in p for _, p in hub.requests[before:])
        assert not any("gsm8k" in p for _, p in hub.requests[before:])  # the dataset still verified
        assert verified(Path(spec.paths.model_dir))


def test_seed_layout_manifests_are_computed_once_then_checked(tmp_path):
    mount = tmp_path / "pvc"
    seed_layout(mount)
    sets = SEED_LAYOUT.replace("=/data/", f"={mount}/")
    _, files = render(f"storage.mount={mount} {sets}")
    script = tmp_path / "setup.sh"
    script.write_text(files["setup.sh"])
    with FakeHub(tmp_path / "empty-hub") as hub:
        first = run_setup(script, hub, tmp_path)
        assert first.returncode == 0, first.stderr
        assert "SHA256SUMS computed" in first.stdout
        manifest = (mount / "Qwen2.5-0.5B-Instruct" / "SHA256SUMS").read_text()
        assert "model.safetensors" in manifest and ".git/" not in manifest  # a clone's store is not input
        assert verified(mount / "data" / "gsm8k")
        second = run_setup(script, hub, tmp_path)
        assert second.returncode == 0 and second.stdout.count("kept") == 2
        (mount / "data" / "gsm8k" / "train.parquet").write_bytes(b"PAR1 changed")
        third = run_setup(script, hub, tmp_path)
        assert hub.requests == []  # the user's inputs are never downloaded
    assert third.returncode == 3, third.stdout + third.stderr
    assert "train.parquet missing or changed" in third.stderr and "delete" in third.stderr


def test_a_user_model_dir_without_weights_is_refused_before_any_manifest(tmp_path):
    mount = tmp_path / "pvc"
    (mount / "Qwen2.5-0.5B-Instruct").mkdir(parents=True)
    (mount / "Qwen2.5-0.5B-Instruct" / "config.json").write_text("{}")
    seed_layout(mount / "elsewhere")
    _, files = render(f"storage.mount={mount} model.path={mount}/Qwen2.5-0.5B-Instruct "
                      f"data.path={mount}/elsewhere/data/gsm8k")
    script = tmp_path / "setup.sh"
    script.write_text(files["setup.sh"])
    with FakeHub(tmp_path / "empty-hub") as hub:
        result = run_setup(script, hub, tmp_path)
    assert result.returncode == 3
    assert "tokenizer_config.json, *.safetensors in the model directory" in result.stderr
    assert not (mount / "Qwen2.5-0.5B-Instruct" / "SHA256SUMS").exists()


# ---------------------------------------------------------------- the Job's pod, in the harness (root)


def inputs_pod(files: dict, hub_url: str) -> dict:
    """The Job's pod template, as the Job controller creates the pod; HF_ENDPOINT points it at the
    hub stand-in (the only change: this host has no internet)."""
    job = yaml.safe_load(files["kuberay/inputs.yaml"])
    pod = {"metadata": {**job["spec"]["template"]["metadata"], "name": f"{job['metadata']['name']}-x7k2p"},
           "spec": job["spec"]["template"]["spec"]}
    pod["spec"]["containers"][0]["env"].append({"name": "HF_ENDPOINT", "value": hub_url})
    return pod


def _start_hub(root: Path, host: str) -> FakeHub:
    return FakeHub(root, host=host).__enter__()  # bound (and served) in the operator's namespace


def test_the_inputs_job_pod_fills_the_pvc_and_a_second_pod_downloads_nothing(host_ok, tmp_path):
    spec, files = render(run_id=f"inp-{os.getpid()}")
    objects = kh.kuberay_objects(spec, files)
    pvc = tmp_path / "pvc"
    with kh.RayJobRun(objects, workdir=tmp_path / "k8s", images=kh.default_images(spec),
                      claims={names.pvc_name(spec): pvc}) as run:
        hub = run._op.call(_start_hub, hub_tree(tmp_path / "hub"), run.net.operator_ip)
        try:
            pod = inputs_pod(files, hub.url)
            first = run.run_pod(pod, deadline_s=300)
            assert first.phase == "Succeeded", first.tail(60)
            model = pvc / Path(spec.paths.model_dir).relative_to("/data")
            data = pvc / Path(spec.paths.data_dir).relative_to("/data")
            assert verified(model) and verified(data) and (data / "test.parquet").is_file()
            assert any(p.endswith("/model.safetensors") for p in hub.file_gets())
            before = len(hub.requests)
            # The next launch's Job pod (or a retry) on the same volume.
            again = {**pod, "metadata": {**pod["metadata"], "name": pod["metadata"]["name"][:-5] + "b9q4z"}}
            second = run.run_pod(again, deadline_s=120)
            assert second.phase == "Succeeded", second.tail(60)
            assert hub.requests[before:] == [], hub.requests[before:]
            assert second.log().count("matches its SHA256SUMS: kept") == 2
        finally:
            hub.__exit__(None, None, None)

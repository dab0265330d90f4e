"""AIStudio's prepare step (setup.sh in the launch directory, seed 003's AICoder step) run for real
on this host: the platform's shared storage is a temp dir, the Hub and ModelScope local stand-ins
(tests/fakehub.py, tests/fakemodelscope.py) that the real clients talk to, RLinf's checkout a local
git repository pinned in a copy of versions.yaml. The first run downloads the pinned dataset (the
Hub's) and model (ModelScope's, into seed 003's models/modelscope/<org>/<name>/<revision>) and
writes the manifests; a second downloads nothing; a model its user already put there with its
SHA256SUMS is kept. Too little free space (seed 003's 25 GiB) stops it before any download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakehub import FakeHub
from fakemodelscope import FakeModelScope
from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.backends.aistudio import backend as aistudio
from test_aistudio_run import PRESET, ROOT, SEED_MODEL, install, make_checkout

PY_BIN = str(Path(sys.executable).parent)
MS_REV = SEED_MODEL.rsplit("/", 1)[1]


@pytest.fixture()
def platform(tmp_path, monkeypatch):
    """WORK_ROOT with the pinned checkout only (the user's clone); the dataset is the Hub's and the
    model ModelScope's, each at its pinned revision."""
    work_root = tmp_path / "w"
    (work_root / "code/checkouts").mkdir(parents=True)
    _, commit = make_checkout(work_root / "code/checkouts")
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["frameworks"]["rlinf"]["commit"] = commit
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions, sort_keys=False))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    spec = config.load(PRESET, {"INFRA": "aistudio", "RUN_ID": "t-prepare"}, f"storage.mount={work_root}")
    pinned = pins.load_versions()["models"]["deepseek-r1-distill-qwen-1.5b"]
    model = tmp_path / "modelscope" / "models" / pinned["hf_id"] / pinned["revision"]
    model.mkdir(parents=True)
    for name, data in (("config.json", b'{"model_type": "qwen2"}\n'), ("tokenizer_config.json", b"{}\n"),
                       ("model.safetensors", b"\0" * 4096)):
        (model / name).write_bytes(data)
    boba = pins.load_versions()["datasets"]["boba"]
    hub = tmp_path / "hub" / "datasets" / boba["hf_id"] / boba["revision"]
    hub.mkdir(parents=True)
    (hub / boba["file"]).write_text(json.dumps({"prompt": "1+1?", "solutions": ["\\boxed{2}"]}) + "\n")
    return spec, install(spec), tmp_path


def prepare(launch: Path, hub: FakeHub, ms: FakeModelScope, tmp: Path, path: str = "") -> subprocess.CompletedProcess:
    """`cd home && bash ../setup.sh`, as the form tells the user to run it where the storage is mounted."""
    env = {"PATH": f"{path}{PY_BIN}:/usr/bin:/bin", "RLAUNCH_PYTHON": sys.executable, "HF_ENDPOINT": hub.url,
           "HF_HOME": str(tmp / "hf-home"), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HOME": str(tmp),
           "MODELSCOPE_ENDPOINT": ms.url, "MODELSCOPE_CACHE": str(tmp / "ms-cache")}
    return subprocess.run(["bash", "../setup.sh"], cwd=launch / "home", env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_prepare_step_downloads_once_and_a_second_run_downloads_nothing(platform):
    spec, launch, tmp = platform
    assert (launch / "setup.sh").is_file() and "setup.sh" in (launch / aistudio.MANIFEST).read_text()
    boba = pins.load_versions()["datasets"]["boba"]
    model = Path(spec.paths.model_dir)
    assert model == Path(spec.storage.mount) / SEED_MODEL  # seed 003's own path
    with FakeHub(tmp / "hub") as hub, FakeModelScope(tmp / "modelscope") as ms:
        first = prepare(launch, hub, ms, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        assert any(p.endswith(boba["file"]) for p in hub.file_gets())
        assert any("FilePath=model.safetensors" in p and MS_REV in p for p in ms.file_gets())
        assert (model / "model.safetensors").stat().st_size == 4096
        for key in ("model_dir", "data_dir"):
            directory = Path(getattr(spec.paths, key))
            assert subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"],
                                  cwd=directory).returncode == 0, directory
        before, ms_before = len(hub.requests), len(ms.requests)
        second = prepare(launch, hub, ms, tmp)
        assert second.returncode == 0, second.stdout + second.stderr
        assert hub.requests[before:] == [] and ms.requests[ms_before:] == []
        assert second.stdout.count("matches its SHA256SUMS: kept") == 2


def test_a_model_its_user_already_put_in_seed_003s_layout_is_kept(platform):
    spec, launch, tmp = platform
    model = Path(spec.paths.model_dir)
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\1" * 64)  # the seed's own copy, with its SHA256SUMS
    subprocess.run("sha256sum model.safetensors > SHA256SUMS", shell=True, cwd=model, check=True)
    with FakeHub(tmp / "hub") as hub, FakeModelScope(tmp / "modelscope") as ms:
        proc = prepare(launch, hub, ms, tmp)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"inputs: model {model} matches its SHA256SUMS: kept" in proc.stdout
        assert ms.requests == []


def test_too_little_free_space_stops_the_prepare_step_before_any_download(platform):
    spec, launch, tmp = platform
    stub = tmp / "stub"
    stub.mkdir()
    (stub / "df").write_text("#!/bin/sh\necho Avail\necho 1048576\n")  # 1 GiB free
    os.chmod(stub / "df", 0o755)
    with FakeHub(tmp / "hub") as hub, FakeModelScope(tmp / "modelscope") as ms:
        proc = prepare(launch, hub, ms, tmp, path=f"{stub}:")
        assert proc.returncode == 3
        need, why = aistudio.space_needed(spec)
        assert f"has 1 GiB free, the run needs {need} GiB: {why}: free some space" in proc.stderr
        assert hub.requests == [] and ms.requests == []
    assert not Path(spec.paths.data_dir).exists()

"""AIStudio's prepare step (setup.sh in the launch directory, seed 003's AICoder step) run for real
on this host: the platform's shared storage is a temp dir, the Hub a local stand-in
(tests/fakehub.py), RLinf's checkout a local git repository pinned in a copy of versions.yaml.
The first run downloads the pinned dataset and writes the manifests; a second downloads nothing.
Too little free space (seed 003's 25 GiB) stops it before any download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakehub import FakeHub
from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.backends.aistudio import backend as aistudio
from test_aistudio_run import PRESET, ROOT, install, make_checkout

PY_BIN = str(Path(sys.executable).parent)


@pytest.fixture()
def platform(tmp_path, monkeypatch):
    """WORK_ROOT with the pinned checkout only (the user's clone), and the model the user put there
    (seed 003 fetches it from ModelScope); the dataset is the Hub's, at its pinned revision."""
    work_root = tmp_path / "w"
    (work_root / "code/checkouts").mkdir(parents=True)
    _, commit = make_checkout(work_root / "code/checkouts")
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["frameworks"]["rlinf"]["commit"] = commit
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions, sort_keys=False))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    spec = config.load(PRESET, {"INFRA": "aistudio", "RUN_ID": "t-prepare"}, f"storage.mount={work_root}")
    model = Path(spec["paths"]["model_dir"])
    model.mkdir(parents=True)
    for name, data in (("config.json", b'{"model_type": "qwen2"}\n'), ("tokenizer_config.json", b"{}\n"),
                       ("model.safetensors", b"\0" * 4096)):
        (model / name).write_bytes(data)
    boba = pins.load_versions()["datasets"]["boba"]
    hub = tmp_path / "hub" / "datasets" / boba["hf_id"] / boba["revision"]
    hub.mkdir(parents=True)
    (hub / boba["file"]).write_text(json.dumps({"prompt": "1+1?", "solutions": ["\\boxed{2}"]}) + "\n")
    return spec, install(spec), tmp_path


def prepare(launch: Path, hub: FakeHub, tmp: Path, path: str = "") -> subprocess.CompletedProcess:
    """`cd home && bash ../setup.sh`, as the form tells the user to run it where the storage is mounted."""
    env = {"PATH": f"{path}{PY_BIN}:/usr/bin:/bin", "RLAUNCH_PYTHON": sys.executable, "HF_ENDPOINT": hub.url,
           "HF_HOME": str(tmp / "hf-home"), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HOME": str(tmp)}
    return subprocess.run(["bash", "../setup.sh"], cwd=launch / "home", env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_prepare_step_downloads_once_and_a_second_run_downloads_nothing(platform):
    spec, launch, tmp = platform
    assert (launch / "setup.sh").is_file() and "setup.sh" in (launch / aistudio.MANIFEST).read_text()
    boba = pins.load_versions()["datasets"]["boba"]
    with FakeHub(tmp / "hub") as hub:
        first = prepare(launch, hub, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        assert any(p.endswith(boba["file"]) for p in hub.file_gets())
        for key in ("model_dir", "data_dir"):
            directory = Path(spec["paths"][key])
            assert subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"],
                                  cwd=directory).returncode == 0, directory
        before = len(hub.requests)
        second = prepare(launch, hub, tmp)
        assert second.returncode == 0, second.stdout + second.stderr
        assert hub.requests[before:] == []
        assert second.stdout.count("matches its SHA256SUMS: kept") == 2


def test_too_little_free_space_stops_the_prepare_step_before_any_download(platform):
    spec, launch, tmp = platform
    stub = tmp / "stub"
    stub.mkdir()
    (stub / "df").write_text("#!/bin/sh\necho Avail\necho 1048576\n")  # 1 GiB free
    os.chmod(stub / "df", 0o755)
    with FakeHub(tmp / "hub") as hub:
        proc = prepare(launch, hub, tmp, path=f"{stub}:")
        assert proc.returncode == 3
        assert f"has 1 GiB free; seed 003 asks for {aistudio.FREE_GIB} GiB a run" in proc.stderr
        assert hub.requests == []
    assert not Path(spec["paths"]["data_dir"]).exists()

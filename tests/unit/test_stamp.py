"""Inputs checked by metadata (issue 46): a full verification leaves SHA256SUMS.stamp (each file's
size and version); a later check compares it to a listing without reading a file, and a file
changed since (same size, new content, new version) sends the run back to the full check."""

from __future__ import annotations

import builtins
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rlaunch import ROOT
from rlaunch.config import inputs
from rlaunch.config import load as config
from rlaunch.job import data


def prepared(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\1" * 4096)
    data.write_manifest(model)
    return model


def rewrite_same_size(path: Path) -> None:
    """New content of the same size, and a new version (mtime), as a re-upload gives."""
    st = path.stat()
    path.write_bytes(b"\2" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_fresh_manifest_is_stamped_and_an_unchanged_dir_is_kept_without_reading_a_file(tmp_path, monkeypatch):
    model = prepared(tmp_path)
    stamp = json.loads((model / inputs.STAMP).read_text())
    assert stamp["files"]["model.safetensors"]["size"] == 4096 and stamp["bytes"] == 4098
    assert inputs.STAMP not in (model / inputs.MANIFEST).read_text()  # the stamp is no input
    opened: list[str] = []
    real_open = io.open
    spy = lambda f, *a, **k: opened.append(Path(f).name) or real_open(f, *a, **k)  # noqa: E731
    monkeypatch.setattr(io, "open", spy)  # pathlib's read_text/read_bytes
    monkeypatch.setattr(builtins, "open", spy)
    assert data.check_stamp(model) == ("", 2, 4098)
    assert sorted(set(opened)) == [inputs.MANIFEST, inputs.STAMP]  # no input file read


def test_a_changed_file_of_the_same_size_fails_the_metadata_check_and_then_the_full_one(tmp_path):
    model = prepared(tmp_path)
    rewrite_same_size(model / "model.safetensors")
    why, files, total = data.check_stamp(model)
    assert why == "model.safetensors changed since the stamp (size or version)" and (files, total) == (2, 4098)
    bad, read, stamped = data.verify(model)
    assert bad == ["model.safetensors"] and read == 4098 and not stamped
    assert not (model / inputs.STAMP).exists()  # gone: the next check hashes again
    # A changed SHA256SUMS (a new download) makes the old stamp worthless too.
    model2 = prepared(tmp_path / "two")
    (model2 / inputs.MANIFEST).write_text((model2 / inputs.MANIFEST).read_text().replace("config.json", "x"))
    assert data.check_stamp(model2)[0] == f"{inputs.MANIFEST} changed since the stamp"


def test_the_gpu_side_lines_say_what_the_full_check_reads_and_stop_on_a_mismatch(tmp_path):
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "stamp1"},
                       f"storage.mount={tmp_path} model.path={tmp_path}/model")
    line = next(ln for ln in inputs.check_lines(spec) if f"{tmp_path}/model" in ln)
    assert "--out=" not in line and "--adopt" not in line  # never a download or adoption on the GPU nodes
    model = prepared(tmp_path)
    env = {**os.environ, "RLAUNCH_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "tools")}
    kept = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0 and "matches its SHA256SUMS: kept (metadata: 2 files" in kept.stdout
    rewrite_same_size(model / "model.safetensors")
    bad = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    # Said before a byte is read: what changed, and what the full check will read.
    assert "model.safetensors changed since the stamp (size or version): a full check reads 4098 bytes" in bad.stdout
    assert "1 file(s) missing or changed since its SHA256SUMS (model.safetensors)" in bad.stdout
    assert "is not what the CPU step prepared" in bad.stderr
    # Each check is counted in the run's phases: the stamp read nothing, the full check every byte.
    counted = [json.loads(ln) for ln in (Path(spec.paths.run_dir) / "phases.jsonl").read_text().splitlines()]
    assert [(r["phase"], r["what"], r["bytes"]) for r in counted] == [("inputs_gpu", "model", 0),
                                                                      ("inputs_gpu", "model", 4098)]


def test_plan_on_local_answers_from_the_host_stores_stamp(tmp_path):
    """INFRA=local: `make plan` compares each input's stamp to a listing of it, as --check-stamp does,
    and says the command that prepares what is not (nothing on INFRA=local fetches it)."""
    from rlaunch.backends.local import backend as local

    spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "local", "RUN_ID": "stamp2"},
                       f"storage.mount={tmp_path} model.path={tmp_path}/model")
    dataset_dir = inputs.of(spec)[0].dir
    model = prepared(tmp_path)
    assert local.BACKEND.inputs_now(spec, {}) == [
        f"dataset: not prepared: no SHA256SUMS: preflight stops without it: `.venv/bin/python -m rlaunch.job.data "
        f"--dataset=gsm8k --out={dataset_dir}` first",
        "model: prepared (2 files match its SHA256SUMS.stamp): nothing to prepare"]
    rewrite_same_size(model / "model.safetensors")
    assert local.BACKEND.inputs_now(spec, {})[1] == (
        "model: not prepared: model.safetensors changed since the stamp (size or version): preflight stops without "
        f"it: `.venv/bin/python -m rlaunch.job.data --check={model} --what=model` first")
    assert (model / inputs.STAMP).exists()  # looked at, never written

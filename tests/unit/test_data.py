"""Data preparation: verl's parquet schema from the real load_dataset code, on a local dataset the
test writes, with a SHA256SUMS manifest that sha256sum accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.job import data

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def offline_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_gsm8k_rows_and_manifest(tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "train.jsonl", [{"question": "1+1?", "answer": "1+1=2\n#### 2"},
                                      {"question": "big?", "answer": "so\n#### 1,234"}])
    write_jsonl(src / "test.jsonl", [{"question": "2+2?", "answer": "#### 4"}])
    out = tmp_path / "out"
    info = data.prepare("gsm8k", out, source=str(src))
    assert info["rows"] == {"train": 2, "test": 1} and info["revision"]
    import pyarrow.parquet as pq

    table = pq.read_table(out / "train.parquet").to_pylist()
    assert set(table[0]) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert table[0]["data_source"] == "openai/gsm8k"
    assert table[0]["prompt"][0]["role"] == "user" and "####" in table[0]["prompt"][0]["content"]
    assert [r["reward_model"]["ground_truth"] for r in table] == ["2", "1234"]
    assert table[1]["extra_info"]["index"] == 1
    check = subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    assert {"train.parquet", "test.parquet", "dataset.json"} <= {l.split()[1] for l in
                                                               (out / "SHA256SUMS").read_text().splitlines()}


def test_math_boxed_ground_truth(tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "train.jsonl", [{"problem": "x?", "solution": "so $\\boxed{\\frac{1}{2}}$."}])
    write_jsonl(src / "test.jsonl", [{"problem": "y?", "solution": "\\boxed{3}"}])
    data.prepare("math", tmp_path / "out", source=str(src))
    import pyarrow.parquet as pq

    row = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()[0]
    assert row["reward_model"]["ground_truth"] == "\\frac{1}{2}"
    assert "\\boxed{}" in row["prompt"][0]["content"]


def test_bad_answers_are_errors():
    with pytest.raises(ValueError, match="####"):
        data.gsm8k_answer("no marker")
    with pytest.raises(ValueError, match="boxed"):
        data.last_boxed("none here")


def test_cli_rejects_unknown_dataset(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rlaunch.job.data", "--dataset=nope", f"--out={tmp_path}"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("data: config: DATASET='nope'") and "gsm8k" in proc.stderr

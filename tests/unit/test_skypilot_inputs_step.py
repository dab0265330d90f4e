"""SkyPilot's CPU step (issue 46): `make launch` runs inputs.sky.yaml with `sky launch --down` and
waits for it, within a deadline, before it asks for any GPU; a failed or late step launches nothing
more. SPOT=1 is one managed-job pipeline instead. `sky` is a PATH stub that records its calls."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlaunch.backends.base import LaunchPlan
from rlaunch.backends.skypilot import backend as sp
from rlaunch.config import load as config
from rlaunch.plan import artifacts

STUB = """#!/usr/bin/env bash
echo "$*" >>"${STUB_DIR}/calls"
case "$*" in
  check*) echo '{"default": {"GCP": ["compute", "storage"]}}' ;;
  "launch --down"*) [[ -n "${STUB_SLEEP:-}" ]] && exec sleep "${STUB_SLEEP}"; exit "${STUB_INPUTS_RC:-0}" ;;
esac
"""


@pytest.fixture()
def sky(tmp_path, monkeypatch):
    stub = tmp_path / "sky"
    stub.write_text(STUB)
    stub.chmod(0o755)
    monkeypatch.setenv("RLAUNCH_SKY", str(stub))
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    return lambda: (tmp_path / "calls").read_text().splitlines()


def launch(tmp_path: Path, **knobs: str) -> int:
    spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "gcp", "RUN_ID": "t-sky", "OUT": str(tmp_path / "out"),
                                               **knobs}, "train.save_freq=20")
    files = artifacts.finish(spec, sp.BACKEND.render(spec))
    return sp.BACKEND.launch(LaunchPlan(spec=spec, out=tmp_path / "out", files=files))


def test_the_cpu_step_runs_to_its_end_before_the_gpu_task(sky, tmp_path):
    assert launch(tmp_path) == 0
    out = tmp_path / "out"
    assert sky() == ["check -o json gcp", f"launch --down -c t-sky-inputs {out}/inputs.sky.yaml -y",
                     f"launch -c t-sky {out}/task.yaml -y"]


def test_a_failed_cpu_step_requests_no_gpu(sky, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STUB_INPUTS_RC", "5")
    assert launch(tmp_path) == 5
    launches = [c for c in sky() if c.startswith("launch")]
    assert launches == [f"launch --down -c t-sky-inputs {tmp_path}/out/inputs.sky.yaml -y"]
    assert "the inputs step failed (5); no GPU was requested. Its log is above" in capsys.readouterr().err


def test_a_cpu_step_past_its_deadline_is_stopped_and_requests_no_gpu(sky, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STUB_SLEEP", "30")
    monkeypatch.setenv("RLAUNCH_INPUTS_DEADLINE_S", "1")
    started = time.monotonic()
    assert launch(tmp_path) == 1
    assert time.monotonic() - started < 10
    assert not any(c.startswith("launch -c") for c in sky())
    assert sky()[-1] == "down -y t-sky-inputs"  # the CPU instance is not left behind
    err = capsys.readouterr().err
    assert "did not end within 1 s (RLAUNCH_INPUTS_DEADLINE_S)" in err
    assert "taking its CPU cluster t-sky-inputs down" in err


def test_spot_is_one_managed_job_pipeline(sky, tmp_path):
    assert launch(tmp_path, SPOT="1") == 0
    assert sky() == ["check -o json gcp", f"jobs launch -n t-sky {tmp_path}/out/{sp.PIPELINE} -y"]


def test_plan_shows_both_steps_the_cpu_instance_its_price_and_where_inputs_live(tmp_path, monkeypatch):
    monkeypatch.setenv("RLAUNCH_SKY_CATALOG", str(Path(__file__).resolve().parents[1] / "fixtures" / "skypilot-catalog"
                                                  / "v8"))

    def plan(sets: str = "") -> list[str]:
        """The backend's plan lines, then its inputs lines (the CLI prints those in the inputs block)."""
        spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "gcp", "RUN_ID": "t-sky", "OUT": str(tmp_path)}, sets)
        files = sp.BACKEND.render(spec)
        return sp.BACKEND.plan(spec, files) + sp.BACKEND.inputs_now(spec, files)

    lines = plan()
    step1 = lines.index(f"step 1, inputs on CPU: sky launch --down -c t-sky-inputs {tmp_path}/inputs.sky.yaml -y"
                        "   (waited for, then down)")
    assert lines[step1 + 1] == ("  resources 1 x gcp n2-standard-4 (4 vCPUs, 16 GiB; the cheapest for cpus 4+, "
                                "memory 16+): $0.19/h on demand")
    gpu = lines.index(f"sky launch -c t-sky {tmp_path}/task.yaml -y   (follows the logs)")
    assert lines.index("step 2, the GPU task:") == gpu - 1
    home = next(line for line in lines if "inputs live on it" in line)
    assert ("/storage/models and /storage/data on gcs bucket rlaunch-inputs-rlaunch-test (yours: SkyPilot user "
            "hash; created on first use, kept by `make down`): a second launch of the same model and data "
            "downloads nothing") in home
    # Whether they are prepared: on a machine without credentials (every test's), the same line everywhere.
    assert lines[-1] == (
        "model: not checked: no credentials for gs://rlaunch-inputs-rlaunch-test/models/qwen2.5-0.5b-instruct/"
        "7ae557604adf here (`gcloud auth application-default login` makes them): make launch runs the CPU step "
        "(gcp n2-standard-4, ~$0.19/h)")
    named = "".join(plan("storage.source=gs://team-inputs"))
    assert "a run that names the same storage finds them prepared" in named and "rlaunch-inputs-" not in named


def test_inputs_outlive_the_run_on_the_users_inputs_bucket(monkeypatch, tmp_path):
    """Models and data are prefixes of one per-user bucket over the per-run one, in both steps; its
    name follows SkyPilot's user hash (SKYPILOT_USER_ID, else ~/.sky/user_hash); a named bucket has none."""
    import yaml

    def mounts(sets: str = "") -> tuple[dict, dict]:
        spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "aws", "RUN_ID": "t-sky"}, sets)
        files = sp.BACKEND.render(spec)
        return tuple(yaml.safe_load(files[f])["file_mounts"] for f in ("task.yaml", sp.INPUTS_TASK))

    monkeypatch.setenv("SKYPILOT_USER_ID", "Ab12cd34")
    gpu, cpu = mounts()
    kept = {"name": "rlaunch-inputs-ab12cd34", "store": "s3", "mode": "MOUNT", "persistent": True}
    assert gpu["/storage"] == {"name": "rlaunch-t-sky", "store": "s3", "mode": "MOUNT"}  # outputs: per run
    assert gpu["/storage/models"] == {**kept, "_bucket_sub_path": "models"}
    assert gpu["/storage/data"] == {**kept, "_bucket_sub_path": "data"}
    assert {k: v for k, v in cpu.items() if k.startswith("/storage")} == {
        k: v for k, v in gpu.items() if k.startswith("/storage")}
    # No valid SKYPILOT_USER_ID: SkyPilot's cached hash in ~/.sky.
    (tmp_path / ".sky").mkdir()
    (tmp_path / ".sky" / "user_hash").write_text("ff00ee11\n")
    monkeypatch.setenv("SKYPILOT_USER_ID", "not valid!")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert mounts()[0]["/storage/models"]["name"] == "rlaunch-inputs-ff00ee11"
    # Named storage outlives the run itself: no second bucket.
    gpu, cpu = mounts("storage.bucket=team-inputs storage.store=s3")
    assert sorted(k for k in gpu if k.startswith("/storage")) == ["/storage"]


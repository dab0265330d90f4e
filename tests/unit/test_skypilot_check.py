"""`make plan` on SkyPilot infra: SkyPilot's own parser (sky.Task.from_yaml in an isolated HOME)
accepts every golden case, and rejects what it should; rlaunch's checks catch what SkyPilot does
not check offline. SkyPilot runs once for all cases (one child process, ~5 s), not once per case."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.skypilot import backend as sp
from rlaunch.errors import CheckError
from rlaunch.registry import frameworks
from rlaunch.validate import skypilot as v

ROOT = Path(__file__).resolve().parents[2]
_cases = importlib.util.spec_from_file_location("cases_skypilot", ROOT / "tests/golden/cases_skypilot.py")
_module = importlib.util.module_from_spec(_cases)
_cases.loader.exec_module(_module)
CASES = _module.CASES

# Broken on purpose: (name, preset, knobs, SET, the check that must fail, text in its message).
BAD = [
    ("unknown-accelerator", "rehearsal", {"INFRA": "gcp", "ACCELERATOR": "H1000", "GPUS_PER_NODE": "1"}, "",
     "accelerator", "'H1000' is not an accelerator SkyPilot knows"),
    ("bad-recovery", "rehearsal", {"INFRA": "aws", "SPOT": "1"}, "infra.recovery_strategy=RETRY_FOREVER",
     "job_recovery", "SkyPilot's strategies are EAGER_NEXT_REGION, FAILOVER"),
    ("bad-infra-string", "rehearsal", {"INFRA": "sky", "INFRA_SPEC": "gcp/us-central1"},
     "storage.store=gcs", "skypilot", "sky.Task.from_yaml rejected task.yaml"),
    ("bad-restarts", "rehearsal", {"INFRA": "gcp", "SPOT": "1"}, "infra.max_restarts_on_errors=-1",
     "skypilot", "max_restarts_on_errors"),
    # SkyPilot checks these only when it creates the storage at launch; rlaunch asks it at plan.
    ("sub-path-in-mount-mode", "rehearsal", {"INFRA": "gcp"}, "storage.source=gs://bkt/sub",
     "storage", "MOUNT mode does not support mounting specific files"),
    ("bad-bucket-name", "rehearsal", {"INFRA": "aws"}, "storage.bucket=Bad_Bucket storage.store=s3",
     "storage", "Invalid store name"),
]


# rlaunch's config now refuses a malformed INFRA_SPEC before rendering (test_knobs.py); SkyPilot's
# own parser must still reject one in a task, so that case's task.yaml is edited after rendering.
MANGLE = {"bad-infra-string": ('infra: "gcp/us-central1"', 'infra: "gcp/us-central1/a/b/c"')}


def load(preset, knobs, set_=""):
    knobs = dict(knobs)
    set_ = set_ or knobs.pop("SET", "")  # a golden case's SET (the CODE case's reward path)
    return config.load(preset, {"RUN_ID": "check", **knobs}, set_)


def rendered(spec, name=""):
    files = artifacts.finish(spec, sp.BACKEND.render(spec))
    if name in MANGLE:
        old, new = MANGLE[name]
        assert old in files["task.yaml"]
        files["task.yaml"] = files["task.yaml"].replace(old, new)
    return files


@pytest.fixture(scope="module")
def facts():
    """SkyPilot's verdict on every case, good and bad, from one child process."""
    tasks = {}
    for name, preset, knobs in CASES:
        tasks[name] = rendered(load(preset, knobs))["task.yaml"]
    for name, preset, knobs, set_, _, _ in BAD:
        tasks[name] = rendered(load(preset, knobs, set_), name)["task.yaml"]
    # One more that only SkyPilot's parser can reject: a misspelt task key.
    tasks["misspelt-key"] = tasks[CASES[0][0]].replace("num_nodes:", "num_node:")
    return v.skypilot_facts(tasks)


@pytest.fixture
def use_facts(facts, monkeypatch):
    """backend.check with SkyPilot's answer for case `name` taken from the shared run."""

    def run_check(name, spec, files):
        one = dict(facts, tasks={"task.yaml": facts["tasks"][name]})
        monkeypatch.setattr(v, "skypilot_facts", lambda tasks: one)
        # The framework's own loader is tested with the framework; here the SkyPilot side is.
        fw = frameworks.get(spec.framework.name)
        monkeypatch.setattr(type(fw), "loader_check", lambda self, spec, files: "loader: not run here")
        return sp.BACKEND.check(spec, files)

    return run_check


@pytest.mark.parametrize(("name", "preset", "knobs"), CASES, ids=[c[0] for c in CASES])
def test_every_case_passes_skypilot_and_rlaunch_checks(name, preset, knobs, use_facts):
    spec = load(preset, knobs)
    lines = use_facts(name, spec, rendered(spec))
    assert lines[0].startswith("task.yaml accepted by sky.Task.from_yaml (skypilot 0.14.1, isolated HOME)")
    assert any(line.startswith("storage:") for line in lines)


@pytest.mark.parametrize(("name", "preset", "knobs", "set_", "check", "message"), BAD, ids=[b[0] for b in BAD])
def test_broken_cases_fail_with_one_clear_error(name, preset, knobs, set_, check, message, use_facts):
    spec = load(preset, knobs, set_)
    with pytest.raises(CheckError) as err:
        use_facts(name, spec, rendered(spec, name))
    assert err.value.check == check
    assert message in str(err.value)


def test_skypilot_names_a_misspelt_key(facts):
    result = facts["tasks"]["misspelt-key"]
    assert not result["ok"]
    assert "num_node" in result["error"]


def test_skypilot_registries_are_read_offline(facts):
    assert {"H100", "A100", "A100-80GB", "H200", "B200"} <= set(facts["accelerators"])
    assert set(facts["recovery_strategies"]) == {"EAGER_NEXT_REGION", "FAILOVER"}


def test_the_parser_runs_in_an_isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".sky").mkdir()
    # A user config that would break the task if SkyPilot read it.
    (home / ".sky" / "config.yaml").write_text("allowed_clouds: [aws]\nnot_a_sky_key: 1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WANDB_API_KEY", "sekret-value")
    spec = load("rehearsal", {"INFRA": "gcp"})
    result = v.skypilot_facts({"t": rendered(spec)["task.yaml"]})
    assert result["tasks"]["t"]["ok"], result
    assert sorted(p.name for p in (home / ".sky").iterdir()) == ["config.yaml"]
    assert v._child_env("/x")["HOME"] == "/x" and "WANDB_API_KEY" not in v._child_env("/x")


def test_make_plan_end_to_end(tmp_path):
    """What `make plan INFRA=k8s` runs: render, every check (the framework's loader too), summary."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools"), "WANDB_API_KEY": "sekret-value"}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "rlaunch", "plan", "--INFRA=k8s", "--RUN_ID=e2e", f"--OUT={out}",
         "--SET=secrets=[WANDB_API_KEY]"], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "accepted by sky.Task.from_yaml" in proc.stdout
    assert f"sky launch -c e2e {out}/task.yaml --secret WANDB_API_KEY -y" in proc.stdout
    task = yaml.safe_load((out / "task.yaml").read_text())
    assert task["file_mounts"]["/rlaunch/run"] == str(out)
    assert (out / "job.sh").exists() and (out / "spec.json").exists()
    leaked = [p.name for p in out.iterdir() if "sekret-value" in p.read_text()]
    assert not leaked and "sekret-value" not in proc.stdout + proc.stderr

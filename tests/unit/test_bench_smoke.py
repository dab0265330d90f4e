"""Every benchmark's smoke mode (`tests/bench/run --smoke NAME`): one run at its smallest size,
the keys and types of the JSON it writes checked (tests/bench/schema.py), so a benchmark that rots
fails the suite. The full runs are `make bench`'s. Here: plan, inputs and formation; the launch and recovery
smokes run beside the end-to-end launches whose paths they measure (tests/e2e/test_rehearsal.py,
tests/e2e/test_faults.py), reading their figures instead of launching again."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import needs
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench"
sys.path.insert(0, str(BENCH))
import schema  # noqa: E402 - tests/bench/, just put on the path


def bench_schema(name: str) -> dict:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCHEMA


def need_namespaces() -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        needs.missing("the benchmark runs network-namespace nodes: needs root and iproute2's ip")


def test_the_schema_check_names_a_missing_key_and_a_wrong_type():
    found = schema.problems({"a": 1, "b": {"c": True}}, {"a": schema.NUM, "b": {"c": schema.NUM}, "d": str})
    assert found == ["b.c: true is bool, need float or int", "d: missing"]


def test_plan_smoke(tmp_path):
    out = tmp_path / "plan.json"
    proc = schema.smoke("plan", out, 300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert schema.problems(data, bench_schema("plan")) == [] and data["presets"] >= 1 and data["failed"] == []
    # The second plan of the same CODE + DATA config reuses the first one's loader answer and checked rows.
    assert data["code_data"]["warm_seconds"] < data["code_data"]["cold_seconds"], data["code_data"]


@pytest.mark.cluster  # namespace nodes, no Ray: ~15 s idle
def test_inputs_smoke(tmp_path):
    need_namespaces()
    out = tmp_path / "inputs.json"
    proc = schema.smoke("inputs", out, 240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert schema.problems(data, bench_schema("inputs")) == []
    # Prepared runs of the new design read no model byte on the GPU side; today's read all of it.
    assert data["cases"]["second"]["new"]["gpu_bytes"] in (0, None) and data["met"]
    # The second launch's CPU step was skipped by the launcher's own check of the recorded versions.
    assert data["cases"]["second"]["new"]["cpu_step_skipped"] is True, data["cases"]["second"]
    assert data["cases"]["recovery"]["today"]["gpu_bytes"] in (data["model_bytes"], None)


def test_the_inputs_bench_bucket_stand_in_sees_a_rewritten_file_as_a_new_version(tmp_path, monkeypatch):
    """The inputs benchmark's GCS stand-in (dirbucket) on both sides of rlaunch.job.objects: the CPU
    step's record through its `gcloud`, the launcher's compare through its client."""
    import dirbucket
    from rlaunch.job import objects

    model = tmp_path / "bucket" / "models" / "m"
    model.mkdir(parents=True)
    (model / "w.safetensors").write_bytes(b"a" * 8)
    dirs = {"inputs-b/models": str(tmp_path / "bucket" / "models")}
    (tmp_path / "map.json").write_text(json.dumps(dirs))
    monkeypatch.setenv("DIRBUCKET_MAP", str(tmp_path / "map.json"))
    monkeypatch.setenv("PATH", f"{dirbucket.install_gcloud(tmp_path / 'bin').parent}:{os.environ['PATH']}")
    assert objects.record("gs://inputs-b/models/m", model) == 0 and (model / objects.RECORD).is_file()
    client = dirbucket.Client(dirs)
    assert objects.compare("gs://inputs-b/models/m", clients={"gs": client}) == (1, "")
    # Same size, new content: a new generation, so the launcher runs the CPU step again.
    (model / "w.safetensors").write_bytes(b"b" * 8)
    stat = (model / "w.safetensors").stat()
    os.utime(model / "w.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    matched, why = objects.compare("gs://inputs-b/models/m", clients={"gs": client})
    assert matched is None and "w.safetensors" in why, why


# The launch and recovery benchmarks' smokes read the end-to-end tests' launches of the same paths
# (tests/e2e/test_rehearsal.py, tests/e2e/test_faults.py) instead of launching their own.
@pytest.mark.cluster
def test_formation_bench_smoke(tmp_path):
    need_namespaces()
    out = tmp_path / "formation.json"
    proc = schema.smoke("formation", out, 600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert schema.problems(data, bench_schema("formation")) == []
    # The smallest size must still show a 2-node formation.
    assert data["nodes"] == 2 and data["runs"] == 1 and data["rlaunch_s"] >= data["limit_s"] > 0, data


def test_a_new_run_takes_down_only_what_a_dead_earlier_run_recorded(tmp_path, monkeypatch):
    import owned
    import owner

    monkeypatch.setattr(owned, "STATE", tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "cluster-bench-gone.json").write_text(json.dumps(
        {"kind": "cluster", "name": "bench-gone", "pid": dead.pid, "started": "0"}))
    owner.write(tmp_path / "cluster-bench-live.json", {"kind": "cluster", "name": "bench-live"})
    (tmp_path / "cluster-other.json").write_text(json.dumps(
        {"kind": "cluster", "name": "other", "pid": dead.pid, "started": "0"}))
    downs = []
    monkeypatch.setattr(owned, "take_down", lambda kind, name, env=None: downs.append((kind, name)) or True)
    assert owned.sweep("test") == ["cluster bench-gone"] and downs == [("cluster", "bench-gone")]
    # A live owner's record stays; so does a name outside the benchmarks' prefix.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster-bench-live.json", "cluster-other.json"]


def test_node_watch_refuses_bad_arguments():
    proc = subprocess.run([sys.executable, str(BENCH / "node_watch.py"), "10.0.0.1", "port", "5"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "HOST PORT SECONDS" in proc.stderr, proc.stderr

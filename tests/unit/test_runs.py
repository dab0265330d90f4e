"""Run discovery without the infrastructures: what each backend makes of its infrastructure's
answer (SkyPilot's JSON, a RayJob, local-cluster's list, a launch on AIStudio's storage), how
`make runs` asks and prints, and which run the CLI acts on. The calls themselves (sky, kubectl,
the real local cluster) are in tests/bats/lifecycle.bats."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.cli import commands as cli
from rlaunch.config import load as config
from rlaunch.runs import listing as runs
from rlaunch.backends.aistudio import backend as aistudio
from rlaunch.backends.kuberay import backend as kuberay
from rlaunch.backends.kuberay import kubectl
from rlaunch.backends.local import backend as local
from rlaunch.backends.skypilot import backend as skypilot
from rlaunch.backends.base import Answer, LaunchPlan, Place, Run
from rlaunch.errors import ConfigError, MissingPrerequisite

# ---------------------------------------------------------------- SkyPilot


def test_sky_json_is_found_after_log_lines():
    text = "Cluster(s) not found: \x1b[1mexp-7\x1b[0m.\n[]\n"
    assert skypilot._json_tail(text, list) == []
    text = 'Fetching...\n[\n  {"name": "a"}\n]\n'
    assert skypilot._json_tail(text, list) == [{"name": "a"}]
    assert skypilot._json_tail("no json here", list) == []


@pytest.mark.parametrize(("accelerators", "want"), [
    ("{'H100': 1}", ("H100", 1)),
    ({"A100-80GB": 8}, ("A100-80GB", 8)),
    ("2x[H100:8]", ("H100", 8)),
    ("1x[CPU:4+, mem:16+]", ("", 0)),
    (None, ("", 0)),
    ("{}", ("", None)),
])
def test_sky_accelerators_in_every_shape_sky_reports(accelerators, want):
    assert skypilot._gpus(accelerators) == want


def test_sky_records_become_runs_with_the_run_label_and_the_infra_name():
    cluster = skypilot._cluster_run({"name": "r-7x", "status": "UP", "nodes": 2, "cloud": "Kubernetes",
                                     "accelerators": "{'H100': 1}", "launched_at": 100,
                                     "labels": {"rlaunch-run": "7x"}})
    assert (cluster.run_id, cluster.infra, cluster.state, cluster.shape(), cluster.created) == \
        ("7x", "k8s", "UP", "2x H100:1", 100)
    job = skypilot._job_run({"job_id": 3, "job_name": "exp", "status": "SUCCEEDED", "resources": "2x[A100:8]"})
    assert (job.run_id, job.infra, job.shape(), job.kind, job.active) == ("exp", "sky", "2x A100:8", "managed-job", False)


def test_every_sky_task_carries_the_run_label():
    for preset in ("rehearsal", "verl-ppo-gsm8k-0.5b", "areal-grpo-gsm8k"):
        spec = config.load(preset, {"INFRA": "aws", "RUN_ID": "lbl-1"})
        task = yaml.safe_load(artifacts.finish(spec, skypilot.BACKEND.render(spec))["task.yaml"])
        assert task["resources"]["labels"] == {skypilot.RUN_LABEL: "lbl-1"}
        assert task["name"] == "lbl-1"


# ---------------------------------------------------------------- KubeRay


@pytest.mark.parametrize(("preset", "shape"), [
    ("rehearsal", "2x CPU"),
    ("verl-grpo-gsm8k-32b", "4x GB200:4"),  # a CPU-only head is not one of the run's nodes
    ("verl-ppo-gsm8k-0.5b", "2x GPU:2"),
])
def test_a_rendered_rayjob_reads_back_as_the_spec_shaped_it(preset, shape):
    spec = config.load(preset, {"INFRA": "kuberay", "RUN_ID": "kr-1"})
    job = yaml.safe_load(artifacts.finish(spec, kuberay.BACKEND.render(spec))["kuberay/rayjob.yaml"])
    job["metadata"]["creationTimestamp"] = "2026-11-30T08:00:00Z"
    run = kuberay.rayjob_run(job)
    assert (run.run_id, run.infra, run.shape(), run.state, run.active) == ("kr-1", "kuberay", shape, "PENDING (New)", True)
    assert run.where == "RayJob default/kr-1"
    assert run.created == datetime.datetime(2026, 11, 30, 8, tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.parametrize(("stderr", "missing"), [
    ("error: current-context is not set", "a kubectl context"),
    ("The connection to the server localhost:8080 was refused - did you specify the right host or port?",
     "a kubectl context"),
    ('Error from server (Forbidden): rayjobs.ray.io "x" is forbidden', "permission to get x"),
    ("Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout", "a reachable Kubernetes cluster"),
])
def test_kubectl_failures_name_what_is_missing(stderr, missing):
    import subprocess

    result = subprocess.CompletedProcess([], 1, "", stderr)
    assert not kubectl.not_found(result)
    assert kubectl.unreachable(result, "get x").what == missing


def test_only_not_found_means_absent():
    import subprocess

    assert kubectl.not_found(subprocess.CompletedProcess([], 1, "", 'Error from server (NotFound): rayjobs "x" not found'))


# ---------------------------------------------------------------- local


@pytest.mark.parametrize(("entry", "state"), [
    ({"nodes": 2, "alive": 2, "record": True}, "up"),
    ({"nodes": 2, "alive": 1, "record": True}, "degraded (1/2 alive)"),
    ({"nodes": 2, "alive": 0, "record": False}, "stopped (no raylet), no host record"),
    ({"nodes": 1, "alive": -1, "record": True}, "unknown (needs root)"),
])
def test_local_cluster_list_entries_become_runs(entry, state):
    run = local._run({"name": "exp-7", "mode": "netns", "gpus_per_node": 0, "created": 5, **entry})
    assert (run.run_id, run.infra, run.state, run.where) == ("exp-7", "local", state, "namespaces rl-exp-7-*")


# ---------------------------------------------------------------- AIStudio


def test_aistudio_finds_launches_on_the_storage_and_reads_their_state(tmp_path):
    spec = config.load("rehearsal", {"INFRA": "aistudio", "RUN_ID": "ai-1", "WORK_ROOT": str(tmp_path)})
    launch = tmp_path / aistudio.launch_rel(spec)
    launched = aistudio.BACKEND.handle(LaunchPlan(spec, tmp_path / "out", {}))
    # The launching machine saw the storage elsewhere: this one reads it where it sees it.
    dataclasses.replace(launched, place=dataclasses.replace(launched.place, storage_here="/elsewhere")).write(launch)
    here = aistudio.BACKEND.place(config.load("", {"INFRA": "aistudio", "RUN_ID": "other", "WORK_ROOT": str(tmp_path)}))

    found = aistudio.BACKEND.find(aistudio.BACKEND.handle_of("ai-1", here))
    assert [r.state for r in found.runs] == ["installed, not started"]
    assert aistudio.BACKEND.find(aistudio.BACKEND.handle_of("other", here)).runs == ()
    run_dir = aistudio._run_path(aistudio.BACKEND.handle_of("ai-1", here))
    assert run_dir == tmp_path / "runs" / "rehearsal" / "ai-1"
    run_dir.mkdir(parents=True)
    assert aistudio.BACKEND.runs(here).runs[0].state == "started"
    (run_dir / "verification.json").write_text('{"passed": true}')
    listed = aistudio.BACKEND.runs(here)
    assert [(r.run_id, r.state, r.shape(), r.active) for r in listed.runs] == [("ai-1", "passed", "2x CPU", False)]
    assert listed.asked == f"{tmp_path}/rlaunch/launches/*/run.json"


def test_aistudio_storage_not_mounted_is_a_missing_prerequisite(tmp_path):
    spec = config.load("rehearsal", {"INFRA": "aistudio", "RUN_ID": "ai-1", "WORK_ROOT": str(tmp_path / "no")})
    with pytest.raises(MissingPrerequisite, match="AIStudio shared storage"):
        aistudio.BACKEND.runs(aistudio.BACKEND.place(spec))


# ---------------------------------------------------------------- make runs


class Fake:
    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.asked = answer, error, []

    def runs(self, place):
        self.asked.append(place.infra)
        if self.error:
            raise self.error
        return self.answer


def test_runs_asks_each_family_once_and_names_the_unreachable(monkeypatch):
    sky_runs = (Run("a", "gcp", "UP", "sky cluster a", 2, 1, "H100", created=100.0),
                Run("b", "aws", "RUNNING", "sky managed job 2 b", 1, 0, created=50.0))
    fakes = {"local": Fake(Answer("list")), "gcp": Fake(Answer("sky status", sky_runs, "a note")),
             "kuberay": Fake(error=MissingPrerequisite("a kubectl context", "...")),
             "aistudio": Fake(error=MissingPrerequisite("the storage", "..."))}
    monkeypatch.setattr("rlaunch.registry.backends.get", lambda infra: fakes[infra])
    found = runs.collect("", Place)
    assert [f.asked for f in fakes.values()] == [["local"], ["gcp"], ["kuberay"], ["aistudio"]]
    text = runs.report(found, now=3700.0)
    lines = text.splitlines()
    assert lines[0].split() == ["RUN", "ID", "INFRA", "STATE", "NODES", "AGE", "WHERE"]
    assert lines[1].split() == ["a", "gcp", "UP", "2x", "H100:1", "1h", "sky", "cluster", "a"]
    assert lines[2].split()[:6] == ["b", "aws", "RUNNING", "1x", "CPU", "1h"]
    assert lines[3:] == ["a note", "asked: local (list); skypilot (sky status)",
                         "not reachable: kuberay (missing a kubectl context); aistudio (missing the storage)"]


def test_runs_for_one_cloud_asks_skypilot_and_keeps_that_cloud(monkeypatch):
    sky = Fake(Answer("sky status", (Run("a", "gcp", "UP", "x"), Run("b", "aws", "UP", "y"))))
    monkeypatch.setattr("rlaunch.registry.backends.get", lambda infra: sky)
    assert [r.run_id for r in runs.collect("aws", Place).runs] == ["b"]
    assert [r.run_id for r in runs.collect("sky", Place).runs] == ["a", "b"]
    assert runs.report(runs.Collected()) == "no rlaunch runs"


@pytest.mark.parametrize(("seconds", "text"), [(None, "-"), (5, "5s"), (61, "1m"), (7200, "2h"), (200000, "2d")])
def test_age(seconds, text):
    assert runs.age(seconds) == text


# ---------------------------------------------------------------- which run the CLI acts on


def test_the_handle_is_used_for_its_infra_and_the_id_alone_otherwise(tmp_path):
    spec = config.load("rehearsal", {"INFRA": "gcp", "RUN_ID": "c-1"}, f"run.out={tmp_path}")
    handle = skypilot.BACKEND.handle(LaunchPlan(spec, tmp_path, {}))
    handle.write(tmp_path)
    which = cli.Cli()._which
    assert which(OUT=str(tmp_path)) == which(OUT=str(tmp_path), INFRA="gcp") == handle
    assert (handle.kind, handle.name, handle.run_dir) == ("cluster", "c-1", spec.paths.run_dir)
    other = which(OUT=str(tmp_path), INFRA="kuberay", RUN_ID="c-1")
    assert (other.place.infra, other.place.namespace, other.run_id, other.kind) == ("kuberay", "default", "c-1", "")
    found = which(RUN_ID="never-built-here", INFRA="local")
    assert (found.run_id, found.name, found.kind, found.run_dir) == ("never-built-here", "never-built-here", "", "")


def test_without_a_cache_the_run_and_its_infra_must_be_named(tmp_path):
    which = cli.Cli()._which
    with pytest.raises(ConfigError, match="RUN_ID=''.*has no run.json.*make runs"):
        which(OUT=str(tmp_path))
    with pytest.raises(ConfigError, match="INFRA=''.*the infrastructure run never-built-here is on"):
        which(RUN_ID="never-built-here")

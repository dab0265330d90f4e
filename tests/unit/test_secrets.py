"""Secrets by name (issue 29): logging.wandb forwards WANDB_API_KEY and model.gated HF_TOKEN on every
infrastructure; a launch without one in the environment stops (exit 3) before anything exists; the
values are never in a rendered file, the plan or an argv."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.skypilot import backend as skypilot
from rlaunch.registry.backends import get as backend

VALUE = "wandb-sekret-4d9f"
SETS = {"local": "", "gcp": "", "kuberay": "", "aistudio": "storage.mount=/mnt/rl"}


def render(infra: str, sets: str):
    spec = config.load("rehearsal", {"INFRA": infra, "RUN_ID": "sec1"}, f"{SETS[infra]} {sets}")
    return spec, artifacts.finish(spec, backend(infra).render(spec))


@pytest.mark.parametrize("sets, name", [("logging.wandb=true", "WANDB_API_KEY"), ("model.gated=true", "HF_TOKEN")])
def test_a_setting_that_needs_a_secret_names_it(sets, name):
    spec = config.load("rehearsal", {"RUN_ID": "sec1"}, sets)
    assert spec.secrets == [name]
    # Named once, whether the config also lists it or not.
    assert config.load("rehearsal", {"RUN_ID": "sec1"}, f"{sets} secrets=[{name}]").secrets == [name]
    assert config.load("rehearsal", {"RUN_ID": "sec1"}).secrets == []


def test_wandb_key_travels_by_name_on_every_infra(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", VALUE)
    spec, files = render("gcp", "logging.wandb=true")
    task = yaml.safe_load(files["task.yaml"])
    assert task["secrets"] == {"WANDB_API_KEY": None}
    assert skypilot.launch_argv(spec, "/o")[-3:] == ["--secret", "WANDB_API_KEY", "-y"]
    spec, files = render("kuberay", "logging.wandb=true")
    head = yaml.safe_load(files["kuberay/rayjob.yaml"])["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    env = {e["name"]: e for e in head["spec"]["containers"][0]["env"]}
    assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "sec1-secrets", "key": "WANDB_API_KEY"}
    spec, files = render("aistudio", "logging.wandb=true")
    assert "`WANDB_API_KEY`" in files["form.md"]
    spec, files = render("local", "logging.wandb=true")
    assert spec.secrets == ["WANDB_API_KEY"]  # local: jobs.submit copies it from this env into the job's
    for infra in SETS:
        _, files = render(infra, "logging.wandb=true model.gated=true")
        assert all(VALUE not in text for text in files.values()), infra


@pytest.mark.parametrize("infra", ["local", "gcp", "kuberay"])
def test_launch_without_the_key_stops_before_anything_is_created(infra, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("WANDB_API_KEY", "HF_TOKEN") and not k.startswith("RLAUNCH_KNOB_")}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rlaunch", "launch", "--PRESET=rehearsal", f"--INFRA={infra}",
                           "--RUN_ID=sec-missing", "--SET=logging.wandb=true", f"--OUT={out}"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "missing WANDB_API_KEY in your environment" in proc.stderr
    assert "logging.wandb=true needs WANDB_API_KEY" in proc.stderr
    assert not out.exists()


def test_aistudio_takes_secrets_in_its_form_so_launch_does_not_need_them_here():
    spec = config.load("rehearsal", {"INFRA": "aistudio"}, "storage.mount=/mnt/rl model.gated=true")
    backend("aistudio").require_secrets(spec)  # no error: the user types HF_TOKEN into the task form


def test_plan_names_the_secrets_by_reference(tmp_path, monkeypatch, crds):
    monkeypatch.setenv("WANDB_API_KEY", VALUE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_KNOB_")}
    proc = subprocess.run([sys.executable, "-m", "rlaunch", "plan", "--PRESET=rehearsal", "--INFRA=kuberay",
                           "--SET=logging.wandb=true", f"--OUT={tmp_path}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "secrets     by reference only: WANDB_API_KEY" in proc.stdout
    assert VALUE not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or VALUE.encode() not in path.read_bytes(), path

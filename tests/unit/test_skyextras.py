"""rlaunch.backends.skypilot.extras and the SkyPilot extras of `make setup`: every cloud rlaunch launches to has its
extra installed by setup or on first use, and every package an extra adds is pinned in versions.yaml.
The real first use (pip installing the azure extra) runs in test_skypilot_clients.py."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.backends.skypilot import extras as skyextras
from rlaunch.backends.skypilot import backend as sp
from rlaunch.errors import MissingPrerequisite
from rlaunch.registry import backends

ROOT = Path(__file__).resolve().parents[2]


def setup_extras() -> set[str]:
    text = (ROOT / "requirements.txt").read_text()
    m = re.search(r"^skypilot\[([^\]]*)\]", text, re.MULTILINE)
    assert m, "requirements.txt names skypilot without extras"
    return {e.strip() for e in m.group(1).split(",")}


def test_every_cloud_rlaunch_launches_to_gets_its_extra():
    clouds = {cloud for cloud in backends.sky_clouds().values() if cloud} & set(sp.DEFAULT_STORE)
    assert clouds == {"gcp", "aws", "azure", "kubernetes"}
    assert {skyextras.EXTRAS[c] for c in clouds} == setup_extras() | set(skyextras.ON_FIRST_USE)
    assert not setup_extras() & set(skyextras.ON_FIRST_USE)


def test_every_package_an_extra_adds_is_pinned():
    python = pins.get("python", pins.load_versions(ROOT / "configs" / "versions.yaml"))
    pinned = {name.lower() for name in python}
    named_by: dict[str, set[str]] = {}
    for text in metadata.requires("skypilot"):
        req = Requirement(text)
        for extra in skyextras.EXTRAS.values():
            if req.marker and req.marker.evaluate({"extra": extra}) and not req.marker.evaluate({"extra": ""}):
                named_by.setdefault(req.name.lower(), set()).add(extra)
    # What all four name alike (casbin, grpcio, ...: the API server's own packages) is no cloud's client.
    own = {name: extras for name, extras in named_by.items() if extras != set(skyextras.EXTRAS.values())}
    assert {"google-api-python-client", "boto3", "kubernetes", "azure-cli"} <= set(own)
    assert sorted(set(own) - pinned) == [], "pin these in configs/versions.yaml (python:)"


@pytest.mark.parametrize("extra", sorted(setup_extras()))
def test_setup_installed_its_extras(extra):
    assert skyextras.missing(extra) == []


def test_an_extra_setup_should_have_installed_is_exit_3_naming_make_setup(monkeypatch):
    monkeypatch.setattr(skyextras, "missing", lambda extra: ["google-api-python-client>=2.69.0"])
    with pytest.raises(MissingPrerequisite) as err:
        skyextras.ensure("gcp")
    assert err.value.exit_code == 3
    assert "google-api-python-client" in str(err.value) and "make setup" in str(err.value)


def test_a_cloud_without_an_extra_needs_nothing():
    assert skyextras.ensure("lambda") is False


def test_install_argv_is_the_venvs_uv_with_the_lock_and_nothing_resolved(tmp_path):
    argv = skyextras.install_argv(Path("/l.txt"), "/venv/bin/python")
    assert argv == ["/venv/bin/uv", "pip", "install", "--quiet", "--no-deps", "--python", "/venv/bin/python",
                    "-r", "/l.txt"]


def test_the_azure_lock_only_adds_to_the_launchers():
    """Installing azure on first use must move none of the launcher's packages: the launcher's lock is
    resolved under the azure lock (scripts/setup --lock), so each of its pins is in the azure lock."""
    def read(name):
        text = skyextras.lock_path(name).read_text()
        return dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, re.MULTILINE))

    launcher, azure = read("launcher"), read("skypilot-azure")
    assert "azure-cli" in azure and "azure-cli" not in launcher
    assert {name: azure.get(name) for name in launcher} == launcher


def test_a_broken_install_puts_the_venv_back_to_the_launchers_lock(monkeypatch, tmp_path):
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        failed = argv[1:3] == ["-m", "pip"]  # pip check finds a conflict
        return subprocess.CompletedProcess(argv, 1 if failed else 0, "a 1.0 has requirement b<2, but you have b 2.0.\n", "")

    monkeypatch.setattr(skyextras.subprocess, "run", run)
    python = sys.executable
    with pytest.raises(MissingPrerequisite) as err:
        skyextras.install("azure", python)
    assert "pip check found a 1.0 has requirement b<2" in str(err.value) and err.value.exit_code == 3
    assert calls[-1] == [str(Path(python).parent / "uv"), "pip", "sync", "--quiet", "--python", python,
                         str(skyextras.lock_path("launcher", python))]


def test_cli_rejects_an_unknown_extra(capsys):
    with pytest.raises(SystemExit) as exit_:
        skyextras.main(["install", "gpc"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("python -m rlaunch.backends.skypilot.extras: unknown extra 'gpc'; "
                                       "allowed: aws, azure, gcp, kubernetes\n")


def test_plan_says_a_launch_to_azure_installs_its_extra_first(monkeypatch):
    spec = config.load("", {"INFRA": "azure", "RUN_ID": "az"})
    files = sp.BACKEND.render(spec)
    monkeypatch.setattr(skyextras, "missing", lambda extra: ["azure-cli<2.87.0,>=2.65.0"] if extra == "azure" else [])
    lines = sp.BACKEND.plan(spec, files)
    assert lines[0].startswith("first use of azure: pip install SkyPilot's azure extra")
    assert lines[1].startswith("sky check -o json azure")
    monkeypatch.setattr(skyextras, "missing", lambda extra: [])
    assert sp.BACKEND.plan(spec, files)[0].startswith("sky check -o json azure")

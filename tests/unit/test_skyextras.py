"""rlaunch.skyextras and the SkyPilot extras of `make setup`: every cloud rlaunch launches to has its
extra installed by setup or on first use, and every package an extra adds is pinned in versions.yaml.
The real first use (pip installing the azure extra) runs in test_skypilot_clients.py."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from rlaunch import config, pins, skyextras
from rlaunch.backends import skypilot as sp
from rlaunch.errors import MissingPrerequisite

ROOT = Path(__file__).resolve().parents[2]


def setup_extras() -> set[str]:
    text = (ROOT / "requirements.txt").read_text()
    m = re.search(r"^skypilot\[([^\]]*)\]", text, re.MULTILINE)
    assert m, "requirements.txt names skypilot without extras"
    return {e.strip() for e in m.group(1).split(",")}


def test_every_cloud_rlaunch_launches_to_gets_its_extra():
    clouds = {sp.CLOUD_ALIASES.get(i, i) for i in config.ENUMS["infra.name"]} & set(sp.DEFAULT_STORE)
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


def test_install_argv_is_pip_with_the_pins(tmp_path):
    argv = skyextras.install_argv("azure", "/c.txt", "/venv/bin/python")
    assert argv == ["/venv/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
                    "-c", "/c.txt", "skypilot[azure]"]


def test_cli_rejects_an_unknown_extra(capsys):
    assert skyextras.main(["install", "gpc"]) == 2
    assert "allowed: aws, azure, gcp, kubernetes" in capsys.readouterr().err


def test_plan_says_a_launch_to_azure_installs_its_extra_first(monkeypatch):
    spec = config.load("", {"INFRA": "azure", "RUN_ID": "az"})
    files = sp.BACKEND.render(spec)
    monkeypatch.setattr(skyextras, "missing", lambda extra: ["azure-cli<2.87.0,>=2.65.0"] if extra == "azure" else [])
    lines = sp.BACKEND.plan(spec, files)
    assert lines[0].startswith("first use of azure: pip install SkyPilot's azure extra")
    assert lines[1].startswith("sky check -o json azure")
    monkeypatch.setattr(skyextras, "missing", lambda extra: [])
    assert sp.BACKEND.plan(spec, files)[0].startswith("sky check -o json azure")

"""The real edge: SkyPilot's own `sky check`, from the project's venv, finds every client a launch to
gcp, aws, azure and kubernetes needs. Nothing is stubbed: an isolated HOME without credentials, a
local API server on a port of its own (other engineers' servers on this machine use 46580), stopped
afterwards with `sky api stop`. Every cloud must come out disabled for missing credentials only:
no "not installed", no ModuleNotFoundError, no missing program.

Azure's extra installs on first use, so the test goes through that first use: the SkyPilot backend's
launch (what `make launch INFRA=azure` runs after its plan) installs the extra if the venv lacks it,
then stops at `sky check` (exit 3, no credentials). On a fresh venv that costs about 1.5 minutes once.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.config import load as config
from rlaunch.backends.skypilot import extras as skyextras
from rlaunch.backends.skypilot import backend as sp
from rlaunch.errors import MissingPrerequisite
from rlaunch.backends.base import LaunchPlan
from needs import missing

CLOUDS = ["gcp", "aws", "azure", "kubernetes"]
# What each cloud's verdict says when only the credentials are missing.
NO_CREDENTIALS = {
    "AWS": "AWS credentials are not set",
    "GCP": "Your default credentials were not found",
    "Azure": "There are no active accounts",
    "Kubernetes": "No available context found in kubeconfig",
}
# What a verdict says when a client, a package or a program is missing.
NOT_INSTALLED = re.compile(r"not installed|ModuleNotFoundError|ImportError|No module named|is required|"
                           r"errored|exit status 127|command not found|Traceback", re.IGNORECASE)
CREDENTIAL_VARS = re.compile(r"^(AWS_|AZURE_|GOOGLE_|CLOUDSDK_|GCP_|KUBECONFIG$|SKYPILOT_)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def need(ok: bool, why: str) -> None:
    """A missing tool: needs.missing."""
    if not ok:
        missing(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def verdicts(text: str) -> dict[str, str]:
    """`sky check`'s text output -> {cloud: its verdict line and reason lines}."""
    out, current = {}, None
    for line in ANSI.sub("", text).splitlines():
        m = re.match(r"^  (\w+): (enabled|disabled)\b", line)
        if m:
            current = m.group(1)
            out[current] = line.strip()
        elif current and line.strip():
            out[current] += "\n" + line.strip()  # reason and detail lines, up to a blank line
        else:
            current = None
    return out


@pytest.fixture
def isolated_sky(tmp_path, monkeypatch):
    """HOME without credentials, a private API server port; `sky api stop` afterwards."""
    sky = Path(sys.executable).parent / "sky"
    need(sky.exists(), f"needs the project's venv with SkyPilot ({sky}): run `make setup`")
    for tool, package in (("socat", "socat"), ("nc", "netcat-openbsd")):
        need(shutil.which(tool) is not None, f"SkyPilot on Kubernetes needs {tool}: run `make setup` "
             f"(as root on Debian/Ubuntu it installs it) or `sudo apt-get install -y {package}`")
    home = tmp_path / "home"
    # An empty token cache: Azure's check tests that file first and would stop there, before its
    # packages and the `az` program; it holds no credential.
    (home / ".azure").mkdir(parents=True)
    (home / ".azure" / "msal_token_cache.json").write_text("")
    for name in list(os.environ):
        if CREDENTIAL_VARS.match(name):
            monkeypatch.delenv(name)
    port = free_port()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKYPILOT_API_SERVER_LOCAL_PORT", str(port))
    monkeypatch.setenv("RLAUNCH_SKY", str(sky))  # the venv's own, whatever else is on PATH
    yield port
    stop = subprocess.run([str(sky), "api", "stop"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert not listening(port), f"the API server on {port} survived `sky api stop`: {stop.stdout}{stop.stderr}"


def test_real_sky_check_finds_every_client_and_only_credentials_missing(isolated_sky, tmp_path, capsys):
    port = isolated_sky
    was_missing = skyextras.missing("azure")
    spec = config.load("", {"INFRA": "azure", "RUN_ID": "skycheck"}, f"run.out={tmp_path / 'out'}")
    with pytest.raises(MissingPrerequisite) as err:
        sp.BACKEND.launch(LaunchPlan.render(spec, tmp_path / "out"))  # first use installs the extra, then `sky check` says no
    said = capsys.readouterr().out
    assert "SkyPilot access to azure" in str(err.value) and err.value.exit_code == 3
    assert skyextras.missing("azure") == []
    if was_missing:
        assert "first use of azure: installing SkyPilot's azure extra" in said, said
    assert listening(port), "launch's `sky check` did not start the isolated API server"

    proc = sp.BACKEND._run("check", *CLOUDS, capture=True)  # the same way rlaunch calls sky
    assert proc.returncode == 0, proc.stderr
    found = verdicts(proc.stdout + proc.stderr)
    assert set(found) == set(NO_CREDENTIALS), proc.stdout
    for cloud, verdict in found.items():
        assert "disabled" in verdict.splitlines()[0], verdict
        assert not NOT_INSTALLED.search(verdict), verdict
        assert NO_CREDENTIALS[cloud] in verdict, verdict


def test_verdicts_parses_sky_checks_text():
    text = ("Checking credentials to enable infra for SkyPilot.\n\x1b[2m  AWS: disabled \x1b[0m\n"
            "    Reason [compute, storage]: AWS dependencies are not installed.\n"
            "  Kubernetes: enabled [compute]\n\n\x1b[32m🎉 Enabled infra 🎉\x1b[0m\n  Kubernetes [compute]\n")
    found = verdicts(text)
    assert set(found) == {"AWS", "Kubernetes"}
    assert NOT_INSTALLED.search(found["AWS"]) and not NOT_INSTALLED.search(found["Kubernetes"])

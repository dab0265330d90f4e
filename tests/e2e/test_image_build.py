"""The rehearsal image built for real, without a Docker engine or a registry: `make image-build
FRAMEWORK=trl BASE=standin` with buildah builds a local stand-in for the pinned Ray base (Debian +
PyPI), then docker/trl/Dockerfile on it, unchanged; `make image-check` runs the job's first steps
inside the image (chroot isolation); `make image-push` refuses it, naming why.

Cost on a 2-core machine: about 7 min from nothing (Debian root file system ~1 min, stand-in
~2 min, the image ~4 min), about 4 min with the stand-in cached. The stand-in (~0.9 GB) and the
root file system (~0.2 GB) stay cached under ~/.cache/rlaunch for the next run; the rlaunch image
(~2 GB) is removed afterwards. Builds use their own container storage there, so no other image on
the machine is touched, and runs on one machine take turns (a lock, with a deadline).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import needs
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from rlaunch.config import images
from rlaunch.plan import imagebuild
from rlaunch.config import pins  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.full]
CACHE = Path(os.environ.get("RLAUNCH_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlaunch")
STORE = CACHE / "test-containers"
LOCK_WAIT_S = 1800  # another suite's build on this machine takes up to ~10 min on a loaded machine
BUILD_TIMEOUT_S = 2400
VERSIONS = pins.load_versions(ROOT / "configs" / "versions.yaml")
OFFICIAL = pins.get_str("images.trl.official", VERSIONS)
REF = images.rlaunch_ref("trl", VERSIONS)


def missing(what: str) -> None:
    needs.missing(f"{what} (.ci/run installs it)")


def env() -> dict[str, str]:
    # Our own storage; and pip gives up on an unreachable index after one retry, not five (this
    # machine cannot reach the CPU torch index the Dockerfile names; its torch comes from find-links).
    return os.environ | {"CONTAINERS_STORAGE_CONF": str(STORE / "storage.conf"), "BUILDER": "buildah",
                         "PIP_RETRIES": "1"}


def buildah(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", *args], env=env(), capture_output=True, text=True, timeout=300, check=False)


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", *args], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S, check=False)


def labels(ref: str) -> dict[str, str]:
    out = buildah("inspect", "--type", "image", ref)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["OCIv1"]["config"].get("Labels") or {}


@pytest.fixture(scope="module")
def built():
    for tool in ("buildah", "mmdebstrap"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (apt-get install {tool})")
    if os.geteuid() != 0:
        missing("building with buildah in chroot isolation here needs root")
    STORE.mkdir(parents=True, exist_ok=True)
    (STORE / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{STORE}/storage"\nrunroot = "{STORE}/run"\n')
    with open(STORE / "lock", "w") as lock:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another image build held {STORE / 'lock'} for {LOCK_WAIT_S} s")
                time.sleep(2)
        started = time.monotonic()
        build = make("image-build", "FRAMEWORK=trl", "BASE=standin")
        build_s = time.monotonic() - started
        try:
            yield {"build": build, "build_s": build_s,
                   "check": make("image-check", "FRAMEWORK=trl") if build.returncode == 0 else None,
                   "push": make("image-push", "FRAMEWORK=trl", "REGISTRY=registry.invalid/rlaunch-e2e")}
        finally:
            buildah("rmi", REF)
            buildah("rm", "--all")  # working containers of this storage only: check's, if it was killed


def test_build_goes_through_the_standin_and_prints_time_and_size(built):
    proc = built["build"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    err = proc.stderr
    assert "image: builder: buildah (BUILDER=buildah)" in err
    assert f"stand-in for {OFFICIAL}: built in" in err or f"stand-in for {OFFICIAL}: up to date" in err
    assert f"image: building {REF} FROM {OFFICIAL} (a local stand-in)" in err
    line = next(ln for ln in err.splitlines() if ln.startswith(f"image: built {REF} with buildah in "))
    assert ", size " in line and "GB" in line.split(", size ")[1]
    print(f"{line} (make image-build: {built['build_s']:.0f} s)")


def test_the_image_runs_the_jobs_first_steps(built):
    proc = built["check"]
    assert proc is not None and proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:] if proc else "no build"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("image-check: ")]
    assert [ln.split()[1] for ln in lines] == ["ok"] * 4, lines
    ray, trl = VERSIONS["ray"], VERSIONS["frameworks"]["trl"]["version"]
    assert "python -m rlaunch --help" in lines[0]
    assert f"node probe imports: ray {ray}, trl {trl}, torch importable" in lines[1]
    assert "entrypoint: python -m rlaunch.rehearsal.train --help" in lines[2]
    assert lines[3].endswith(f"ray --version: {ray} (the pin)")


def test_labels_and_names_come_from_the_pins(built):
    assert built["build"].returncode == 0
    recipe = imagebuild.standin("trl", VERSIONS)
    standin = labels(OFFICIAL)  # the stand-in, under the pinned base's own name
    assert standin[imagebuild.STANDIN_LABEL] == OFFICIAL
    assert standin[imagebuild.STANDIN_RECIPE_LABEL] == recipe["id"]
    assert "NOT " + OFFICIAL in standin["org.opencontainers.image.description"]
    image = labels(REF)  # the rlaunch image, named from the pins
    assert image[imagebuild.STANDIN_LABEL] == OFFICIAL
    assert image["org.opencontainers.image.base.name"] == OFFICIAL
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert image["org.opencontainers.image.revision"] == head
    config = json.loads(buildah("inspect", "--type", "image", REF).stdout)["OCIv1"]["config"]
    facts = VERSIONS["images"]["trl"]["facts"]
    assert config["User"] == str(facts["uid"]) and config["WorkingDir"] == facts["home"]
    assert any(e.startswith(f"PATH=/opt/rlaunch/scripts:{facts['python_prefix']}/bin:") for e in config["Env"])


def test_push_of_the_standin_based_image_is_refused_naming_why(built):
    proc = built["push"]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"refusing to push registry.invalid/rlaunch-e2e/{REF.rsplit('/', 1)[1]}: it is built on a local "
            f"stand-in for {OFFICIAL} (label {imagebuild.STANDIN_LABEL})") in proc.stderr
    assert "pushing " not in proc.stderr

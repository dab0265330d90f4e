"""rlaunch.validate.crds (`make crds`): the pinned CRDs downloaded into a cache with their SHA256 checked,
copied from RLAUNCH_CRDS_DIR instead where GitHub is out of reach, and never missing in silence.

A local HTTP server on 127.0.0.1 stands in for GitHub: the versions file of each test (RLAUNCH_VERSIONS)
pins small CRD stand-ins at its URLs. The last tests run the real commands: `make crds`, `rlaunch plan
INFRA=kuberay` without the CRDs, and scripts/setup where no download can succeed."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from rlaunch.errors import MissingPrerequisite
from rlaunch.validate import crds, kuberay
from needs import missing

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".venv" / "bin" / "python"
FILES = {"RayJob": b"kind: CustomResourceDefinition  # a RayJob stand-in\n",
         "PodMonitor": b"kind: CustomResourceDefinition  # a PodMonitor stand-in\n"}


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reads what it needs from the files served
        pass


@pytest.fixture
def github(tmp_path):
    """A 127.0.0.1 server for tmp_path/www, shut down after the test; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(www)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", www
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    """pin(base_url, served=...) writes a versions file whose crds point at base_url and sets it up."""
    monkeypatch.delenv("RLAUNCH_CRDS_DIR", raising=False)
    monkeypatch.setenv("RLAUNCH_CRDS_CACHE", str(tmp_path / "cache"))

    def pin(base: str, sha: dict | None = None) -> Path:
        versions = yaml.safe_load((ROOT / "configs" / "versions.yaml").read_text())
        digest = {kind: hashlib.sha256(body).hexdigest() for kind, body in FILES.items()} | (sha or {})
        versions["crds"] = {
            "kuberay": {"url": f"{base}/kuberay/v{{version}}",
                        "RayJob": {"path": "crd/ray.io_rayjobs.yaml", "sha256": digest["RayJob"]}},
            "prometheus-operator": {"url": f"{base}/prometheus-operator/v{{version}}", "PodMonitor": {
                "path": "monitoring.coreos.com_podmonitors.yaml", "sha256": digest["PodMonitor"]}},
        }
        path = tmp_path / "versions.yaml"
        path.write_text(yaml.safe_dump(versions, sort_keys=False))
        monkeypatch.setenv("RLAUNCH_VERSIONS", str(path))
        return path

    return pin


def serve(www: Path) -> None:
    for kind, body in FILES.items():
        crd = crds.get(kind)
        path = www / crd.url.split("/", 3)[3]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def test_the_pins_name_upstream_files_at_their_release_tags():
    table = crds.pinned()
    assert set(table) == {"RayCluster", "RayJob", "PodMonitor", "ComputeDomain"}
    assert table["ComputeDomain"].url == ("https://raw.githubusercontent.com/NVIDIA/k8s-dra-driver-gpu/v25.3.1/"
                                          "deployments/helm/nvidia-dra-driver-gpu/crds/"
                                          "resource.nvidia.com_computedomains.yaml")
    assert table["RayJob"].url == ("https://raw.githubusercontent.com/ray-project/kuberay/v1.7.0/ray-operator/"
                                   "config/crd/bases/ray.io_rayjobs.yaml")
    assert table["PodMonitor"].url.endswith("/prometheus-operator/v0.93.0/example/prometheus-operator-crd/"
                                            "monitoring.coreos.com_podmonitors.yaml")
    assert table["RayCluster"].folder == "kuberay-crds-v1.7.0"
    assert all(len(c.sha256) == 64 for c in table.values())


def test_fetch_downloads_checks_the_hash_and_then_finds_it_cached(github, pinned):
    base, www = github
    pinned(base)
    serve(www)
    lines = crds.fetch()
    assert [line.split(": ", 1)[1].split(" to ")[0] for line in lines] == ["downloaded"] * 2
    cached = Path(os.environ["RLAUNCH_CRDS_CACHE"]) / "kuberay-crds-v1.7.0" / "ray.io_rayjobs.yaml"
    assert cached.read_bytes() == FILES["RayJob"] and cached.stat().st_mode & 0o777 == 0o644
    assert crds.locate("RayJob") == cached
    assert all("already in" in line for line in crds.fetch())  # the second time, nothing is downloaded


def test_a_download_with_the_wrong_hash_is_refused_and_nothing_is_written(github, pinned):
    base, www = github
    pinned(base, sha={"RayJob": "0" * 64})
    serve(www)
    with pytest.raises(crds.HashMismatch, match=r"the download of http://127.0.0.1:\d+/kuberay/v1.7.0/crd/"
                                                r"ray.io_rayjobs.yaml is not the pinned kuberay v1.7.0 RayJob "
                                                r"CRD: sha256 [0-9a-f]{64}, the pin is 0{64}") as err:
        crds.fetch_one(crds.get("RayJob"))
    assert err.value.exit_code == 1
    cache = Path(os.environ["RLAUNCH_CRDS_CACHE"])
    assert not [p for p in cache.rglob("*") if p.is_file()]  # no file, not even the partial download


def test_no_network_says_how_to_get_the_crds_with_exit_3(pinned):
    pinned(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(MissingPrerequisite) as err:
        crds.fetch_one(crds.get("RayJob"))
    assert err.value.exit_code == 3
    assert "could not download http://127.0.0.1:" in str(err.value) and "RLAUNCH_CRDS_DIR" in str(err.value)


def test_an_unreachable_upstream_is_recorded_until_a_fetch_gets_the_crd(github, pinned):
    # Tests tell a machine that cannot reach GitHub (skip, saying so) from a setup never run (fail).
    pinned(f"http://127.0.0.1:{closed_port()}")
    assert crds.unreachable("RayJob") == ""  # never tried
    with pytest.raises(MissingPrerequisite):
        crds.fetch_one(crds.get("RayJob"))
    assert crds.unreachable("RayJob").startswith("http://127.0.0.1:")
    assert crds.main(["unreachable", "RayJob"]) == 0 and crds.main(["where", "RayJob"]) == 3
    base, www = github
    pinned(base)
    serve(www)
    crds.fetch_one(crds.get("RayJob"))
    assert crds.unreachable("RayJob") == "" and crds.main(["where", "RayJob"]) == 0


def test_rlaunch_crds_dir_copies_are_used_by_fetch_and_plan_and_checked_too(tmp_path, pinned, monkeypatch):
    pinned(f"http://127.0.0.1:{closed_port()}")  # nothing to download from
    local = tmp_path / "copies"
    (local / "kuberay-crds-v1.7.0").mkdir(parents=True)
    (local / "kuberay-crds-v1.7.0" / "ray.io_rayjobs.yaml").write_bytes(FILES["RayJob"])
    (local / "monitoring.coreos.com_podmonitors.yaml").write_bytes(FILES["PodMonitor"])  # or flat
    monkeypatch.setenv("RLAUNCH_CRDS_DIR", f"{tmp_path / 'elsewhere'}{os.pathsep}{local}")
    assert crds.locate("PodMonitor") == local / "monitoring.coreos.com_podmonitors.yaml"
    assert all("copied from" in line for line in crds.fetch())
    monkeypatch.delenv("RLAUNCH_CRDS_DIR")
    assert crds.locate("RayJob").parent == Path(os.environ["RLAUNCH_CRDS_CACHE"]) / "kuberay-crds-v1.7.0"
    # A copy of another version (other bytes) is not the pinned CRD: exit 3 at plan, exit 1 at fetch.
    (local / "monitoring.coreos.com_podmonitors.yaml").write_bytes(b"kind: CustomResourceDefinition  # v0.80\n")
    monkeypatch.setenv("RLAUNCH_CRDS_DIR", str(local))
    with pytest.raises(MissingPrerequisite, match="is not the pinned prometheus-operator v0.93.0 PodMonitor CRD"):
        crds.locate("PodMonitor")
    with pytest.raises(crds.HashMismatch):
        crds.fetch_one(crds.get("PodMonitor"))


def run(*args, env_extra: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RLAUNCH_CRDS_DIR", "MAKEFLAGS", "MAKELEVEL")}
    return subprocess.run(list(args), cwd=cwd, env={**env, **env_extra}, capture_output=True, text=True,
                          timeout=120, check=False)


def test_make_crds_downloads_from_the_pinned_urls(github, pinned, tmp_path):
    base, www = github
    versions = pinned(base)
    serve(www)
    env = {"RLAUNCH_VERSIONS": str(versions), "RLAUNCH_CRDS_CACHE": str(tmp_path / "cache")}
    result = run("make", "crds", env_extra=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("downloaded to") == 2
    (www / "kuberay" / "v1.7.0" / "crd" / "ray.io_rayjobs.yaml").write_bytes(b"tampered\n")
    (tmp_path / "cache" / "kuberay-crds-v1.7.0" / "ray.io_rayjobs.yaml").unlink()
    result = run("make", "crds", env_extra=env)
    assert result.returncode != 0 and "is not the pinned kuberay v1.7.0 RayJob CRD" in result.stderr


def test_plan_without_the_crds_exits_3_naming_make_crds_and_rlaunch_crds_dir(tmp_path):
    kuberay.crd_schema.cache_clear()
    env = {"RLAUNCH_CRDS_CACHE": str(tmp_path / "empty-cache"), "RLAUNCH_KUBECTL": "rlaunch-test-no-kubectl"}
    result = run(str(PY), "-m", "rlaunch", "plan", "--PRESET=verl-grpo-gsm8k-32b", "--INFRA=kuberay",
                 "--K8S_FLAVOR=gke", f"--OUT={tmp_path / 'out'}", env_extra=env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "missing the kuberay v1.7.0 RayJob CRD" in result.stderr
    assert "make crds" in result.stderr and "RLAUNCH_CRDS_DIR" in result.stderr
    assert "skipped" not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_setup_finishes_when_the_crds_cannot_be_downloaded_and_says_so(pinned, tmp_path):
    stamp = ROOT / ".venv" / ".rlaunch-setup"
    want = hashlib.sha256(b"".join(p.read_bytes() for p in [ROOT / "requirements.txt", ROOT / "configs" / "versions.yaml",
                                                             *sorted((ROOT / "configs" / "locks").glob("*.txt"))]))
    if not stamp.is_file() or stamp.read_text().strip() != f"{want.hexdigest()[:16]}:{ROOT}":
        missing("needs a .venv up to date with requirements.txt, versions.yaml and the locks (make setup), "
                "so that setup only runs its CRD step")
    versions = pinned(f"http://127.0.0.1:{closed_port()}")
    result = run(str(ROOT / "scripts" / "setup"), env_extra={"RLAUNCH_VERSIONS": str(versions),
                                                            "RLAUNCH_CRDS_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    assert "setup: .venv is up to date" in result.stdout.replace(str(ROOT) + "/", "")
    assert "could not download http://127.0.0.1:" in result.stderr and "RLAUNCH_CRDS_DIR" in result.stderr
    assert "setup: continuing without the CRDs (above): only INFRA=kuberay's plan needs them" in result.stderr

"""Free-form config values that another program would refuse only at launch, refused when the config
loads instead (exit 2, the key, the value and what is allowed, nothing written): Kubernetes names
(kubectl would refuse them) and storage.source (a bucket the infrastructure can mount)."""

from __future__ import annotations

import json
import subprocess
import sys
from operator import attrgetter
from pathlib import Path

import pytest

from rlaunch.config import load as config
from rlaunch.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
GKE = {"INFRA": "kuberay", "K8S_FLAVOR": "gke"}


def load(set_: str, **knobs):
    return config.load(knobs.pop("PRESET", ""), {"RUN_ID": "values", **knobs}, set_)


@pytest.mark.parametrize(("argv", "key", "value", "allowed"), [
    (["--INFRA=kuberay", "--K8S_FLAVOR=gke", "--PRESET=verl-grpo-gsm8k-32b", "--SET=infra.namespace=Bad_NS"],
     "infra.namespace", "Bad_NS", "DNS-1123 label"),
    (["--INFRA=gcp", "--SET=storage.source=ftp://bucket"], "storage.source", "ftp://bucket",
     "a bucket URL SkyPilot can mount: gs://BUCKET, s3://BUCKET"),
    (["--INFRA=kuberay", "--K8S_FLAVOR=gke", "--SET=storage.source=ftp://bucket"], "storage.source",
     "ftp://bucket", "a bucket KubeRay can mount: gs://BUCKET[/DIR] (gke"),
], ids=["namespace", "source-skypilot", "source-kuberay"])
def test_make_plan_refuses_the_value_before_writing_anything(tmp_path, argv, key, value, allowed):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rlaunch", "plan", *argv, f"--OUT={out}", "--RUN_ID=bad"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"rlaunch: config: {key}={value!r} (from SET): "), proc.stderr
    assert allowed in lines[0]
    assert not out.exists() and proc.stdout == ""


@pytest.mark.parametrize(("key", "value"), [
    ("infra.namespace", "Bad_NS"), ("infra.namespace", "-team"), ("infra.namespace", "team."),
    ("infra.namespace", "a" * 64), ("infra.namespace", ""), ("storage.pvc", "My_PVC"),
    ("infra.kuberay.service_account", "RL-ksa"), ("infra.kuberay.object_store_secret", "keys/tos"),
])
def test_kubernetes_names_must_be_dns_1123(key, value):
    with pytest.raises(ConfigError) as err:
        load(f"{key}={value}")
    assert (err.value.key, err.value.value) == (key, value)
    assert "DNS-1123" in err.value.allowed and "lower-case letters, digits" in err.value.allowed


@pytest.mark.parametrize(("key", "value"), [
    ("infra.namespace", "team-a"), ("infra.namespace", "a" * 63), ("storage.pvc", "data.rwx-1"),
    ("infra.kuberay.service_account", "rl-ksa"), ("infra.kuberay.object_store_secret", "tos.keys"),
])
def test_good_kubernetes_names_pass(key, value):
    spec = load(f"{key}={value}")
    node = attrgetter(key)(spec)
    assert node == value


@pytest.mark.parametrize(("knobs", "source"), [
    ({"INFRA": "gcp"}, "ftp://bucket"), ({"INFRA": "gcp"}, "gs://"), ({"INFRA": "aws"}, "/data/local"),
    ({"INFRA": "azure"}, "https://example.com/container"), ({"INFRA": "sky", "INFRA_SPEC": "gcp"}, "cos://us-east"),
    ({"INFRA": "k8s"}, "tos://bucket"), (GKE, "s3://bucket"), (GKE, "gs://"),
    ({"INFRA": "local"}, "gs://bucket"), ({"INFRA": "aistudio"}, "s3://bucket"),
])
def test_storage_source_must_be_a_bucket_the_infra_mounts(knobs, source):
    with pytest.raises(ConfigError) as err:
        load(f"storage.source={source}", **knobs)
    assert (err.value.key, err.value.value) == ("storage.source", source)


@pytest.mark.parametrize(("knobs", "source"), [
    ({"INFRA": "gcp"}, "gs://bucket"), ({"INFRA": "aws"}, "s3://bucket/dir"), ({"INFRA": "k8s"}, "r2://b"),
    ({"INFRA": "sky", "INFRA_SPEC": "ibm"}, "cos://us-east/bucket"), ({"INFRA": "sky", "INFRA_SPEC": "oci"}, "oci://b"),
    ({"INFRA": "azure"}, "https://acct01.blob.core.windows.net/data"), (GKE, "gs://bucket/dir"),
])
def test_bucket_urls_each_infra_mounts_pass(knobs, source):
    assert load(f"storage.source={source}", **knobs).storage.source == source


def test_skypilot_sources_are_skypilots_own_prefixes(tmp_path):
    """SKY_SOURCES spells each store's URL as SkyPilot's StoreType.store_prefix() does, one per store
    that storage.store can name."""
    code = ("import json; from sky.data.storage import StoreType as S; "
            "print(json.dumps({t.value.lower(): t.store_prefix() for t in (S.GCS, S.S3, S.R2, S.IBM, S.OCI, S.AZURE)}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert config.SKY_SOURCES == {prefix: store for store, prefix in theirs.items()}
    assert set(config.SKY_SOURCES.values()) == set(config.ENUMS["storage.store"]) - {""}

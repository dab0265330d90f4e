"""rlaunch.validate.kuberay: the KubeRay CRDs as strict JSON Schema, the operator's own rules (each
with a manifest that breaks it), and core kinds against Kubernetes' schemas.

The CRD tests need the KubeRay CRD files ($RLAUNCH_KUBERAY_CRDS or ../shared/kuberay-crds-v<pin>/);
without them they skip with a message saying how to get them."""

from __future__ import annotations

import copy

import pytest
import yaml

from rlaunch import artifacts, config
from rlaunch.backends import kuberay as kr
from rlaunch.errors import CheckError
from rlaunch.validate import kuberay as v

K8S = "1.34"


def crds_or_skip() -> None:
    if v.crd_dir() is None:
        pytest.skip(v.how_to_get_crds())


@pytest.fixture(scope="module")
def job() -> dict:
    """A rendered RayJob: GPU workers, a CPU head, GKE bucket, RDMA claims, a secret."""
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "v1", "K8S_FLAVOR": "gke", "RDMA": "1",
                                     "GPUS_PER_NODE": "4", "ACCELERATOR": "H200"},
                       "storage.source=gs://bkt cluster.cpu_head=true secrets=[HF_TOKEN]")
    files = artifacts.finish(spec, kr.BACKEND.render(spec))
    return yaml.safe_load(files["kuberay/rayjob.yaml"])


def as_raycluster(job: dict, name: str = "c1") -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": copy.deepcopy(job["spec"]["rayClusterSpec"])}


def crd_error(doc: dict) -> str:
    with pytest.raises(CheckError) as err:
        v.check_crd(doc, "t")
    return str(err.value)


def rules(doc: dict) -> str:
    return "\n".join(v.operator_problems(doc))


# ---------------------------------------------------------------- CRD -> JSON Schema (no CRDs needed)


def test_conversion_closes_objects_and_reads_int_or_string_and_nullable():
    schema = v.openapi_to_jsonschema({
        "type": "object",
        "properties": {
            "q": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
            "n": {"type": "string", "nullable": True},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    })
    assert schema["additionalProperties"] is False
    assert schema["properties"]["q"] == {"type": ["integer", "string"]}
    assert schema["properties"]["n"]["type"] == ["string", "null"]
    assert "additionalProperties" not in schema["properties"]["open"]
    assert schema["properties"]["m"]["additionalProperties"] == {"type": "string"}
    import jsonschema

    check = jsonschema.Draft202012Validator(schema)
    assert check.is_valid({"q": 4, "n": None, "open": {"anything": 1}, "m": {"a": "b"}})
    assert check.is_valid({"q": "4Gi"})
    assert not check.is_valid({"q": 4.5})
    assert not check.is_valid({"typo": 1})
    assert not check.is_valid({"m": {"a": 1}})


def test_missing_crds_say_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setenv("RLAUNCH_KUBERAY_CRDS", str(tmp_path))
    v.crd_schema.cache_clear()
    try:
        assert v.crd_dir() is None
        message = v.how_to_get_crds()
        assert "helm pull kuberay/kuberay-operator --version" in message and "RLAUNCH_KUBERAY_CRDS" in message
        lines = v.check_documents([("x", {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "a"},
                                          "spec": {"clusterSelector": {"ray.io/cluster": "c"}}})], K8S)
        assert lines[-1].startswith("CRD schema check skipped:")
        assert any("operator's rules" in line for line in lines)  # the rules still ran
    finally:
        v.crd_schema.cache_clear()


# ---------------------------------------------------------------- against the v1.7.0 CRDs


def test_rendered_rayjob_and_its_cluster_validate_strictly(job):
    crds_or_skip()
    assert "valid against" in v.check_crd(job, "rayjob")
    assert "valid against" in v.check_crd(as_raycluster(job), "raycluster")


def test_unknown_field_in_a_pod_container_is_rejected_with_its_path(job):
    crds_or_skip()
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "x"
    message = crd_error(bad)
    assert "workerGroupSpecs[0].template.spec.containers[0]" in message and "imagePullPolcy" in message


def test_unknown_top_level_spec_field_is_rejected(job):
    crds_or_skip()
    bad = copy.deepcopy(job)
    bad["spec"]["shutdownAfterJobFinish"] = True
    assert "shutdownAfterJobFinish" in crd_error(bad)


def test_integer_ray_start_param_is_rejected_by_the_crd(job):
    crds_or_skip()
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0
    assert "rayStartParams.num-cpus" in crd_error(bad)


def test_replicas_as_text_and_bad_quantity_are_rejected(job):
    crds_or_skip()
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "2"
    assert "replicas" in crd_error(bad)
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "limits"]["memory"] = "lots"
    assert "memory" in crd_error(bad)


def test_wrong_api_version_or_missing_metadata_is_rejected(job):
    crds_or_skip()
    bad = copy.deepcopy(job)
    bad["apiVersion"] = "ray.io/v1alpha1"
    assert "apiVersion" in crd_error(bad)
    bad = copy.deepcopy(job)
    bad["metadata"]["labelz"] = {}
    assert "labelz" in crd_error(bad)


# ---------------------------------------------------------------- the operator's rules, one each


def test_rendered_job_passes_the_operator_rules(job):
    assert v.operator_problems(job) == []
    assert v.operator_problems(as_raycluster(job)) == []


@pytest.mark.parametrize(("kind", "length", "ok"), [
    ("RayJob", 47, True), ("RayJob", 48, False), ("RayCluster", 53, True), ("RayCluster", 54, False),
])
def test_name_length_limits(job, kind, length, ok):
    doc = copy.deepcopy(job) if kind == "RayJob" else as_raycluster(job)
    doc["metadata"]["name"] = "a" * length
    assert (rules(doc) == "") is ok, rules(doc)
    if not ok:
        assert f"at most {v.MAX_NAME[kind]}" in rules(doc)


@pytest.mark.parametrize("name", ["Upper", "1starts-with-digit", "ends-with-", "under_score"])
def test_name_must_be_a_dns1035_label(job, name):
    doc = copy.deepcopy(job)
    doc["metadata"]["name"] = name
    assert "DNS-1035" in rules(doc)


def break_job(job: dict, path: str, value) -> dict:
    doc = copy.deepcopy(job)
    node = doc
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return doc


@pytest.mark.parametrize(("path", "value", "expect"), [
    ("spec.rayClusterSpec.workerGroupSpecs.0.minReplicas", 5, "minReplicas 5 is greater than maxReplicas"),
    ("spec.rayClusterSpec.workerGroupSpecs.0.maxReplicas", -1, "maxReplicas: -1 must be >= 0"),
    ("spec.rayClusterSpec.workerGroupSpecs.0.maxReplicas", KeyError, "minReplicas and maxReplicas are both required"),
    ("spec.ttlSecondsAfterFinished", -5, "ttlSecondsAfterFinished: -5 must be >= 0"),
    ("spec.shutdownAfterJobFinishes", False, "set while shutdownAfterJobFinishes is false"),
    ("spec.submissionMode", "PodMode", "is not one of K8sJobMode, HTTPMode, InteractiveMode, SidecarMode"),
    ("spec.activeDeadlineSeconds", 0, "activeDeadlineSeconds: 0 must be a positive integer"),
    ("spec.backoffLimit", -1, "backoffLimit: -1 must be >= 0"),
    ("spec.runtimeEnvYAML", "env_vars: [unclosed", "runtimeEnvYAML: not valid YAML"),
    ("spec.runtimeEnvYAML", "- a list", "must be a YAML mapping"),
    ("spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus", 0, "must be a string"),
    ("spec.rayClusterSpec.headGroupSpec.rayStartParams.labels", "a=b", "rayStartParams.labels: not supported"),
    ("spec.rayClusterSpec.headGroupSpec.resources", {"CPU": "1"}, "resources set both in rayStartParams"),
    ("spec.rayClusterSpec.workerGroupSpecs.0.template.spec.containers", [], "needs at least one container"),
    ("spec.rayClusterSpec", KeyError, "one of rayClusterSpec or clusterSelector must be set"),
])
def test_each_operator_rule_fails_its_manifest(job, path, value, expect):
    assert expect in rules(break_job(job, path, value))


def test_backoff_limit_is_refused_with_cluster_selector_and_with_interactive_mode(job):
    doc = break_job(job, "spec.rayClusterSpec", KeyError)
    doc["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    doc["spec"]["backoffLimit"] = 2
    assert "backoffLimit: 2 cannot be combined with clusterSelector" in rules(doc)
    doc["spec"]["backoffLimit"] = 0
    assert rules(doc) == ""  # 0 is the default, and allowed
    doc = break_job(job, "spec.submissionMode", "InteractiveMode")
    doc["spec"]["backoffLimit"] = 1
    assert "cannot be combined with submissionMode InteractiveMode" in rules(doc)


def test_sidecar_mode_forbids_submitter_template_and_config(job):
    doc = break_job(job, "spec.submissionMode", "SidecarMode")
    problems = rules(doc)
    assert "spec.submitterPodTemplate: not allowed with submissionMode SidecarMode" in problems
    assert "spec.submitterConfig: not allowed with submissionMode SidecarMode" in problems
    del doc["spec"]["submitterPodTemplate"], doc["spec"]["submitterConfig"]
    assert rules(doc) == ""


def test_check_documents_raises_the_operator_rule_with_its_check_name(job):
    doc = break_job(job, "spec.ttlSecondsAfterFinished", -1)
    with pytest.raises(CheckError) as err:
        v.check_documents([("rayjob.yaml", doc)], K8S)
    assert err.value.check in ("kuberay-operator", "kuberay-crd")
    assert "ttlSecondsAfterFinished" in str(err.value)


# ---------------------------------------------------------------- core kinds and PodMonitor


PVC = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d", "namespace": "n"},
       "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}}


def test_core_kind_validates_and_an_unknown_field_is_rejected():
    assert "valid PersistentVolumeClaim" in v.check_core(PVC, "pvc", K8S)
    bad = copy.deepcopy(PVC)
    bad["spec"]["accessMode"] = ["ReadWriteMany"]
    with pytest.raises(CheckError, match="accessMode") as err:
        v.check_core(bad, "pvc", K8S)
    assert err.value.check == "kubernetes-schema"


def test_unknown_kind_is_an_error_not_a_warning():
    with pytest.raises(CheckError, match="unknown kind"):
        v.check_documents([("x", {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}})], K8S)
    with pytest.raises(CheckError, match="not a Kubernetes object"):
        v.check_documents([("x", {"spec": {}})], K8S)


def test_podmonitor_schema_rejects_typos_and_bad_intervals():
    mon = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"name": "m"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "podMetricsEndpoints": [{"port": "metrics", "interval": "30s"}]}}
    assert "valid PodMonitor" in v.check_podmonitor(mon, "m")
    bad = copy.deepcopy(mon)
    bad["spec"]["podMetricsEndpoints"][0]["prot"] = "metrics"
    with pytest.raises(CheckError, match="prot"):
        v.check_podmonitor(bad, "m")
    bad = copy.deepcopy(mon)
    bad["spec"]["podMetricsEndpoints"][0]["interval"] = "thirty seconds"
    with pytest.raises(CheckError, match="interval"):
        v.check_podmonitor(bad, "m")

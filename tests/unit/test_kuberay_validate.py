"""rlaunch.validate.kuberay: RayJob/RayCluster/PodMonitor/ComputeDomain as the API server admits them with the pinned
CRDs (ObjectMeta, defaults, strict schema, the CRDs' own CEL rules), the operator's own rules (each
with a manifest that breaks it), and core kinds against Kubernetes' schemas.

The tests taking the `crds` fixture need the pinned CRD files (`make crds`, or RLAUNCH_CRDS_DIR); without
them they skip saying how to get them, and under CI=true they fail. The conversion, defaulting and CEL
mechanics are also tested on small schemas of their own, which need no CRD."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.kuberay import backend as kr
from rlaunch.backends.kuberay import gke, manifests
from rlaunch.errors import CheckError, MissingPrerequisite
from rlaunch.validate import apiserver
from rlaunch.validate import kuberay as v

K8S = "1.34"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kuberay"


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
    schema = apiserver.openapi_to_jsonschema({
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


def test_missing_crds_stop_with_exit_3_naming_make_crds_and_rlaunch_crds_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RLAUNCH_CRDS_DIR", str(tmp_path))
    monkeypatch.setenv("RLAUNCH_CRDS_CACHE", str(tmp_path / "cache"))
    v.crd_schema.cache_clear()
    try:
        with pytest.raises(MissingPrerequisite) as err:
            v.check_documents([("x", {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "a"},
                                      "spec": {"clusterSelector": {"ray.io/cluster": "c"}}})], K8S)
    finally:
        v.crd_schema.cache_clear()
    message = str(err.value)
    assert err.value.exit_code == 3
    assert "RayJob CRD" in message and "make crds" in message and "RLAUNCH_CRDS_DIR" in message
    assert "skipped" not in message


# ---------------------------------------------------------------- against the v1.7.0 CRDs


def test_rendered_rayjob_and_its_cluster_validate_strictly(crds, job):
    assert "valid against" in v.check_crd(job, "rayjob")
    assert "valid against" in v.check_crd(as_raycluster(job), "raycluster")


def test_unknown_field_in_a_pod_container_is_rejected_with_its_path(crds, job):
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "x"
    message = crd_error(bad)
    assert "workerGroupSpecs[0].template.spec.containers[0]" in message and "imagePullPolcy" in message


def test_unknown_top_level_spec_field_is_rejected(crds, job):
    bad = copy.deepcopy(job)
    bad["spec"]["shutdownAfterJobFinish"] = True
    assert "shutdownAfterJobFinish" in crd_error(bad)


def test_integer_ray_start_param_is_rejected_by_the_crd(crds, job):
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0
    assert "rayStartParams.num-cpus" in crd_error(bad)


def test_replicas_as_text_and_bad_quantity_are_rejected(crds, job):
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "2"
    assert "replicas" in crd_error(bad)
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "limits"]["memory"] = "lots"
    assert "memory" in crd_error(bad)


def test_wrong_api_version_or_missing_metadata_is_rejected(crds, job):
    bad = copy.deepcopy(job)
    bad["apiVersion"] = "ray.io/v1alpha1"
    assert "apiVersion" in crd_error(bad)
    bad = copy.deepcopy(job)
    bad["metadata"]["labelz"] = {}
    assert "labelz" in crd_error(bad)


# ---------------------------------------------------------------- the operator's rules, one each


def test_rendered_job_passes_the_operator_rules(crds, job):
    assert v.operator_problems(job) == []
    assert v.operator_problems(as_raycluster(job)) == []


@pytest.mark.parametrize(("kind", "length", "ok"), [
    ("RayJob", 47, True), ("RayJob", 48, False), ("RayCluster", 53, True), ("RayCluster", 54, False),
])
def test_name_length_limits(crds, job, kind, length, ok):
    doc = copy.deepcopy(job) if kind == "RayJob" else as_raycluster(job)
    doc["metadata"]["name"] = "a" * length
    assert (rules(doc) == "") is ok, rules(doc)
    if not ok:
        assert f"at most {v.MAX_NAME[kind]}" in rules(doc)


@pytest.mark.parametrize("name", ["Upper", "1starts-with-digit", "ends-with-", "under_score"])
def test_name_must_be_a_dns1035_label(crds, job, name):
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
def test_each_operator_rule_fails_its_manifest(crds, job, path, value, expect):
    assert expect in rules(break_job(job, path, value))


def test_backoff_limit_is_refused_with_cluster_selector_and_with_interactive_mode(crds, job):
    doc = break_job(job, "spec.rayClusterSpec", KeyError)
    doc["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    doc["spec"]["backoffLimit"] = 2
    assert "backoffLimit: 2 cannot be combined with clusterSelector" in rules(doc)
    doc["spec"]["backoffLimit"] = 0
    assert rules(doc) == ""  # 0 is the default, and allowed
    doc = break_job(job, "spec.submissionMode", "InteractiveMode")
    doc["spec"]["backoffLimit"] = 1
    assert "cannot be combined with submissionMode InteractiveMode" in rules(doc)


def test_sidecar_mode_forbids_submitter_template_and_config(crds, job):
    doc = break_job(job, "spec.submissionMode", "SidecarMode")
    problems = rules(doc)
    assert "spec.submitterPodTemplate: not allowed with submissionMode SidecarMode" in problems
    assert "spec.submitterConfig: not allowed with submissionMode SidecarMode" in problems
    del doc["spec"]["submitterPodTemplate"], doc["spec"]["submitterConfig"]
    assert rules(doc) == ""


def test_check_documents_raises_the_operator_rule_with_its_check_name(crds, job):
    doc = break_job(job, "spec.ttlSecondsAfterFinished", -1)
    with pytest.raises(CheckError) as err:
        v.check_documents([("rayjob.yaml", doc)], K8S)
    assert err.value.check in ("kuberay-operator", "kuberay-crd")
    assert "ttlSecondsAfterFinished" in str(err.value)


# ---------------------------------------------------------------- core kinds and PodMonitor (its pinned CRD)


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


def test_podmonitor_schema_rejects_typos_and_bad_intervals(crds):
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


def test_compute_domain_is_admitted_with_the_dra_drivers_crd_and_its_mistakes_named(crds, dra_crd):
    spec = config.load("verl-grpo-gsm8k-32b", {"INFRA": "kuberay", "RUN_ID": "cd"})
    files = artifacts.finish(spec, kr.BACKEND.render(spec))
    domain = yaml.safe_load(files["kuberay/computedomain.yaml"])
    (line, last) = v.check_documents([("computedomain.yaml", domain)], K8S)
    assert "valid ComputeDomain against the nvidia-dra-driver-gpu v25.3.1 ComputeDomain CRD" in line
    assert "1 skipped" in last  # its spec-is-immutable rule reads oldSelf: an update-only rule
    bad = copy.deepcopy(domain)
    bad["spec"]["numNode"] = bad["spec"].pop("numNodes")
    with pytest.raises(CheckError, match=r"numNode.*ComputeDomain CRD") as err:
        v.check_documents([("computedomain.yaml", bad)], K8S)
    assert err.value.check == "compute-domain-crd"
    bad = copy.deepcopy(domain)
    bad["spec"]["numNodes"] = "4"
    with pytest.raises(CheckError, match="numNodes"):
        v.check_documents([("computedomain.yaml", bad)], K8S)
    bad = copy.deepcopy(domain)
    bad["apiVersion"] = "resource.nvidia.com/v1"
    with pytest.raises(CheckError, match="unknown kind"):  # not a version the pinned CRD serves
        v.check_documents([("computedomain.yaml", bad)], K8S)


# ---------------------------------------------------------------- as the API server admits them (issue 20)
# Cases in the shape of KubeRay v1.7.0's samples (tests/fixtures/kuberay/rayjob.yaml), one change each.


def probe(**changes) -> dict:
    """The fixture RayJob with top-level spec or metadata changes (None deletes a key)."""
    doc = yaml.safe_load((FIXTURES / "rayjob.yaml").read_text())
    for dotted, value in changes.items():
        node = doc
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return doc


def admitted_lines(doc: dict) -> list[str]:
    return v.check_documents([("rayjob.yaml", doc)], K8S)


def test_the_fixture_is_accepted_and_plan_counts_the_cel_rules(crds):
    lines = admitted_lines(probe())
    assert "valid against the kuberay v1.7.0 RayJob CRD" in lines[0]
    assert "passes the KubeRay operator's rules" in lines[1]
    assert lines[-1] == "CEL rules of the pinned CRDs (x-kubernetes-validations): 0 evaluated, 0 skipped"
    assert "9 of the CRD's 9 guard fields this object leaves unset" in lines[0]


def test_rayjob_with_generate_name_is_accepted(crds):
    doc = probe(metadata={"generateName": "digits-probe-"})
    lines = admitted_lines(doc)
    assert lines[0].startswith("rayjob.yaml RayJob/digits-probe-: valid against")
    # The operator's name rules apply to the name the server generates: prefix + 5 characters.
    long = probe(metadata={"generateName": "p" * 43})
    with pytest.raises(CheckError, match=r"metadata.generateName: 'p{43}' \(\+ 5 generated characters\) has 48 "
                                         r"characters; a RayJob name may have at most 47"):
        admitted_lines(long)
    with pytest.raises(CheckError, match="name or generateName is required"):
        admitted_lines(probe(metadata={"labels": {"a": "b"}}))


def test_worker_group_without_max_replicas_is_accepted_with_the_default_shown(crds):
    doc = probe()
    del doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"]
    assert rules(doc) == ""  # the operator sees maxReplicas 2147483647, the CRD's default
    lines = admitted_lines(doc)
    assert "required and defaulted: spec.rayClusterSpec.workerGroupSpecs[0].maxReplicas=2147483647" in lines[0]
    stored = v.admit(doc, "x").doc
    assert stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"] == 2147483647
    assert stored["spec"]["submissionMode"] == "K8sJobMode"  # a default the CRD does not require
    assert "maxReplicas" not in doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]  # the input is untouched


def test_deletion_strategy_with_on_success_and_deletion_rules_is_rejected_with_the_crds_message(crds):
    doc = probe(spec__shutdownAfterJobFinishes=False, spec__ttlSecondsAfterFinished=None, spec__deletionStrategy={
        "onSuccess": {"policy": "DeleteCluster"},
        "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 60}}],
    })
    with pytest.raises(CheckError) as err:
        admitted_lines(doc)
    assert err.value.check == "kuberay-crd"
    assert ("spec.deletionStrategy: legacy policies (onSuccess/onFailure) and deletionRules cannot be used "
            "together within the same deletionStrategy (kuberay v1.7.0 RayJob CRD)") in str(err.value)


def test_deletion_rules_alone_pass_and_each_rule_condition_is_checked(crds):
    rule = {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}}
    doc = probe(spec__shutdownAfterJobFinishes=False, spec__ttlSecondsAfterFinished=None,
                spec__deletionStrategy={"deletionRules": [rule]})
    lines = admitted_lines(doc)
    # Two rules on deletionStrategy and two on the one rule's condition.
    assert lines[-1] == "CEL rules of the pinned CRDs (x-kubernetes-validations): 4 evaluated, 0 skipped"
    both = copy.deepcopy(rule)
    both["condition"]["jobDeploymentStatus"] = "Failed"
    doc["spec"]["deletionStrategy"]["deletionRules"].append(both)
    with pytest.raises(CheckError, match=r"spec.deletionStrategy.deletionRules\[1\].condition: JobStatus and "
                                         r"JobDeploymentStatus cannot be used together"):
        admitted_lines(doc)


def test_unknown_managed_by_is_rejected_with_the_crds_message(crds):
    with pytest.raises(CheckError) as err:
        admitted_lines(probe(spec__managedBy="example.com/my-controller"))
    assert ("spec.managedBy: the managedBy field value must be either 'ray.io/kuberay-operator' or "
            "'kueue.x-k8s.io/multikueue'") in str(err.value)


def test_rule_with_old_self_is_skipped_on_create_and_reported(crds):
    lines = admitted_lines(probe(spec__managedBy="kueue.x-k8s.io/multikueue"))
    assert ("CEL rules: 1 evaluated, 1 skipped: spec.managedBy: `self == oldSelf` (transition rule: reads "
            "oldSelf, checked on update only)") in lines[0]
    assert lines[-1].startswith("CEL rules of the pinned CRDs (x-kubernetes-validations): 1 evaluated, 1 skipped")
    cluster = as_raycluster({"spec": {"rayClusterSpec": probe()["spec"]["rayClusterSpec"]}})
    cluster["spec"]["gcsFaultToleranceOptions"] = {"backend": "redis", "redisAddress": "redis:6379"}
    admission = v.admit(cluster, "c")
    assert admission.cel.skipped == ["spec.gcsFaultToleranceOptions.backend: `self == oldSelf` (transition "
                                     "rule: reads oldSelf, checked on update only)"]


def test_podmonitor_gets_its_crds_defaults(crds):
    mon = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"generateName": "m-"},
           "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "metrics", "relabelings": [
               {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"}]}]}}
    admission = v.admit(mon, "m")
    assert admission.doc["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["action"] == "replace"
    assert "valid PodMonitor against the prometheus-operator v0.93.0 PodMonitor CRD" in v.check_podmonitor(mon, "m")


def golden_kuberay_cases() -> list[tuple[str, str, dict]]:
    """The golden cases of INFRA=kuberay (tests/golden/cases_kuberay.py): every preset that runs there."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "golden" / "cases_kuberay.py"
    module_spec = importlib.util.spec_from_file_location("cases_kuberay", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.CASES


@pytest.mark.parametrize(("name", "preset", "knobs"), golden_kuberay_cases(), ids=[c[0] for c in golden_kuberay_cases()])
def test_every_rendered_kuberay_manifest_is_admitted(crds, name, preset, knobs, request):
    knobs = dict(knobs)
    sets = f"monitoring.podmonitors=true {knobs.pop('SET', '')}"  # a case's own overrides
    spec = config.load(preset, {"RUN_ID": "golden", **knobs}, sets)
    files = artifacts.finish(spec, kr.BACKEND.render(spec))
    # GKE's Network objects: their CRDs are the cluster's, not pinned; the backend checks their shape.
    documents, _ = gke.check_networks(manifests.documents(files))
    if any(doc.get("kind") == "ComputeDomain" for _, doc in documents):  # A4X: its CRD too
        request.getfixturevalue("dra_crd")
    lines = v.check_documents(documents, K8S)
    assert any("PodMonitor/" in line and "valid PodMonitor" in line for line in lines)
    assert any("RayJob/" in line and "valid against" in line for line in lines)


# ---------------------------------------------------------------- defaults and CEL, on schemas of our own


def test_defaults_fill_required_fields_prune_non_nullable_nulls_and_keep_nullable_ones():
    schema = {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "default": 3},
        "mode": {"type": "string", "default": "fast"},
        "note": {"type": "string"},
        "maybe": {"type": "string", "nullable": True},
        "items": {"type": "array", "items": {"type": "object", "properties": {"w": {"type": "integer", "default": 1}}}},
        "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "on": {"type": "boolean", "default": True}}}},
    }}
    doc = {"mode": None, "note": None, "maybe": None, "items": [{}, {"w": 5}], "byName": {"a": {}}}
    applied = apiserver.apply_defaults(doc, schema)
    assert doc == {"size": 3, "mode": "fast", "maybe": None, "items": [{"w": 1}, {"w": 5}], "byName": {"a": {"on": True}}}
    assert [str(d) for d in applied if d.required] == ["size=3"]
    assert {str(d) for d in applied} == {"size=3", "mode=\"fast\"", "items[0].w=1", "byName.a.on=true"}


def crd_of(spec_schema: dict) -> dict:
    return {"spec": {"group": "example.com", "names": {"kind": "Gadget"}, "versions": [{
        "name": "v1", "served": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": spec_schema}}}}]}}


def gadget(spec: dict) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec}


def test_cel_message_expression_field_path_and_runtime_errors():
    schema = apiserver.CrdSchema(crd_of({"type": "object", "properties": {
        "low": {"type": "integer"}, "high": {"type": "integer", "default": 10}}, "x-kubernetes-validations": [
        {"rule": "self.low <= self.high", "messageExpression": "'low ' + string(self.low) + ' > high'",
         "fieldPath": ".low"},
    ]}), label="Gadget CRD")
    assert schema.admit(gadget({"low": 3}), "g").cel.evaluated == 1  # high came from its default
    with pytest.raises(CheckError, match=r"g: spec.low: low 11 > high \(Gadget CRD\)"):
        schema.admit(gadget({"low": 11}), "g")
    with pytest.raises(CheckError, match="could not be evaluated"):  # no such key: the server fails the rule
        schema.admit(gadget({}), "g")


def test_cel_optional_old_self_runs_on_create_and_unknown_functions_are_reported_not_passed():
    schema = apiserver.CrdSchema(crd_of({"type": "string", "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "optionalOldSelf": True, "message": "frozen"},
        {"rule": "self.lowerAscii() == self", "message": "lower case"},
    ]}), label="Gadget CRD")
    report = schema.admit(gadget("Abc"), "g").cel
    assert report.evaluated == 1
    assert report.skipped == ["spec: `self.lowerAscii() == self` (calls lowerAscii(), not in the offline CEL library)"]


def test_kuberays_own_sample_shape_without_max_replicas_is_accepted_after_the_crds_defaults(crds):
    """The shape of KubeRay v1.7.0's samples (ray-operator/config/samples/, e.g. a worker group with
    `replicas` and no min/maxReplicas): the API server fills minReplicas 0 and maxReplicas 2147483647
    before the operator sees it, so neither check refuses it, raw or admitted."""
    pod = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.52.0"}]}}
    sample = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster-mini"},
              "spec": {"rayVersion": "2.52.0", "headGroupSpec": {"rayStartParams": {}, "template": pod},
                       "workerGroupSpecs": [{"groupName": "workergroup", "replicas": 2, "rayStartParams": {},
                                             "template": pod}]}}
    assert v.operator_problems(sample) == []
    lines = v.check_documents([("sample.yaml", sample)], K8S)
    assert any("passes the KubeRay operator's rules" in line for line in lines), lines
    assert "maxReplicas" not in sample["spec"]["workerGroupSpecs"][0]  # the input is untouched
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rayjob-sample"},
           "spec": {"entrypoint": "python -c 'import ray'", "rayClusterSpec": copy.deepcopy(sample["spec"])}}
    assert v.operator_problems(job) == []
    # A bound the user did set is still checked against the default of the other one.
    sample["spec"]["workerGroupSpecs"][0]["minReplicas"] = -1
    assert "minReplicas: -1 must be >= 0" in rules(sample)

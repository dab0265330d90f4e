"""Offline validation of the KubeRay manifests rlaunch renders, as strictly as a real cluster would.

Three layers, each catching what the one before cannot:
  1. RayJob / RayCluster as the API server admits them with the KubeRay CRDs pinned in
     configs/versions.yaml (validate/apiserver.py: ObjectMeta, the CRD's defaults, its schema with
     unknown fields as errors, its own CEL rules), and the Prometheus Operator's PodMonitor and NVIDIA
     DRA driver's ComputeDomain (GKE A4X) the same way with their pinned CRDs.
  2. The operator's own rules, which no CRD states (ray-operator/controllers/ray/utils/validation.go at
     the pin), on the object as the API server would store it (defaults applied).
  3. Core kinds (PersistentVolumeClaim, PersistentVolume, ConfigMap, Secret, ServiceAccount,
     ResourceClaimTemplate, ...) against Kubernetes' own schemas from the `kubernetes-validate`
     package (strict variant). An unknown kind is an error, never a warning.

The CRD files come from validate/crds.py (`make crds`, or $RLAUNCH_CRDS_DIR); without them a check
that needs one stops with exit 3 saying how to get it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from rlaunch.validate import crds
from rlaunch.validate.apiserver import Admission, CrdSchema, effective_name, where as _where
from rlaunch.errors import CheckError, MissingPrerequisite

RAY_API = "ray.io/v1"
RAY_KINDS = ("RayCluster", "RayJob")
PODMONITOR_API = "monitoring.coreos.com/v1"
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
# Kinds admitted against a pinned CRD other than KubeRay's: apiVersion -> (kind, check name).
OTHER_CRDS = {PODMONITOR_API: ("PodMonitor", "podmonitor-schema"),
              COMPUTE_DOMAIN_API: ("ComputeDomain", "compute-domain-crd")}
# validation.go ValidateRayClusterMetadata / ValidateRayJobMetadata with constant.go's
# MaxRayClusterNameLength = 53 and MaxRayJobNameLength = 53 - 6 (the operator names the RayJob's
# cluster "<rayjob>-<5 random chars>").
MAX_NAME = {"RayCluster": 53, "RayJob": 47}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# apis/ray/v1/rayjob_types.go's JobSubmissionMode values. validation.go does not check the field (the
# CRD has no enum for it): an unknown mode fails later, in the controller's switch statements
# (common/job.go BuildJobSubmitCommand), so it is refused here.
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
# validation.go validateRayGroupResources: rayStartParams keys that size a node; the group-level
# `resources` map must not repeat them.
RAY_START_RESOURCES = ("num-cpus", "num-gpus", "memory", "resources")


# ---------------------------------------------------------------- the CRDs, as the API server reads them


@lru_cache(maxsize=None)
def crd_schema(kind: str, version: str = "v1") -> CrdSchema:
    """RayCluster, RayJob, PodMonitor or ComputeDomain at its pin, that served version; MissingPrerequisite
    (exit 3) without the file."""
    check = next((c for k, c in OTHER_CRDS.values() if k == kind), "kuberay-crd")
    return CrdSchema(crds.load(kind), version, label=crds.get(kind).label, check=check)


def _schema_of(doc: dict[str, Any]) -> CrdSchema:
    """The schema of the version rlaunch renders (another apiVersion is then an error that says so)."""
    kind = doc.get("kind", "")
    api = next((a for a, (k, _) in OTHER_CRDS.items() if k == kind), RAY_API)
    return crd_schema(kind, api.rpartition("/")[2])


def admit(doc: dict[str, Any], where: str) -> Admission:
    """A RayJob/RayCluster/PodMonitor/ComputeDomain as the API server would store it; CheckError names
    the field."""
    return _schema_of(doc).admit(doc, where)


def _admitted(doc: dict[str, Any], where: str) -> tuple[str, Admission]:
    admission = admit(doc, where)
    verdict = f"valid {doc['kind']}" if doc.get("kind") in ("PodMonitor", "ComputeDomain") else "valid"
    return f"{where}: {verdict} against the {_schema_of(doc).label} (strict; {admission.summary()})", admission


def check_crd(doc: dict[str, Any], where: str) -> str:
    """Validate a RayJob/RayCluster/PodMonitor against its CRD (strict, defaults, CEL); the line saying so."""
    return _admitted(doc, where)[0]


check_podmonitor = check_crd


# ---------------------------------------------------------------- the operator's rules


def operator_problems(doc: dict[str, Any]) -> list[str]:
    """What the KubeRay operator would reject (or silently ignore) that the CRD lets through, on the
    object as the API server stores it: the pinned CRD's defaults are applied first (the operator
    never sees a field the CRD defaults as missing, e.g. a worker group's minReplicas 0 and
    maxReplicas 2147483647), so any object may be given, defaulted (admit(doc).doc) or not.
    Without the CRD: MissingPrerequisite (exit 3)."""
    if doc.get("kind") in RAY_KINDS:
        doc = crd_schema(doc["kind"]).defaulted(doc)[0]
    kind = doc.get("kind", "")
    meta = doc.get("metadata") or {}
    name = effective_name(meta)
    # validation.go ValidateRayClusterMetadata / ValidateRayJobMetadata, on the name the server gives.
    label = f"metadata.name: '{name}'" if meta.get("name") else \
        f"metadata.generateName: '{meta.get('generateName', '')}' (+ 5 generated characters)"
    problems = []
    if len(name) > MAX_NAME[kind]:
        problems.append(f"{label} has {len(name)} characters; a {kind} name may have at most {MAX_NAME[kind]}")
    if not DNS1035.match(name):
        problems.append(f"{label} is not a DNS-1035 label (lower-case letters, digits and '-', starting "
                        "with a letter and ending with a letter or digit)")
    spec = doc.get("spec") or {}
    if kind == "RayJob":
        problems += _rayjob_problems(spec)
        if spec.get("rayClusterSpec"):
            problems += _cluster_problems(spec["rayClusterSpec"], "spec.rayClusterSpec")
    else:
        problems += _cluster_problems(spec, "spec")
    return problems


def _rayjob_problems(spec: dict[str, Any]) -> list[str]:  # a RayJob manifest's spec, not rlaunch's Spec
    """validation.go ValidateRayJobSpec, with validateDeletionConfiguration's TTL rule."""
    import yaml

    out = []
    mode = spec.get("submissionMode", "K8sJobMode")
    backoff = spec.get("backoffLimit")
    selector = spec.get("clusterSelector") or {}
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    shutdown = bool(spec.get("shutdownAfterJobFinishes", False))
    if mode not in SUBMISSION_MODES:
        out.append(f"spec.submissionMode: '{mode}' is not one of {', '.join(SUBMISSION_MODES)}")
    if isinstance(ttl, int) and ttl < 0:
        out.append(f"spec.ttlSecondsAfterFinished: {ttl} must be >= 0")
    if isinstance(ttl, int) and ttl > 0 and not shutdown:
        out.append("spec.ttlSecondsAfterFinished: set while shutdownAfterJobFinishes is false")
    if spec.get("suspend") and not shutdown:
        out.append("spec.suspend: a RayJob with shutdownAfterJobFinishes false cannot be suspended")
    if not spec.get("rayClusterSpec") and not selector:
        out.append("spec: one of rayClusterSpec or clusterSelector must be set")
    if selector:
        if not selector.get("ray.io/cluster"):
            out.append("spec.clusterSelector: needs a non-empty 'ray.io/cluster' entry")
        if mode == "SidecarMode":
            out.append("spec.clusterSelector: not supported with submissionMode SidecarMode")
        if isinstance(backoff, int) and backoff > 0:
            out.append(f"spec.backoffLimit: {backoff} cannot be combined with clusterSelector")
        if spec.get("suspend"):
            out.append("spec.suspend: not supported with clusterSelector")
    if mode == "InteractiveMode" and isinstance(backoff, int) and backoff > 0:
        out.append(f"spec.backoffLimit: {backoff} cannot be combined with submissionMode InteractiveMode")
    if mode == "SidecarMode":
        for key in ("submitterPodTemplate", "submitterConfig"):
            if key in spec:
                out.append(f"spec.{key}: not allowed with submissionMode SidecarMode")
        head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {})
        policy = ((head.get("template") or {}).get("spec") or {}).get("restartPolicy", "")
        if policy not in ("", "Never"):
            out.append(f"spec.rayClusterSpec.headGroupSpec.template.spec.restartPolicy: '{policy}' "
                       "must be Never or unset with SidecarMode")
    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        value = spec.get(key)
        if isinstance(value, int) and value <= 0:
            out.append(f"spec.{key}: {value} must be a positive integer")
    if isinstance(backoff, int) and backoff < 0:
        out.append(f"spec.backoffLimit: {backoff} must be >= 0")
    text = spec.get("runtimeEnvYAML", "")
    if text:
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError as err:
            out.append(f"spec.runtimeEnvYAML: not valid YAML ({err})")
        else:
            if not isinstance(parsed, dict):
                out.append("spec.runtimeEnvYAML: must be a YAML mapping (working_dir, env_vars, ...)")
    return out


def _group_problems(group: dict[str, Any], where: str, label: str) -> list[str]:
    """validation.go ValidateRayClusterSpec's per-group checks: a container, validateRayGroupLabels,
    validateRayGroupResources. (String rayStartParams is the CRD's map[string]string type, repeated
    here for a message that says how to quote the value.)"""
    out = []
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        out.append(f"{where}.template.spec.containers: the {label} needs at least one container")
    params = group.get("rayStartParams") or {}
    for key, value in params.items():
        if not isinstance(value, str):
            out.append(f"{where}.rayStartParams.{key}: {value!r} must be a string (quote it: \"{value}\")")
    if "labels" in params:
        out.append(f"{where}.rayStartParams.labels: not supported; use the group's `labels` field")
    if group.get("resources") and any(params.get(k) for k in RAY_START_RESOURCES):
        out.append(f"{where}: resources set both in rayStartParams and in `resources`; use one")
    return out


def _cluster_problems(cluster: dict[str, Any], where: str) -> list[str]:
    """validation.go ValidateRayClusterSpec's groups, and the replica bounds per worker group (on the
    defaulted object: the CRD gives minReplicas 0 and maxReplicas 2147483647 where they are unset,
    so neither is ever missing here)."""
    out = _group_problems(cluster.get("headGroupSpec") or {}, f"{where}.headGroupSpec", "head")
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        at = f"{where}.workerGroupSpecs[{i}]"
        out += _group_problems(group, at, f"worker group '{group.get('groupName', i)}'")
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        for key, value in (("minReplicas", low), ("maxReplicas", high)):
            if isinstance(value, int) and value < 0:
                out.append(f"{at}.{key}: {value} must be >= 0")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            out.append(f"{at}: minReplicas {low} is greater than maxReplicas {high}")
    return out


def check_operator_rules(doc: dict[str, Any], where: str) -> str:
    problems = operator_problems(doc)
    if problems:
        raise CheckError("kuberay-operator", f"{where}: " + "; ".join(problems))
    return f"{where}: passes the KubeRay operator's rules (name, replicas, TTL, backoffLimit, mode)"


# ---------------------------------------------------------------- core kinds


def check_core(doc: dict[str, Any], where: str, k8s_version: str) -> str:
    """A built-in kind against Kubernetes' own strict schema of that version."""
    try:
        from kubernetes_validate import utils as kv
    except ImportError:
        raise MissingPrerequisite("the kubernetes-validate package",
                                  "run `make setup` (it is in requirements.txt)") from None
    kind, api = doc.get("kind", "?"), doc.get("apiVersion", "?")
    try:
        kv.validate(doc, k8s_version, strict=True)
    except kv.SchemaNotFoundError:
        raise CheckError("kubernetes-schema", f"{where}: no Kubernetes {k8s_version} schema for kind "
                         f"{kind} in {api}: unknown kind or apiVersion") from None
    except kv.ValidationError as err:
        raise CheckError("kubernetes-schema", f"{where}: {_where(err.absolute_path)}: {err.message} "
                         f"(Kubernetes {k8s_version} {kind}, strict)") from None
    return f"{where}: valid {kind} ({api}, Kubernetes {k8s_version} schema, strict)"


# ---------------------------------------------------------------- everything at once


def check_documents(docs: list[tuple[str, dict[str, Any]]], k8s_version: str) -> list[str]:
    """Validate (where, manifest) pairs; CheckError on the first problem, lines of what passed, and a
    last line counting the CRDs' CEL rules. Without a CRD it needs: MissingPrerequisite (exit 3)."""
    lines, evaluated, skipped = [], 0, 0
    # The KubeRay CRDs first: without them nothing runs, so theirs is the prerequisite to name first.
    needing = [d for _, d in docs if isinstance(d, dict) and (str(d.get("apiVersion", "")).startswith("ray.io/")
                                                              or d.get("apiVersion") in OTHER_CRDS)]
    for doc in sorted(needing, key=lambda d: d.get("kind") not in RAY_KINDS):
        if doc.get("kind") in RAY_KINDS or OTHER_CRDS.get(doc["apiVersion"], ("",))[0] == doc.get("kind"):
            _schema_of(doc)
    for where, doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise CheckError("kubernetes-schema", f"{where}: not a Kubernetes object (no kind/apiVersion)")
        meta = doc.get("metadata") or {}
        label = f"{where} {doc['kind']}/{meta.get('name') or meta.get('generateName', '?')}"
        if doc["apiVersion"].startswith("ray.io/"):
            if doc["kind"] not in RAY_KINDS or doc["apiVersion"] != RAY_API:
                raise CheckError("kuberay-crd", f"{label}: rlaunch renders {RAY_API} "
                                 f"{' or '.join(RAY_KINDS)}, not {doc['apiVersion']} {doc['kind']}")
            line, admission = _admitted(doc, label)
            lines += [line, check_operator_rules(admission.doc, label)]
        elif OTHER_CRDS.get(doc["apiVersion"], ("",))[0] == doc["kind"]:
            line, admission = _admitted(doc, label)
            lines.append(line)
        else:
            lines.append(check_core(doc, label, k8s_version))
            continue
        evaluated, skipped = evaluated + admission.cel.evaluated, skipped + len(admission.cel.skipped)
    why = " (each named above, with why)" if skipped else ""
    lines.append(f"CEL rules of the pinned CRDs (x-kubernetes-validations): {evaluated} evaluated, "
                 f"{skipped} skipped{why}")
    return lines

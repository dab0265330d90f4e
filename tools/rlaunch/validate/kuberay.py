"""Offline validation of the KubeRay manifests rlaunch renders, as strictly as a real cluster would.

Three layers, each catching what the one before cannot:
  1. RayJob / RayCluster against the KubeRay CRDs (the version pinned as `kuberay` in
     configs/versions.yaml), their openAPIV3Schema turned into JSON Schema the way the API server
     reads it: `x-kubernetes-int-or-string` -> integer or string, `nullable` -> also null, and
     `additionalProperties: false` on every object that does not preserve unknown fields, which is
     what `kubectl apply` (strict field validation) reports as "unknown field".
  2. The operator's own rules, which no schema holds (ray-operator/controllers/ray/utils/
     validation.go): name lengths, replica bounds, TTL, backoffLimit combinations, submission modes.
  3. Core kinds (PersistentVolumeClaim, PersistentVolume, ConfigMap, Secret, ServiceAccount,
     ResourceClaimTemplate, ...) against Kubernetes' own schemas from the `kubernetes-validate`
     package (strict variant), and the Prometheus Operator's PodMonitor against a strict subset of
     its monitoring.coreos.com/v1 schema written here. An unknown kind is an error, never a warning.

Where the CRDs come from: $RLAUNCH_KUBERAY_CRDS, else ../shared/kuberay-crds-v<pin>/ beside the
repository. Without them layer 1 is skipped with a message saying how to get them (layers 2-3 run).
"""

from __future__ import annotations

import copy
import os
import re
from functools import lru_cache
from pathlib import Path

from .. import ROOT
from ..errors import CheckError, MissingPrerequisite

RAY_API = "ray.io/v1"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}
# The operator builds "<rayjob>-<5 random chars>" RayClusters, hence 53 - 6 for a RayJob.
MAX_NAME = {"RayCluster": 53, "RayJob": 47}
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
# rayStartParams keys that size a node; the group-level `resources` map must not repeat them.
RAY_START_RESOURCES = ("num-cpus", "num-gpus", "memory", "resources")
# OpenAPI keys that JSON Schema does not need (or that the API server checks some other way).
_DROP = {
    "description", "default", "format", "example", "nullable", "x-kubernetes-validations",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
}
# What the API server accepts in a top-level metadata (ObjectMeta fields a client may set).
_OBJECT_META = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
}


class CrdsMissing(Exception):
    """The KubeRay CRD files are not on this machine; str() says how to get them."""


# ---------------------------------------------------------------- where the CRDs are


def kuberay_version() -> str:
    from .. import pins

    return pins.get_str("kuberay")


def crd_dir() -> Path | None:
    """The folder holding the CRD files, or None when this machine has none."""
    env = os.environ.get("RLAUNCH_KUBERAY_CRDS", "")
    candidates = [Path(env)] if env else [ROOT.parent / "shared" / f"kuberay-crds-v{kuberay_version()}"]
    for folder in candidates:
        if all((folder / name).is_file() for name in CRD_FILES.values()):
            return folder
    return None


def how_to_get_crds() -> str:
    version = kuberay_version()
    return (f"KubeRay v{version} CRDs not found (looked in $RLAUNCH_KUBERAY_CRDS, else "
            f"../shared/kuberay-crds-v{version}/ beside the repository); get them from the KubeRay "
            f"v{version} release: `helm pull kuberay/kuberay-operator --version {version} --untar` "
            f"and point RLAUNCH_KUBERAY_CRDS at kuberay-operator/crds/ ({', '.join(CRD_FILES.values())})")


# ---------------------------------------------------------------- CRD -> JSON Schema


def openapi_to_jsonschema(node: dict) -> dict:
    """One CRD openAPIV3Schema node as JSON Schema, closed wherever the API server would prune."""
    out: dict = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out[key] = {name: openapi_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [openapi_to_jsonschema(sub) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        # The CRD spells it as anyOf integer/string plus the flag; one type list says the same.
        out.pop("anyOf", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        kinds = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*kinds, "null"]
    kinds = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if "object" in kinds and not node.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in out:
        out["additionalProperties"] = False  # strict field validation: unknown fields are errors
    return out


def crd_to_schema(crd: dict, version: str = "v1") -> dict:
    """The JSON Schema of one served version of a CRD, with apiVersion/kind/metadata pinned down."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    if version not in served:
        raise CheckError("kuberay-crd", f"{kind} CRD does not serve {version} (serves {', '.join(served)})")
    schema = openapi_to_jsonschema(served[version]["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = _OBJECT_META
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return schema


@lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict:
    """The converted schema of RayCluster or RayJob; raises CrdsMissing without the files."""
    import yaml

    folder = crd_dir()
    if folder is None:
        raise CrdsMissing(how_to_get_crds())
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads 2 MB in <1 s
    crd = yaml.load((folder / CRD_FILES[kind]).read_text(encoding="utf-8"), Loader=loader)  # noqa: S506
    return crd_to_schema(crd)


def _where(path) -> str:
    parts = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


def _schema_problem(schema: dict, doc: dict) -> str | None:
    """The most relevant violation as 'path: message', or None."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:
        return None
    return f"{_where(error.absolute_path)}: {error.message}"


def check_crd(doc: dict, where: str) -> str:
    """Validate a RayJob/RayCluster against its CRD (strict); CheckError names the field."""
    kind = doc.get("kind", "")
    problem = _schema_problem(crd_schema(kind), doc)
    if problem:
        raise CheckError("kuberay-crd", f"{where}: {problem} (KubeRay v{kuberay_version()} CRD)")
    return f"{where}: valid against the KubeRay v{kuberay_version()} {kind} CRD (strict)"


# ---------------------------------------------------------------- the operator's rules


def operator_problems(doc: dict) -> list[str]:
    """What the KubeRay operator would reject (or silently ignore) that the CRD lets through."""
    kind = doc.get("kind", "")
    name = str((doc.get("metadata") or {}).get("name", ""))
    problems = []
    if len(name) > MAX_NAME[kind]:
        problems.append(f"metadata.name: '{name}' has {len(name)} characters; a {kind} name may have "
                        f"at most {MAX_NAME[kind]}")
    if not DNS1035.match(name):
        problems.append(f"metadata.name: '{name}' is not a DNS-1035 label (lower-case letters, digits "
                        "and '-', starting with a letter and ending with a letter or digit)")
    spec = doc.get("spec") or {}
    if kind == "RayJob":
        problems += _rayjob_problems(spec)
        if spec.get("rayClusterSpec"):
            problems += _cluster_problems(spec["rayClusterSpec"], "spec.rayClusterSpec")
    else:
        problems += _cluster_problems(spec, "spec")
    return problems


def _rayjob_problems(spec: dict) -> list[str]:
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


def _group_problems(group: dict, where: str, label: str) -> list[str]:
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


def _cluster_problems(cluster: dict, where: str) -> list[str]:
    out = _group_problems(cluster.get("headGroupSpec") or {}, f"{where}.headGroupSpec", "head")
    autoscaling = bool(cluster.get("enableInTreeAutoscaling", False))
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        at = f"{where}.workerGroupSpecs[{i}]"
        out += _group_problems(group, at, f"worker group '{group.get('groupName', i)}'")
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if not autoscaling and (low is None or high is None):
            out.append(f"{at}: minReplicas and maxReplicas are both required without autoscaling")
        for key, value in (("minReplicas", low), ("maxReplicas", high)):
            if isinstance(value, int) and value < 0:
                out.append(f"{at}.{key}: {value} must be >= 0")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            out.append(f"{at}: minReplicas {low} is greater than maxReplicas {high}")
    return out


def check_operator_rules(doc: dict, where: str) -> str:
    problems = operator_problems(doc)
    if problems:
        raise CheckError("kuberay-operator", f"{where}: " + "; ".join(problems))
    return f"{where}: passes the KubeRay operator's rules (name, replicas, TTL, backoffLimit, mode)"


# ---------------------------------------------------------------- core kinds and PodMonitor

_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_LABEL_NAME = {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}
# Prometheus durations, as the PodMonitor CRD spells them.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_RELABEL = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "action": {"enum": ["replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
                            "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
                            "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal",
                            "KeepEqual", "dropequal", "DropEqual"]},
        "sourceLabels": {"type": "array", "items": _LABEL_NAME},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
    },
}
_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "matchLabels": _LABELS,
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["key", "operator"],
            "properties": {"key": {"type": "string"}, "operator": {"type": "string"},
                           "values": {"type": "array", "items": {"type": "string"}}}}},
    },
}
# The fields of monitoring.coreos.com/v1 PodMonitor that a Ray scrape config uses, closed like the
# CRD: an unknown or misspelled field fails here instead of being pruned by the API server.
PODMONITOR_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": _OBJECT_META,
        "spec": {
            "type": "object", "additionalProperties": False, "required": ["selector"],
            "properties": {
                "jobLabel": {"type": "string"},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "namespaceSelector": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"any": {"type": "boolean"},
                                   "matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "selector": _SELECTOR,
                "sampleLimit": {"type": "integer", "minimum": 0},
                "podMetricsEndpoints": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                        "interval": {"type": "string", "pattern": _DURATION},
                        "scrapeTimeout": {"type": "string", "pattern": _DURATION},
                        "honorLabels": {"type": "boolean"},
                        "relabelings": {"type": "array", "items": _RELABEL},
                        "metricRelabelings": {"type": "array", "items": _RELABEL},
                    },
                }},
            },
        },
    },
}


def check_podmonitor(doc: dict, where: str) -> str:
    problem = _schema_problem(PODMONITOR_SCHEMA, doc)
    if problem:
        raise CheckError("podmonitor-schema", f"{where}: {problem} (monitoring.coreos.com/v1 PodMonitor)")
    return f"{where}: valid PodMonitor (monitoring.coreos.com/v1, strict)"


def check_core(doc: dict, where: str, k8s_version: str) -> str:
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


def check_documents(docs: list[tuple[str, dict]], k8s_version: str) -> list[str]:
    """Validate (where, manifest) pairs; CheckError on the first problem, lines of what passed.

    Without the CRDs, the CRD layer is reported as skipped (with how to get them); the operator's
    rules and the core schemas still run."""
    lines, skipped = [], ""
    for where, doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise CheckError("kubernetes-schema", f"{where}: not a Kubernetes object (no kind/apiVersion)")
        label = f"{where} {doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
        if doc["apiVersion"].startswith("ray.io/"):
            if doc["kind"] not in CRD_FILES or doc["apiVersion"] != RAY_API:
                raise CheckError("kuberay-crd", f"{label}: rlaunch renders {RAY_API} "
                                 f"{' or '.join(CRD_FILES)}, not {doc['apiVersion']} {doc['kind']}")
            try:
                lines.append(check_crd(doc, label))
            except CrdsMissing as err:
                skipped = str(err)
            lines.append(check_operator_rules(doc, label))
        elif doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PodMonitor":
            lines.append(check_podmonitor(doc, label))
        else:
            lines.append(check_core(doc, label, k8s_version))
    if skipped:
        lines.append(f"CRD schema check skipped: {skipped}")
    return lines

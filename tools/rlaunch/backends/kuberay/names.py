"""The names and labels of a run's Kubernetes objects, derived from the run id (and storage.pvc) alone,
so down/status/logs find them from the run id and the namespace without the rendered files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.registry import backends

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

MANAGED_BY = "rlaunch"
RUN_LABEL = "rlaunch.io/run"


def job_name(spec: Spec) -> str:
    """The RayJob's name: the run id, made a DNS-1035 label (the registry's rule: kuberay's INFRAS)."""
    return backends.infra("kuberay").cluster_name(spec.run.id)


def configmap_name(spec: Spec) -> str:
    return f"{job_name(spec)}-artifacts"


def code_configmap_name(spec: Spec) -> str:
    return f"{job_name(spec)}-code"


def secret_name(spec: Spec) -> str:
    return f"{job_name(spec)}-secrets"


def pvc_name(spec: Spec) -> str:
    return spec.storage.pvc or f"{job_name(spec)}-data"


def inputs_job_name(spec: Spec) -> str:
    return f"{job_name(spec)}-inputs"


def head_service(job: str) -> str:
    """The operator's name for RayJob `job`'s head Service."""
    return f"{job}-head-svc"


def labels(spec: Spec) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": MANAGED_BY, RUN_LABEL: spec.run.id}

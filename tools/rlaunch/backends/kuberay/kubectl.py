"""The kubectl client of INFRA=kuberay: kubectl run with argv lists ($RLAUNCH_KUBECTL, default kubectl),
its failures turned into the prerequisite that is missing, readers of the JSON it returns, and a wait
for a Job with a deadline. Only the API server's "NotFound" means "not there"; any other failure is a
MissingPrerequisite (exit 3). A value that must stay secret only ever travels on kubectl's stdin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from rlaunch import progress
from rlaunch.errors import MissingPrerequisite

# A container waiting for one of these cannot pull its image (the kubelet's reasons).
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def binary() -> str:
    return os.environ.get("RLAUNCH_KUBECTL", "kubectl")


def run(args: list[str], stdin: str | None = None, capture: bool = True,
        timeout: float | None = 120) -> subprocess.CompletedProcess[str]:
    """Run kubectl with an argv list; a value that must stay secret only ever travels on stdin."""
    return subprocess.run([require(), *args], input=stdin, text=True, check=False, timeout=timeout,
                          capture_output=capture)


def require() -> str:
    exe = shutil.which(binary())
    if not exe:
        raise MissingPrerequisite("kubectl", "install kubectl (https://kubernetes.io/docs/tasks/tools/) and "
                                  "fetch credentials: GKE `gcloud container clusters get-credentials CLUSTER "
                                  "--location REGION`; VKE: the cluster's kubeconfig from the console")
    return exe


def context_reachable() -> tuple[bool, str]:
    """(reachable, why not): a current context whose API server answers /readyz."""
    if not shutil.which(binary()):
        return False, "kubectl is not installed"
    ctx = run(["config", "current-context"], timeout=30)
    if ctx.returncode != 0:
        return False, "kubectl has no current context"
    ready = run(["get", "--raw", "/readyz", "--request-timeout=10s"], timeout=30)
    if ready.returncode != 0:
        return False, f"context {ctx.stdout.strip()} does not answer ({first_line(ready.stderr)})"
    return True, ctx.stdout.strip()


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "no output"


def not_found(result: subprocess.CompletedProcess[str]) -> bool:
    """The API server itself said the object is not there."""
    return "(NotFound)" in (result.stderr or "")


def unreachable(result: subprocess.CompletedProcess[str], doing: str) -> MissingPrerequisite:
    """Why kubectl could not answer, as the prerequisite that is missing."""
    err = result.stderr or result.stdout or ""
    if "current-context is not set" in err or "no configuration has been provided" in err or \
            "localhost:8080 was refused" in err:
        return MissingPrerequisite("a kubectl context", "GKE: `gcloud container clusters get-credentials CLUSTER "
                                   "--location REGION`; VKE/other: set KUBECONFIG to the cluster's kubeconfig")
    if "(Forbidden)" in err or "(Unauthorized)" in err or "must be logged in" in err:
        return MissingPrerequisite(f"permission to {doing}", f"{first_line(err)}; ask for RBAC on it, or use "
                                   "a context that has it")
    return MissingPrerequisite("a reachable Kubernetes cluster", f"kubectl {doing}: {first_line(err)}; "
                               "check `kubectl cluster-info`")


def ask(args: list[str], doing: str) -> subprocess.CompletedProcess[str]:
    """kubectl ARGS that must be answered: MissingPrerequisite when the cluster cannot answer."""
    result = run(args)
    if result.returncode != 0:
        raise unreachable(result, doing)
    return result


def current_context() -> str:
    return ask(["config", "current-context"], "read the current context").stdout.strip()


def api_resources() -> set[str]:
    """The kinds this API server serves (`kubectl api-resources -o name`)."""
    result = run(["api-resources", "-o", "name"])
    # An aggregated API that is down makes kubectl exit 1 after listing all the others.
    if result.returncode != 0 and not ("unable to retrieve the complete list" in result.stderr and result.stdout):
        raise unreachable(result, "list the API server's resource kinds")
    return set(result.stdout.split())


def apply_stdin(namespace: str, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    args = ["apply", "--server-side", "--field-manager=rlaunch", "--force-conflicts", "-n", namespace, "-f", "-"]
    return run(args, stdin=json.dumps(manifest))


# ---------------------------------------------------------------- what the API server returns


def job_state(status: dict[str, Any]) -> tuple[str, str]:
    """(Complete | Failed | "", message) from a batch Job's status conditions."""
    for cond in status.get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond["type"], cond.get("message") or cond.get("reason") or ""
    return "", ""


def pod_row(pod: dict[str, Any]) -> str:
    """NAME READY STATUS NODE, as `kubectl get pods -o wide` shows them (STATUS: a waiting reason first)."""
    meta, spec, st = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = st.get("containerStatuses") or []
    waiting = next((c["state"]["waiting"].get("reason", "") for c in (st.get("initContainerStatuses") or []) + containers
                    if (c.get("state") or {}).get("waiting")), "")
    ready = f"{sum(1 for c in containers if c.get('ready'))}/{len(containers) or len(spec.get('containers') or [])}"
    return f"{meta.get('name', '?')} {ready} {waiting or st.get('phase', '?')} {spec.get('nodeName') or '<none>'}"


def pull_errors(pods: list[dict[str, Any]]) -> list[str]:
    """'pod P: image I: ImagePullBackOff: <kubelet's message>' for each container that cannot pull."""
    out = []
    for pod in pods:
        st = pod.get("status") or {}
        for c in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            waiting = (c.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in PULL_REASONS:
                out.append(f"pod {(pod.get('metadata') or {}).get('name', '?')}: image {c.get('image', '?')}: "
                           f"{waiting['reason']}: {waiting.get('message', '').strip() or 'no message'}")
    return out


# ---------------------------------------------------------------- waits


def wait_job(namespace: str, name: str, what: str, deadline_s: float, status: str,
             poll_s: float) -> tuple[str, str]:
    """Poll batch Job NAME until it is Complete or Failed, at most deadline_s, drawing
    `kuberay: WHAT: status` on stderr: (Complete | Failed | "" at the deadline, the condition's message)."""
    end = time.monotonic() + deadline_s
    with progress.Wait(f"kuberay: {what}", deadline_s, status, out=progress.console(sys.stderr)) as wait:
        while True:
            found = ask(["get", "job", name, "-n", namespace, "-o", "json"], f"get the {what}")
            state, message = job_state(json.loads(found.stdout or "{}").get("status") or {})
            if state or time.monotonic() >= end:
                wait.update(state or "deadline")
                return state, message
            time.sleep(min(poll_s, max(0.0, end - time.monotonic())))
            wait.update()

"""A KubeRay stand-in for tests: runs a rendered RayJob as the KubeRay operator (v1.7.0) and the
kubelet would, in network-namespace "pods" on this host. No API server, no kubectl, no image.

Two halves:

1. The operator's rules (pure functions, testable without root). From the RayJob as rendered they
   build what the operator would create, following KubeRay v1.7.0 (ray-project/kuberay, tag
   v1.7.0), read in these places and re-written here, not copied:
   - ray-operator/controllers/ray/common/pod.go: DefaultHeadPodTemplate and
     DefaultWorkerPodTemplate (group `resources`/`labels` -> rayStartParams, the worker's
     wait-gcs-ready init container), setMissingRayStartParams (address, dashboard-host,
     metrics-export-port, block, dashboard-agent-listen-port), generateRayStartCommand and
     addWellKnownAcceleratorResources (--num-cpus / --memory / --num-gpus from the container's
     limits, then requests for the CPU), convertParamMap (sorted flags, boolean switches), BuildPod
     (`ulimit -n ...; ray start ... --block` as `/bin/bash -c --` args, after the user's own
     command with `&&`; the /dev/shm emptyDir), setInitContainerEnvVars and setContainerEnvVars
     (FQ_RAY_IP, RAY_IP, RAY_CLUSTER_NAME, RAY_CLUSTER_NAMESPACE, RAY_CLOUD_INSTANCE_ID,
     RAY_NODE_TYPE_NAME, KUBERAY_GEN_RAY_START_CMD, RAY_PORT, RAY_ADDRESS, ...), labelPod, and
     initLivenessAndReadinessProbe (Ray >= 2.53: HTTP GET /api/healthz on the agent port).
   - ray-operator/controllers/ray/common/job.go: BuildJobSubmitCommand (K8sJobMode: wait for the
     dashboard's GCS health, `ray job status` || `ray job submit --no-wait ...`, then `ray job logs
     --follow`) and GetSubmitterTemplate; rayjob_controller.go: configureSubmitterContainer
     (`/bin/bash -ce --`, PYTHONUNBUFFERED, RAY_DASHBOARD_ADDRESS, RAY_JOB_SUBMISSION_ID),
     createNewK8sJob (the submitter Job's backoffLimit, default 2), constructRayClusterForRayJob.
   - ray-operator/controllers/ray/utils: GenerateFQDNServiceName / GenerateHeadServiceName (the
     RayCluster, named <rayjob>-<5 random chars>, has the Service <cluster>-head-svc; workers join
     <cluster>-head-svc.<ns>.svc.cluster.local:<port>), FetchHeadServiceURL (the dashboard URL),
     PodName; common/service.go: getServicePorts (the head Service's ports are the head
     container's named ports, plus metrics).
   What the harness does not emulate (autoscaler, GCS fault tolerance, auth, TLS, clusterSelector,
   submission modes other than K8sJobMode, DRA claims, CSI or hostPath volumes without a stand-in)
   raises NotEmulated naming the field: it never runs something else in its place.

2. A kubelet, a kube-proxy and a cluster DNS for those pods, on this host (root only):
   - each pod is a network namespace on a private bridge with its own IP, `lo` up and a default
     route (so Ray finds its pod IP the way it does in a pod, no --node-ip-address);
   - each container runs under `ip netns exec POD unshare --mount --uts`, in a root of its own
     (chroot) assembled from bind mounts of this host's top-level directories, read-only
     (/dev, /proc and /sys read-write), with per-container /tmp and image WORKDIR, then each
     volumeMount at its mountPath. The pod's commands, paths and env are unchanged: nothing is
     rewritten, so a wrong mount path fails here as it would in the cluster. Writes outside the
     volumes, /tmp and the workdir land in the container's own tmpfs root (its "writable layer");
     writes into a host directory fail read-only, where an image would have taken them;
   - volumes: emptyDir (a per-pod directory; medium Memory a tmpfs of sizeLimit, one per
     container), configMap and secret (the kubelet's atomic-writer layout: `..<timestamp>/`,
     `..data`, one symlink per item; read-only), persistentVolumeClaim (a directory per claim,
     shared by every pod: the PVC stand-in; `claims=` maps a claim to a directory of the test's);
     /dev/shm is a 64 MiB tmpfs per container unless a volume is mounted there (containerd's
     default);
   - env: the image's ENV, then the container's `env` in order, `$(VAR)` expanded as Kubernetes
     does, valueFrom secretKeyRef / configMapKeyRef from the Secret and ConfigMap objects given
     (the stand-ins of what `make launch` applies), fieldRef (metadata.name, .namespace, .uid,
     .labels['k'], .annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP,
     status.hostIP), resourceFieldRef; envFrom; HOSTNAME. A missing Secret, ConfigMap or key is
     the pod's CreateContainerConfigError, raised as PodConfigError. The env reaches the container
     through its environment only (a pipe to the pod-init step), never a process argument;
   - /etc/hosts is the kubelet's (localhost, the pod IP under its hostname, the pod name) plus one
     line per Service: cluster DNS stand-in, `<svc>.<ns>.svc.cluster.local` and its shorter forms
     -> the Service's ClusterIP; /etc/resolv.conf has the cluster's search path and a nameserver
     that answers nothing (unknown names fail at once);
   - Services: each ClusterIP (an unassigned address of the pod subnet) is DNAT-ed, per port the
     Service declares, to the head pod's IP in every pod's netns (iptables nat OUTPUT, as
     kube-proxy's iptables mode does); any other port of a ClusterIP is refused. A port missing
     from the head container's `ports` is therefore missing here too;
   - probes: the readiness probe (httpGet, tcpSocket) is polled every second from an "operator"
     namespace on the same bridge (Kubernetes: after initialDelaySeconds, every periodSeconds);
     liveness probes are not run. restartPolicy is not emulated: a Ray container that exits is
     reported at once (PodFailed, with its log's tail), not restarted. The submitter Job retries a
     failed pod up to its backoffLimit, with the Job controller's 10 s, 20 s, ... back-off.
   Not emulated: scheduling (nodeSelector, tolerations, affinity, requests: every pod gets its own
   "node"), cgroup limits (CPU and memory reach Ray only through the operator's --num-cpus and
   --memory; Ray sizes its object store from this host's memory, capped by the pod's /dev/shm),
   the pods' service-link env vars (FOO_SERVICE_HOST), the pods running as root (the rlaunch
   image runs as `ray`), ttlSecondsAfterFinished (the cluster goes down when `execute` returns),
   the container runtime's RLIMIT_NOFILE (a pod gets this host's: where its hard limit is below
   65536 and root lacks CAP_SYS_RESOURCE, as here, the operator's `ulimit -n 65536` says
   "cannot modify limit" and `ray start` goes on, as bash's `;` lets it).

Images: one place, IMAGES / rlaunch_image(): the rehearsal's image is rayproject/ray plus rlaunch at
/opt/rlaunch (docker/trl/Dockerfile). Its stand-in: /opt/rlaunch is this checkout (read-only);
python3, python and ray on PATH are this checkout's .venv (which imports rlaunch from tools/, as
the image's rlaunch.pth does); WORKDIR and HOME /home/ray; PATH starts with /opt/rlaunch/scripts.

Use (see tests/unit/test_kuberay_run.py):

    objects = kuberay_objects(spec, files, environ)      # what `make launch` would apply
    with RayJobRun(objects, workdir=tmp_path / "k8s") as run:
        result = run.execute(ready_s=300, job_s=900)       # the RayJob, start to finish
        assert result.succeeded, result.describe()

Lower-level, for a backoffLimit retry test (a retry: the operator deletes the RayCluster and
creates a new one, <rayjob>-<new suffix>, from the same RayJob, and submits again):
    run.start_cluster()  ->  the pods (run.pods: name -> Pod, with .ip, .role, .log(container))
    run.wait_ready(s)    ->  every Ray pod Running and ready (PodFailed as soon as one is not)
    run.submit()         ->  the submitter Job's pod;   run.wait_job(s) -> JobResult
    run.kill_pod(name)   ->  delete a pod (SIGTERM, 5 s, SIGKILL; its namespace goes)
    run.start_pod(name)  ->  start that pod again (same spec, same name, fresh volumes but PVCs)
    run.restart_pod(name), run.delete_cluster(), run.execute() again (a new cluster).
Extra objects (an initializer Job's pods, a CPU-only head) go through the same kubelet:
run.run_pod(pod_manifest) runs any Pod (e.g. a Job's template) to completion in the cluster network.

Run as a script it is only the pod-init step (`python -I kuberay_harness.py --pod-init FD`), run
inside each container's namespaces: it uses the standard library only, like the top of this
module; yaml is imported where manifests are read.
"""

from __future__ import annotations

import base64
import copy
import ctypes
import dataclasses
import datetime
import decimal
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
KUBERAY_VERSION = "1.7.0"  # the operator whose rules are written below; the pin must match
CLUSTER_DOMAIN = "cluster.local"
POLL_S = 1.0
GRACE_S = 5.0  # pod deletion: SIGTERM, then SIGKILL (Kubernetes' default grace is 30 s)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# ---------------------------------------------------------------- KubeRay v1.7.0's constants
DEFAULT_GCS_PORT = "6379"
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_METRICS_PORT = 8080
DEFAULT_CLIENT_PORT = 10001
DEFAULT_SERVING_PORT = 8000
DEFAULT_AGENT_PORT = 52365  # dashboard-agent-listen-port: the readiness probe's port
LOCAL_HOST = "127.0.0.1"
HEAD_GROUP = "headgroup"
BOOLEAN_WITH_VALUE = ("log-color", "include-dashboard", "include-log-monitor")
CUSTOM_ACCELERATORS = {"aws.amazon.com/neuroncore": "neuron_cores", "google.com/tpu": "TPU"}
RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery util/rand, as generateName uses
OVERWRITE_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"
SUBMITTER_BACKOFF_LIMIT = 2
JOB_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class HarnessError(RuntimeError):
    """The run cannot go on; the message says which object, which field and why."""


class NotEmulated(HarnessError):
    """The manifest uses something this stand-in does not reproduce (it never substitutes)."""


class PodConfigError(HarnessError):
    """What Kubernetes reports as CreateContainerConfigError, or a Pending pod (missing PVC)."""


class PodFailed(HarnessError):
    """A container exited where Kubernetes would have reported the pod failed or crash-looping."""


# ---------------------------------------------------------------- images: the one mapping


@dataclasses.dataclass(frozen=True)
class Image:
    """What a container image contributes: files at its paths (here: host directories bound
    read-only there), its ENV and its WORKDIR. The command always comes from the pod."""

    binds: dict[str, str]
    env: dict[str, str]
    workdir: str


def rlaunch_image(root: Path = ROOT, venv: Path = VENV) -> Image:
    """rayproject/ray + rlaunch (docker/<framework>/Dockerfile) -> this checkout and its .venv."""
    return Image(binds={"/opt/rlaunch": str(root)},
                 env={"PATH": f"/opt/rlaunch/scripts:{venv}/bin:{SYSTEM_PATH}", "HOME": "/home/ray",
                      "LANG": "C.UTF-8"},
                 workdir="/home/ray")


def default_images(spec: dict) -> dict[str, Image]:
    """The images a rendered launch names -> their stand-ins (IMAGES for one spec)."""
    return {spec.pins.image: rlaunch_image()}


# ---------------------------------------------------------------- Kubernetes quantities

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?)$")
_SUFFIX = {None: 1, "m": decimal.Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
           "Ei": 2**60}


def quantity(value) -> decimal.Decimal:
    """A resource quantity ("2", "500m", "6Gi", "1e3", 4) as an exact number."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise HarnessError(f"quantity {value!r}: not a Kubernetes quantity")
    number, exponent, suffix = match.groups()
    scale = decimal.Decimal(10) ** int(exponent[1:]) if exponent else decimal.Decimal(_SUFFIX[suffix])
    return decimal.Decimal(number) * scale


def quantity_value(value) -> int:
    """resource.Quantity.Value(): rounded up to an integer, away from zero."""
    q = quantity(value)
    return int(q.to_integral_value(rounding=decimal.ROUND_UP))


# ---------------------------------------------------------------- Go-compatible strings


def go_quote(text: str) -> str:
    """Go's strconv.Quote (BuildJobSubmitCommand quotes the runtime-env JSON with it)."""
    out = ['"']
    short = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in short:
            out.append(short[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out) + '"'


def go_json(value) -> str:
    """encoding/json.Marshal of a decoded YAML tree: sorted keys, compact, HTML-escaped, 1 not 1.0."""
    def norm(v):
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    text = json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                     ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text


def k8s_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (env values, command, args): $$ is a literal $, an unknown or
    unterminated reference stays as written."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def random_suffix(rng: random.Random | None = None, n: int = 5) -> str:
    rng = rng or random
    return "".join(rng.choice(RAND_ALPHABET) for _ in range(n))


# ---------------------------------------------------------------- the operator's rules (pure)


def _env_exists(name: str, env: list[dict]) -> bool:
    return any(e.get("name") == name for e in env)


def _field_env(name: str, path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def group_ray_start_params(group: dict) -> dict[str, str]:
    """A group's rayStartParams after its top-level `resources` and `labels` (pod.go:
    updateRayStartParamsResources, updateRayStartParamsLabels)."""
    params = {str(k): str(v) for k, v in (group.get("rayStartParams") or {}).items()}
    custom: dict[str, float] = {}
    for name, value in (group.get("resources") or {}).items():
        key = name.lower()
        if key == "cpu":
            params["num-cpus"] = str(quantity_value(value))
        elif key == "memory":
            params["memory"] = str(quantity_value(value))
        elif _is_gpu_key(key):
            params["num-gpus"] = str(quantity_value(value))
        else:
            custom[name] = float(quantity(value))
    if custom:
        params["resources"] = f"'{go_json(custom)}'"
    if group.get("labels"):
        params["labels"] = ",".join(f"{k}={v}" for k, v in sorted(group["labels"].items()))
    return params


def _is_gpu_key(key: str) -> bool:
    """utils.IsGPUResourceKey: ends with "gpu", or an NVIDIA MIG slice."""
    return key.endswith("gpu") or re.search(r"nvidia\.com/mig-\d+g\.\d+gb$", key) is not None


def complete_ray_start_params(params: dict[str, str], node_type: str, head_port: str,
                              fqdn: str) -> dict[str, str]:
    """setMissingRayStartParams."""
    params = dict(params)
    if node_type == "worker":
        params.setdefault("address", f"{fqdn}:{head_port}")
    else:
        params.setdefault("dashboard-host", "0.0.0.0")
    params.setdefault("metrics-export-port", str(DEFAULT_METRICS_PORT))
    params["block"] = "true"
    params.setdefault("dashboard-agent-listen-port", str(DEFAULT_AGENT_PORT))
    return params


def _nonzero(value) -> bool:
    return value is not None and quantity(value) != 0


def ray_start_command(node_type: str, params: dict[str, str], resources: dict) -> tuple[str, dict]:
    """generateRayStartCommand (+ addWellKnownAcceleratorResources, convertParamMap): the flags
    from the container's resources where rayStartParams leave them out. Returns (command, params)."""
    params = dict(params)
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    if "num-cpus" not in params:
        if _nonzero(limits.get("cpu")):
            params["num-cpus"] = str(quantity_value(limits["cpu"]))
        elif _nonzero(requests.get("cpu")):
            params["num-cpus"] = str(quantity_value(requests["cpu"]))
    if "memory" not in params and _nonzero(limits.get("memory")):
        params["memory"] = str(quantity_value(limits["memory"]))
    if limits:
        existing = json.loads(params["resources"].strip("'\"` ")) if "resources" in params else {}
        custom_done = any(name in existing for name in CUSTOM_ACCELERATORS.values())
        for key in sorted(limits):
            value = limits[key]
            if "num-gpus" not in params and _is_gpu_key(key) and _nonzero(value):
                params["num-gpus"] = str(quantity_value(value))
            if not custom_done and key in CUSTOM_ACCELERATORS and _nonzero(value):
                if CUSTOM_ACCELERATORS[key] not in existing:
                    existing[CUSTOM_ACCELERATORS[key]] = float(quantity(value))
                    params["resources"] = f"'{go_json(existing)}'"
                custom_done = True
    flags = []
    for option in sorted(params):
        argument = params[option]
        if argument.lower() in ("true", "false") and option not in BOOLEAN_WITH_VALUE:
            if argument.lower() == "true":
                flags.append(f" --{option} ")
        else:
            flags.append(f" --{option}={argument} ")
    head = "--head " if node_type == "head" else ""
    return f"ray start {head}{''.join(flags)}", params


def _cmd_string(argv: list[str]) -> str:
    """convertCmdToString: every element padded with one space on each side."""
    return "".join(f" {v} " for v in argv)


def _bash(options: str = "c") -> list[str]:
    """utils.GetContainerCommand (ENABLE_LOGIN_SHELL unset on the operator)."""
    return ["/bin/bash", f"-{options}", "--"]


def _labels(pod_labels: dict, node_type: str, cluster: str, group: str) -> dict[str, str]:
    """labelPod: KubeRay's labels; ray.io/node-type, group and cluster cannot be overridden."""
    out = {"ray.io/is-ray-node": "yes", "ray.io/cluster": cluster, "ray.io/node-type": node_type,
           "ray.io/group": group, "ray.io/identifier": f"{cluster}-{node_type}"[-63:],
           "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    for key, value in (pod_labels or {}).items():
        if key not in ("ray.io/node-type", "ray.io/group", "ray.io/cluster"):
            out[key] = value
    return out


def _memory_of(container: dict):
    res = container.get("resources") or {}
    return (res.get("limits") or {}).get("memory") or (res.get("requests") or {}).get("memory")


def _check_emulated(rayjob: dict) -> None:
    spec = rayjob.get("spec") or {}
    mode = spec.get("submissionMode", "K8sJobMode")
    if mode != "K8sJobMode":
        raise NotEmulated(f"RayJob spec.submissionMode={mode}: only K8sJobMode is emulated")
    if spec.get("clusterSelector"):
        raise NotEmulated("RayJob spec.clusterSelector: only an embedded rayClusterSpec is emulated")
    cluster = spec.get("rayClusterSpec")
    if not cluster:
        raise HarnessError("RayJob spec.rayClusterSpec: missing")
    for key in ("gcsFaultToleranceOptions", "authOptions", "tlsOptions", "historyServerOptions"):
        if cluster.get(key):
            raise NotEmulated(f"RayJob spec.rayClusterSpec.{key}")
    if cluster.get("enableInTreeAutoscaling"):
        raise NotEmulated("RayJob spec.rayClusterSpec.enableInTreeAutoscaling=true (the autoscaler sidecar)")
    if (cluster["headGroupSpec"].get("headService") or {}).get("metadata", {}).get("name"):
        raise NotEmulated("headGroupSpec.headService.metadata.name (a renamed head Service)")
    if not _ray_at_least(cluster.get("rayVersion", ""), (2, 53)):
        raise NotEmulated(f"rayVersion {cluster.get('rayVersion')!r}: probes before Ray 2.53 are exec "
                          "commands (wget), which are not run")


def _ray_at_least(version: str, minimum: tuple[int, int]) -> bool:
    parts = re.findall(r"\d+", version)
    return len(parts) >= 2 and (int(parts[0]), int(parts[1])) >= minimum


def head_port(rayjob: dict) -> str:
    """GetHeadPort."""
    params = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"].get("rayStartParams") or {}
    return str(params.get("port", DEFAULT_GCS_PORT))


def service_fqdn(service: str, namespace: str) -> str:
    return f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}"


def head_service_ports(rayjob: dict) -> dict[str, int]:
    """service.go getServicePorts: the head container's ports by name (unnamed: "<port>-port"),
    the defaults when it has none, and metrics always."""
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    ports = {(p.get("name") or f"{p['containerPort']}-port"): int(p["containerPort"])
             for p in head.get("ports") or []}
    if not ports:
        ports = {"client": DEFAULT_CLIENT_PORT, "gcs-server": int(DEFAULT_GCS_PORT),
                 "dashboard": DEFAULT_DASHBOARD_PORT, "metrics": DEFAULT_METRICS_PORT,
                 "serve": DEFAULT_SERVING_PORT}
    ports.setdefault("metrics", DEFAULT_METRICS_PORT)
    return ports


def dashboard_url(rayjob: dict, cluster: str) -> str:
    """FetchHeadServiceURL(cluster, "dashboard"): what RAY_DASHBOARD_ADDRESS and --address carry."""
    ports = head_service_ports(rayjob)
    if "dashboard" not in ports:
        raise HarnessError(f"RayCluster {cluster}: dashboard port is not found in the head Service (the "
                           "head container declares no port named `dashboard`): the RayJob never "
                           "leaves Initializing")
    return f"{service_fqdn(f'{cluster}-head-svc', rayjob['metadata'].get('namespace', 'default'))}:{ports['dashboard']}"


def ray_pods(rayjob: dict, cluster: str, rng: random.Random | None = None) -> list[dict]:
    """The Pods the RayCluster controller creates for `cluster` (head first), as manifests."""
    _check_emulated(rayjob)
    spec = copy.deepcopy(rayjob["spec"]["rayClusterSpec"])
    namespace = rayjob["metadata"].get("namespace", "default")
    fqdn = service_fqdn(f"{cluster}-head-svc", namespace)
    port = head_port(rayjob)
    annotations = dict(rayjob["metadata"].get("annotations") or {})  # RayCluster's = RayJob's
    # utils.PodName: the prefix cut to 50 characters, then -head- / -worker- and generateName's 5.
    pods = [_ray_pod(spec["headGroupSpec"], "head", HEAD_GROUP, f"{cluster[:50]}-head-", cluster, namespace,
                     fqdn, port, annotations, rng)]
    for group in spec.get("workerGroupSpecs") or []:
        replicas = _desired_replicas(group) * int(group.get("numOfHosts") or 1)
        for _ in range(replicas):
            pods.append(_ray_pod(group, "worker", group["groupName"],
                                 f"{cluster}-{group['groupName']}"[:50] + "-worker-", cluster, namespace,
                                 fqdn, port, annotations, rng))
    return pods


def _desired_replicas(group: dict) -> int:
    """GetWorkerGroupDesiredReplicas: replicas clamped to [minReplicas, maxReplicas]; suspend 0."""
    if group.get("suspend"):
        return 0
    low, high = int(group.get("minReplicas") or 0), int(group.get("maxReplicas") or 2**31 - 1)
    replicas = group.get("replicas")
    replicas = low if replicas is None or int(replicas) < low else int(replicas)
    return min(replicas, high)


def _ray_pod(group: dict, node_type: str, group_name: str, generate_name: str, cluster: str,
             namespace: str, fqdn: str, port: str, annotations: dict, rng) -> dict:
    template = copy.deepcopy(group["template"])
    meta, pspec = template.setdefault("metadata", {}), template["spec"]
    name = f"{generate_name}{random_suffix(rng)}"
    meta.update(name=name, namespace=namespace)
    meta["labels"] = _labels({**(meta.get("labels") or {}), **(group.get("labels") or {})}, node_type,
                             cluster, group_name)
    meta["annotations"] = dict(meta.get("annotations") or {})
    if str(annotations.get(OVERWRITE_CMD_ANNOTATION, "")).lower() == "true":
        meta["annotations"][OVERWRITE_CMD_ANNOTATION] = "true"  # initTemplateAnnotations
    if pspec.get("resourceClaims"):
        raise NotEmulated(f"{node_type} pod spec.resourceClaims (DRA devices)")
    ray = pspec["containers"][0]
    ray.setdefault("env", [])
    params = complete_ray_start_params(group_ray_start_params(group), node_type, port, fqdn)
    if node_type == "worker":
        # DefaultWorkerPodTemplate: an init container that waits for the GCS behind the head
        # Service, with the Ray container's env and mounts as they are at this point.
        pspec["initContainers"] = list(pspec.get("initContainers") or []) + [{
            "name": "wait-gcs-ready", "image": ray["image"], "command": _bash(),
            "args": [wait_gcs_script(fqdn, port)], "env": copy.deepcopy(ray["env"]),
            "volumeMounts": copy.deepcopy(ray.get("volumeMounts") or [])}]
    if not any(p.get("name") == "metrics" for p in ray.get("ports") or []):
        ray.setdefault("ports", []).append({"name": "metrics", "containerPort": DEFAULT_METRICS_PORT})
    # BuildPod: /dev/shm for the object store unless plasma-directory says otherwise.
    if "plasma-directory" not in params and not any(
            m.get("mountPath") == "/dev/shm" for m in ray.get("volumeMounts") or []):
        if not any(v.get("name") == "shared-mem" for v in pspec.get("volumes") or []):
            empty = {"medium": "Memory"}
            if _memory_of(ray) is not None:
                empty["sizeLimit"] = str(_memory_of(ray))
            pspec.setdefault("volumes", []).append({"name": "shared-mem", "emptyDir": empty})
        ray.setdefault("volumeMounts", []).append({"name": "shared-mem", "mountPath": "/dev/shm"})
    cmd = _cmd_string(ray["command"]) if ray.get("command") else ""
    if ray.get("args"):
        cmd += _cmd_string(ray["args"])
    start, _ = ray_start_command(node_type, params, ray.get("resources") or {})
    overwrite = meta["annotations"].get(OVERWRITE_CMD_ANNOTATION, "").lower() == "true"
    if not overwrite and "ray start" not in cmd:
        generated = f"ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}"
        ray["command"] = _bash()
        ray["args"] = [f"{cmd} && {generated}" if cmd else generated]
    for init in pspec.get("initContainers") or []:  # setInitContainerEnvVars
        init.setdefault("env", []).extend([{"name": "FQ_RAY_IP", "value": fqdn},
                                           {"name": "RAY_IP", "value": fqdn.split(".")[0]}])
    env = ray["env"]  # setContainerEnvVars
    ip = LOCAL_HOST
    if node_type == "worker":
        ip = fqdn
        env += [{"name": "FQ_RAY_IP", "value": fqdn}, {"name": "RAY_IP", "value": fqdn.split(".")[0]}]
    env += [_field_env("RAY_CLUSTER_NAME", "metadata.labels['ray.io/cluster']"),
            _field_env("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
            _field_env("RAY_CLOUD_INSTANCE_ID", "metadata.name"),
            _field_env("RAY_NODE_TYPE_NAME", "metadata.labels['ray.io/group']"),
            {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start}]
    for var, value in (("RAY_PORT", port), ("RAY_ADDRESS", f"{ip}:{port}"), ("RAY_USAGE_STATS_KUBERAY_IN_USE", "1")):
        if not _env_exists(var, env):
            env.append({"name": var, "value": value})
    if node_type == "head":
        env.append({"name": "RAY_USAGE_STATS_EXTRA_TAGS",
                    "value": f"kuberay_version=v{KUBERAY_VERSION};kuberay_crd=RayJob"})
    if not _env_exists("RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", env):
        env.append({"name": "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "value": "1"})
    if "readinessProbe" not in ray:
        agent = int(params.get("dashboard-agent-listen-port", DEFAULT_AGENT_PORT))
        ray["readinessProbe"] = {"httpGet": {"path": "/api/healthz", "port": agent}}
    template["kind"], template["apiVersion"] = "Pod", "v1"
    return template


def wait_gcs_script(fqdn: str, port: str) -> str:
    """The wait-gcs-ready init container's loop (DefaultWorkerPodTemplate): `ray health-check`
    against the head Service every 5 s until it answers; quiet for the first 120 s."""
    return (f"SECONDS=0\nwhile true; do\n"
            f"  if (( SECONDS <= 120 )); then quiet=/dev/null; else quiet=/dev/stderr; fi\n"
            f"  if ray health-check --address {fqdn}:{port} >\"$quiet\" 2>&1; then echo 'GCS is ready.'; break; fi\n"
            f"  echo \"$SECONDS seconds elapsed: Waiting for GCS to be ready.\"\n"
            f"  sleep 5\ndone\n")


def submit_command(rayjob: dict, dashboard: str) -> str:
    """BuildJobSubmitCommand, K8sJobMode, joined with spaces as configureSubmitterContainer does."""
    spec = rayjob["spec"]
    address = dashboard if dashboard.startswith("http://") else f"http://{dashboard}"
    job_id = spec.get("jobId") or ""
    if not job_id:
        raise NotEmulated("RayJob spec.jobId unset (the operator would generate <rayjob>-<5 chars>)")
    health = (f"python -c \"import urllib.request; r=urllib.request.urlopen('{address}/api/gcs_healthz', "
              f"timeout=10); exit(0 if b'success' in r.read() else 1)\"")
    cmd = ["until", health, ">/dev/null", "2>&1", ";", "do", "echo",
           go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."), ";", "sleep", "2",
           ";", "done", ";", "if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null",
           "2>&1", ";", "then", "ray", "job", "submit", "--address", address, "--no-wait"]
    if spec.get("runtimeEnvYAML"):
        import yaml

        cmd += ["--runtime-env-json", go_quote(go_json(yaml.safe_load(spec["runtimeEnvYAML"])))]
    if spec.get("metadata"):
        cmd += ["--metadata-json", go_quote(go_json(spec["metadata"]))]
    cmd += ["--submission-id", job_id]
    if float(spec.get("entrypointNumCpus") or 0) > 0:
        cmd += ["--entrypoint-num-cpus", f"{float(spec['entrypointNumCpus']):f}"]
    if float(spec.get("entrypointNumGpus") or 0) > 0:
        cmd += ["--entrypoint-num-gpus", f"{float(spec['entrypointNumGpus']):f}"]
    if spec.get("entrypointResources"):
        cmd += ["--entrypoint-resources", go_quote(spec["entrypointResources"])]
    cmd += ["--", spec["entrypoint"].strip(), ";", "fi", ";", "ray", "job", "logs", "--address", address,
            "--follow", job_id]
    return " ".join(cmd)


def submitter_pod(rayjob: dict, cluster: str, rng: random.Random | None = None) -> dict:
    """The submitter Job's pod (GetSubmitterTemplate + configureSubmitterContainer + the Job's
    own naming: <rayjob>-<5 chars>)."""
    spec = rayjob["spec"]
    namespace = rayjob["metadata"].get("namespace", "default")
    if spec.get("submitterPodTemplate"):
        template = copy.deepcopy(spec["submitterPodTemplate"])
    else:
        head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        template = {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "ray-job-submitter", "image": head["image"],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}
    dashboard = dashboard_url(rayjob, cluster)
    container = template["spec"]["containers"][0]
    if not container.get("command"):
        container["command"] = _bash("ce")
        container["args"] = [submit_command(rayjob, dashboard)]
    container.setdefault("env", []).extend([
        {"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "RAY_DASHBOARD_ADDRESS", "value": dashboard},
        {"name": "RAY_JOB_SUBMISSION_ID", "value": spec["jobId"]}])
    meta = template.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), "ray.io/originated-from-cr-name": rayjob["metadata"]["name"],
                      "ray.io/originated-from-crd": "RayJob", "app.kubernetes.io/created-by": "kuberay-operator",
                      "job-name": rayjob["metadata"]["name"]}
    meta.update(name=f"{rayjob['metadata']['name']}-{random_suffix(rng)}", namespace=namespace)
    template["kind"], template["apiVersion"] = "Pod", "v1"
    return template


def submitter_backoff_limit(rayjob: dict) -> int:
    limit = (rayjob["spec"].get("submitterConfig") or {}).get("backoffLimit")
    return SUBMITTER_BACKOFF_LIMIT if limit is None else int(limit)


# ---------------------------------------------------------------- the launch's objects


def kuberay_objects(spec: dict, files: dict[str, str], environ: dict[str, str] | None = None) -> list[dict]:
    """What `make launch` applies for a rendered plan: the Secret (from `environ`, stdin-only in the
    product), the artifacts ConfigMap, CODE's ConfigMap, then the rendered manifests in apply order."""
    from rlaunch.backends.kuberay import manifests

    objects = []
    if spec.secrets:
        objects.append(manifests.secret_manifest(spec, dict(environ or {})))
    objects.append(manifests.configmap_manifest(spec, files))
    code_map = manifests.code_configmap_manifest(spec)  # CODE's pack, for the inputs Job (launch applies it)
    if code_map:
        objects.append(code_map)
    objects += [doc for _, doc in manifests.documents(files)]
    return objects


def find(objects: list[dict], kind: str, name: str | None = None) -> dict:
    for obj in objects:
        if obj.get("kind") == kind and (name is None or obj["metadata"]["name"] == name):
            return obj
    raise KeyError(f"no {kind}{' ' + name if name else ''} among the objects")


# ---------------------------------------------------------------- the kubelet's part (pure)


def atomic_writer_layout(target: Path, payload: dict[str, bytes], mode: int = 0o644) -> None:
    """A configMap/secret volume as the kubelet's AtomicWriter writes it: the files under
    `..<timestamp>/`, `..data` -> it, and each top-level entry a symlink through `..data`."""
    stamp = "..{:%Y_%m_%d_%H_%M_%S.%f}000".format(datetime.datetime.now(datetime.timezone.utc))
    data_dir = target / stamp
    data_dir.mkdir(parents=True)
    for rel, content in payload.items():
        path = data_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
    (target / "..data").symlink_to(stamp)
    for top in sorted({rel.split("/", 1)[0] for rel in payload}):
        (target / top).symlink_to(f"..data/{top}")


def _volume_payload(kind: str, source: dict, obj: dict | None, pod: str) -> dict[str, bytes]:
    """configMap/secret volume contents: every key, or the items listed (path per key)."""
    name = source.get("name") or source.get("secretName")
    if obj is None:
        if source.get("optional"):
            return {}
        raise PodConfigError(f"pod {pod}: {kind} {name} not found (the pod stays ContainerCreating)")
    if kind == "secret":
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    items = source.get("items")
    if not items:
        return data
    out = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise PodConfigError(f"pod {pod}: {kind} {name} has no key {item['key']!r} (volume item)")
        out[item["path"]] = data[item["key"]]
    return out


def _field(pod: dict, path: str, pod_ip: str, host_ip: str) -> str:
    meta = pod["metadata"]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return (meta.get(match.group(1)) or {}).get(match.group(2), "")
    simple = {"metadata.name": meta["name"], "metadata.namespace": meta.get("namespace", "default"),
              "metadata.uid": meta.get("uid", ""), "spec.nodeName": "rlaunch-harness-node",
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
              "status.podIP": pod_ip, "status.podIPs": pod_ip, "status.hostIP": host_ip}
    if path not in simple:
        raise NotEmulated(f"pod {meta['name']}: fieldRef {path}")
    return simple[path]


def _resource_field(container: dict, ref: dict) -> str:
    kind, _, res = ref["resource"].partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(res)
    if value is None:
        raise NotEmulated(f"resourceFieldRef {ref['resource']} without that {kind[:-1]} set (node allocatable)")
    divisor = quantity(ref.get("divisor", "1"))
    return str(int((quantity(value) / divisor).to_integral_value(rounding=decimal.ROUND_UP)))


def container_env(pod: dict, container: dict, image: Image, objects: list[dict], pod_ip: str,
                  host_ip: str) -> dict[str, str]:
    """The environment the container starts with: image ENV, HOSTNAME, envFrom, then env in order
    ($(VAR) expanded against what is defined before it; valueFrom resolved)."""
    name = pod["metadata"]["name"]
    where = f"pod {name}: container {container['name']}"
    env = dict(image.env)
    env["HOSTNAME"] = name[:63]
    defined: dict[str, str] = {}

    def lookup(kind: str, obj_name: str):
        try:
            return find(objects, kind, obj_name)
        except KeyError:
            return None

    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source:
                obj = lookup(kind, source[key]["name"])
                if obj is None:
                    if source[key].get("optional"):
                        continue
                    raise PodConfigError(f"{where}: envFrom {kind} {source[key]['name']} not found")
                data = _volume_payload(kind.lower(), {"name": source[key]["name"]}, obj, name)
                defined.update({prefix + k: v.decode() for k, v in data.items()})
    for entry in container.get("env") or []:
        var = entry["name"]
        if "valueFrom" not in entry:
            defined[var] = k8s_expand(str(entry.get("value", "")), defined)
            continue
        ref = entry["valueFrom"]
        if "secretKeyRef" in ref or "configMapKeyRef" in ref:
            kind, r = ("Secret", ref["secretKeyRef"]) if "secretKeyRef" in ref else ("ConfigMap", ref["configMapKeyRef"])
            obj = lookup(kind, r["name"])
            payload = _volume_payload(kind.lower(), {"name": r["name"]}, obj, name) if obj else None
            if payload is None or r["key"] not in payload:
                if r.get("optional"):
                    continue
                what = "not found" if obj is None else f"has no key {r['key']!r}"
                raise PodConfigError(f"{where}: env {var}: {kind} {r['name']} {what} (CreateContainerConfigError)")
            defined[var] = payload[r["key"]].decode()
        elif "fieldRef" in ref:
            defined[var] = _field(pod, ref["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in ref:
            defined[var] = _resource_field(container, ref["resourceFieldRef"])
        else:
            raise NotEmulated(f"{where}: env {var}: valueFrom {sorted(ref)}")
    env.update(defined)
    return env


def hosts_file(pod_ip: str, hostname: str, services: dict[str, str], namespace: str) -> str:
    """The kubelet's /etc/hosts, plus the cluster DNS stand-in: one line per Service."""
    lines = ["# Kubernetes-managed hosts file (rlaunch KubeRay harness: kubelet + cluster DNS stand-in).",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", "fe00::0\tip6-localnet",
             "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters",
             f"{pod_ip}\t{hostname}", "# Services (cluster DNS stand-in)"]
    for svc, ip in services.items():
        names = [service_fqdn(svc, namespace), f"{svc}.{namespace}.svc", f"{svc}.{namespace}", svc]
        lines.append(f"{ip}\t{' '.join(names)}")
    return "\n".join(lines) + "\n"


def resolv_conf(namespace: str) -> str:
    return (f"search {namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n"
            "nameserver 127.0.0.1\noptions ndots:5 timeout:1 attempts:1\n")


# ---------------------------------------------------------------- network: bridge, pods, Services

_COUNTER = itertools.count()


def _run(argv: list[str], stdin: str | None = None) -> None:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise HarnessError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")


def prerequisites() -> list[str]:
    """What this host lacks to run pods (empty when it can)."""
    missing = [] if os.geteuid() == 0 else ["root (network namespaces, mounts)"]
    missing += [tool for tool in ("ip", "unshare", "iptables-restore") if not shutil.which(tool)]
    if not (VENV / "bin" / "ray").exists():
        missing.append(f"{VENV}/bin/ray (make setup)")
    return missing


# What each harness network created, one JSON file per network (its owner process, its namespaces
# and host links), written before each thing is created: a run killed where no cleanup could run
# (SIGKILL, a lost machine) is swept by the next one from this checkout, and only what its own
# record names (all under the harness's prefix), never by a broad name.
STATE_DIR = ROOT / "build" / "kuberay-harness"
TAG_PREFIX = "kr"


def sweep_stale(state_dir: Path = STATE_DIR) -> list[str]:
    """Remove what earlier harness networks of this checkout left (their owner is gone): the
    processes in their namespaces (SIGKILL), the namespaces, the host links; what was removed."""
    import owner  # tests/: imported here, the pod-init step runs this file alone

    removed = []
    for record, state in owner.stale(state_dir, f"{TAG_PREFIX}*.json"):  # its owner no longer runs
        names = [n for n in state["namespaces"] if n.startswith(state["tag"])]
        for ns in names:
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in out.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for ns in names:
            if subprocess.run(["ip", "netns", "del", ns], capture_output=True).returncode == 0:
                removed.append(ns)
        for link in (n for n in state["links"] if n.startswith(state["tag"])):
            if subprocess.run(["ip", "link", "del", link], capture_output=True).returncode == 0:
                removed.append(link)
        record.unlink(missing_ok=True)
    return removed


class Network:
    """A bridge without an address and one namespace per pod on a private /24: pods .1-.199,
    Service ClusterIPs .200-.249, the operator/kubelet's own namespace .250. Its record
    (STATE_DIR/<tag>.json) lists what it created until `down` removed it."""

    def __init__(self):
        self.tag = f"{TAG_PREFIX}{os.getpid() % 100000}{next(_COUNTER) % 100}"
        self.subnet = f"10.{random.randint(20, 219)}.{random.randint(1, 250)}"
        self.bridge = f"{self.tag}b"
        self.operator_ns = f"{self.tag}-op"
        self.operator_ip = f"{self.subnet}.250"
        self._pod_ips = (f"{self.subnet}.{i}" for i in itertools.count(1))
        self._svc_ips = (f"{self.subnet}.{i}" for i in range(200, 250))
        self._slots = itertools.count()
        self.namespaces: list[str] = []
        self.links: list[str] = []

    @property
    def record(self) -> Path:
        return STATE_DIR / f"{self.tag}.json"

    def _save(self) -> None:
        import owner

        owner.write(self.record, {"tag": self.tag, "namespaces": self.namespaces, "links": self.links})

    def up(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        sweep_stale()
        self.links.append(self.bridge)
        self._save()
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "link", "set", self.bridge, "up"])
        self.add_namespace(self.operator_ns, self.operator_ip)

    def pod_ip(self) -> str:
        ip = next(self._pod_ips)
        if int(ip.rsplit(".", 1)[1]) >= 200:
            raise HarnessError("more than 199 pods in one harness network")
        return ip

    def service_ip(self) -> str:
        return next(self._svc_ips)

    def add_namespace(self, ns: str, ip: str) -> None:
        slot = next(self._slots)
        host, peer = f"{self.tag}v{slot}", f"{self.tag}p{slot}"
        self.namespaces.append(ns)
        self.links.append(host)
        self._save()
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", host, "type", "veth", "peer", "name", peer])
        _run(["ip", "link", "set", peer, "netns", ns])
        _run(["ip", "-n", ns, "link", "set", peer, "name", "eth0"])
        _run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", ns, "route", "add", "default", "dev", "eth0"])  # a pod has one
        _run(["ip", "link", "set", host, "master", self.bridge])
        _run(["ip", "link", "set", host, "up"])

    def set_services(self, ns: str, services: dict[str, tuple[str, str, dict[str, int]]]) -> None:
        """kube-proxy stand-in in `ns`: ClusterIP:port -> endpoint:port for each declared port,
        everything else to a ClusterIP refused. services: name -> (cluster_ip, endpoint_ip, ports)."""
        nat, flt = ["*nat", ":OUTPUT ACCEPT [0:0]"], ["*filter", ":OUTPUT ACCEPT [0:0]"]
        for cluster_ip, endpoint, ports in services.values():
            for port in sorted(set(ports.values())):
                nat.append(f"-A OUTPUT -d {cluster_ip}/32 -p tcp --dport {port} -j DNAT "
                           f"--to-destination {endpoint}:{port}")
            flt.append(f"-A OUTPUT -d {cluster_ip}/32 -p tcp -j REJECT --reject-with tcp-reset")
            flt.append(f"-A OUTPUT -d {cluster_ip}/32 -j REJECT")
        rules = "\n".join(nat + ["COMMIT"] + flt + ["COMMIT"]) + "\n"
        _run(["ip", "netns", "exec", ns, "iptables-restore"], stdin=rules)

    def pids(self, ns: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill(self, namespaces: list[str], procs: tuple[subprocess.Popen, ...] = (),
             grace_s: float = GRACE_S) -> None:
        """Every process of these namespaces, and `procs` (which may not have entered theirs yet):
        SIGTERM, up to grace_s, then SIGKILL (bounded waits)."""
        def alive() -> list[int]:
            return sorted({pid for ns in namespaces for pid in self.pids(ns)} |
                          {p.pid for p in procs if p.poll() is None})

        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            for pid in alive():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait_s
            while alive() and time.monotonic() < end:
                time.sleep(0.2)
            if not alive():
                return
        raise HarnessError(f"namespaces {', '.join(namespaces)}: processes {alive()} survived SIGKILL")

    def remove_namespaces(self, namespaces: list[str], procs: tuple[subprocess.Popen, ...] = ()) -> None:
        namespaces = [ns for ns in namespaces if ns in self.namespaces]
        try:
            self.kill(namespaces, procs)
        finally:
            for ns in namespaces:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
                self.namespaces.remove(ns)

    def down(self) -> None:
        try:
            self.remove_namespaces(list(self.namespaces))
        finally:
            for link in self.links:
                subprocess.run(["ip", "link", "del", link], capture_output=True)
            self.record.unlink(missing_ok=True)


class _InNetns:
    """A thread that lives in a network namespace: the operator's and kubelet's HTTP calls."""

    def __init__(self, ns: str):
        self._pool = ThreadPoolExecutor(max_workers=1, initializer=self._enter, initargs=(ns,))

    @staticmethod
    def _enter(ns: str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET: this thread only
                raise OSError(ctypes.get_errno(), f"setns {ns}")
        finally:
            os.close(fd)

    def call(self, fn, *args, timeout: float = 30.0):
        return self._pool.submit(fn, *args).result(timeout=timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (OSError, ValueError):
        return 0, b""


def _tcp_open(host: str, port: int, timeout: float = 2.0) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------- pods and containers at run time


@dataclasses.dataclass
class Container:
    name: str
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    init: bool = False

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


@dataclasses.dataclass
class Pod:
    """One running pod: its manifest (as the operator built it), namespace, IP and containers."""

    manifest: dict
    ns: str
    ip: str
    dir: Path
    containers: dict[str, Container] = dataclasses.field(default_factory=dict)
    phase: str = "Pending"  # Pending -> Init -> Running -> Succeeded | Failed
    reason: str = ""
    thread: threading.Thread | None = None
    started: threading.Event = dataclasses.field(default_factory=threading.Event)
    deleting: bool = False
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def role(self) -> str:
        """head or worker (ray.io/node-type), submitter (a RayJob's Job), or pod."""
        labels = self.manifest["metadata"].get("labels") or {}
        if labels.get("ray.io/node-type"):
            return labels["ray.io/node-type"]
        return "submitter" if labels.get("ray.io/originated-from-crd") == "RayJob" else "pod"

    def main(self) -> list[Container]:
        return [c for c in self.containers.values() if not c.init]

    def log(self, container: str | None = None) -> str:
        c = self.containers[container] if container else (self.main() or list(self.containers.values()))[0]
        return c.log_path.read_text(errors="replace") if c.log_path and c.log_path.exists() else ""

    def tail(self, lines: int = 25) -> str:
        out = []
        for c in self.containers.values():
            text = self.log(c.name).splitlines()[-lines:]
            out.append(f"--- {self.name}/{c.name} (exit {c.exit_code}):\n" + "\n".join(text))
        return "\n".join(out)


@dataclasses.dataclass
class JobResult:
    """The RayJob's end as the operator reports it (status.jobStatus, jobDeploymentStatus, reason)."""

    job_status: str | None
    deployment: str
    reason: str = ""
    message: str = ""
    submitter_log: str = ""
    pods: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> log tail

    @property
    def succeeded(self) -> bool:
        return self.job_status == "SUCCEEDED" and self.deployment == "Complete"

    def describe(self) -> str:
        parts = [f"jobStatus={self.job_status} jobDeploymentStatus={self.deployment} reason={self.reason}",
                 f"message: {self.message}", "--- submitter:", self.submitter_log[-6000:]]
        parts += list(self.pods.values())
        return "\n".join(parts)


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


class RayJobRun:
    """The RayJob among `objects` (plus its Secrets, ConfigMaps, PVCs), run on this host. `images`:
    image name -> Image stand-in (default_images(spec)); `claims`: PVC name -> host directory (the
    PVCs among the objects get a fresh one under workdir/pvc otherwise)."""

    def __init__(self, objects: list[dict], *, workdir: Path, images: dict[str, Image],
                 claims: dict[str, Path] | None = None, rng: random.Random | None = None):
        missing = prerequisites()
        if missing:
            raise HarnessError("cannot run pods here; missing: " + ", ".join(missing))
        from rlaunch.config import pins

        if pins.get_str("kuberay") != KUBERAY_VERSION:
            raise HarnessError(f"configs/versions.yaml pins KubeRay {pins.get_str('kuberay')}; this harness "
                               f"follows v{KUBERAY_VERSION}'s pod.go and job.go: re-read them and update it")
        self.objects = objects
        jobs = [o for o in objects if o.get("kind") == "RayJob"]
        self.rayjob = jobs[0] if jobs else None  # none: only run_pod (e.g. an initializer Job's pod)
        self.namespace = (self.rayjob or {}).get("metadata", {}).get("namespace", "default")
        self.workdir = Path(workdir)
        self.images = images
        self.rng = rng or random.Random()
        self.claims = {k: Path(v) for k, v in (claims or {}).items()}
        for pvc in (o for o in objects if o.get("kind") == "PersistentVolumeClaim"):
            self.claims.setdefault(pvc["metadata"]["name"], self.workdir / "pvc" / pvc["metadata"]["name"])
        self.net = Network()
        self.pods: dict[str, Pod] = {}
        self.cluster: str | None = None
        self.services: dict[str, tuple[str, str, dict[str, int]]] = {}
        self.submitters: list[Pod] = []
        self.attempts = 0
        self._op: _InNetns | None = None

    # -------------------------------------------------------- lifecycle

    def __enter__(self) -> RayJobRun:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for path in self.claims.values():
            path.mkdir(parents=True, exist_ok=True)
        # SIGTERM (a test runner's timeout, CI cancelling) unwinds like Ctrl-C, so `with` runs
        # down(); a signal handler can only be set from the main thread.
        self._prev_term = None
        if threading.current_thread() is threading.main_thread():
            self._prev_term = signal.signal(signal.SIGTERM, _terminate)
        self.net.up()
        self._op = _InNetns(self.net.operator_ns)

    def down(self) -> None:
        try:
            if self._op:
                self._op.close()
        finally:
            self.net.down()
            if getattr(self, "_prev_term", None) is not None:
                signal.signal(signal.SIGTERM, self._prev_term)
                self._prev_term = None

    # -------------------------------------------------------- the RayCluster

    def start_cluster(self, cluster: str | None = None) -> list[Pod]:
        """A new RayCluster for the RayJob (<rayjob>-<5 chars>): its Services, then all its pods at
        once, as the RayCluster controller creates them."""
        if self.rayjob is None:
            raise HarnessError("no RayJob among the objects: nothing to start a RayCluster from")
        self.attempts += 1
        self.cluster = cluster or f"{self.rayjob['metadata']['name']}-{random_suffix(self.rng)}"
        manifests = ray_pods(self.rayjob, self.cluster, self.rng)
        head_ip = self.net.pod_ip()
        ports = head_service_ports(self.rayjob)
        # The RayCluster's head Service (what workers and the submitter use) and the RayJob's.
        self.services = {f"{self.cluster}-head-svc": (self.net.service_ip(), head_ip, ports),
                         f"{self.rayjob['metadata']['name']}-head-svc": (self.net.service_ip(), head_ip, ports)}
        self.net.set_services(self.net.operator_ns, self.services)
        started = []
        for i, manifest in enumerate(manifests):
            started.append(self._start(manifest, head_ip if i == 0 else self.net.pod_ip()))
        return started

    def _start(self, manifest: dict, ip: str) -> Pod:
        name = manifest["metadata"]["name"]
        pod = Pod(manifest=manifest, ns=f"{self.net.tag}-p{next(_COUNTER)}", ip=ip,
                  dir=self.workdir / "pods" / name)
        if pod.dir.exists():
            shutil.rmtree(pod.dir)
        pod.dir.mkdir(parents=True)
        self.pods[name] = pod
        self.net.add_namespace(pod.ns, ip)
        self.net.set_services(pod.ns, self.services)
        pod.thread = threading.Thread(target=self._kubelet, args=(pod,), name=f"kubelet-{name}", daemon=True)
        pod.thread.start()
        return pod

    def _kubelet(self, pod: Pod) -> None:
        """Init containers one after the other, then every container; the pod's phase as it goes."""
        try:
            spec = pod.manifest["spec"]
            volumes = self._volumes(pod)
            pod.phase = "Init"
            for c in spec.get("initContainers") or []:
                with pod.lock:
                    if pod.deleting:
                        return
                    cont = self._spawn(pod, c, volumes, init=True)
                rc = cont.proc.wait()
                if rc != 0:
                    pod.phase, pod.reason = "Failed", f"init container {c['name']} exited {rc}"
                    return
            with pod.lock:
                if pod.deleting:
                    return
                for c in spec["containers"]:
                    self._spawn(pod, c, volumes)
                pod.phase = "Running"
        except HarnessError as err:
            pod.phase, pod.reason = "Failed", str(err)
        except Exception as err:  # a kubelet bug must not hang the test: report it as the pod's
            pod.phase, pod.reason = "Failed", f"harness error: {err!r}"
        finally:
            pod.started.set()

    def _volumes(self, pod: Pod) -> dict[str, dict]:
        """name -> {"kind": "bind", "source": dir} or {"kind": "tmpfs", "size": bytes}."""
        out = {}
        name = pod.name
        for vol in pod.manifest["spec"].get("volumes") or []:
            vname = vol["name"]
            if "emptyDir" in vol:
                empty = vol["emptyDir"] or {}
                if empty.get("medium") == "Memory":
                    size = empty.get("sizeLimit")
                    out[vname] = {"kind": "tmpfs", "size": quantity_value(size) if size else 0}
                else:
                    path = pod.dir / "volumes" / vname
                    path.mkdir(parents=True)
                    out[vname] = {"kind": "bind", "source": str(path)}
            elif "configMap" in vol or "secret" in vol:
                kind = "configMap" if "configMap" in vol else "secret"
                source = vol[kind]
                obj_name = source.get("name") or source.get("secretName")
                try:
                    obj = find(self.objects, "ConfigMap" if kind == "configMap" else "Secret", obj_name)
                except KeyError:
                    obj = None
                payload = _volume_payload(kind if kind == "secret" else "ConfigMap", source, obj, name)
                path = pod.dir / "volumes" / vname
                atomic_writer_layout(path, payload, int(source.get("defaultMode", 0o644)))
                out[vname] = {"kind": "bind", "source": str(path), "ro": True}
            elif "persistentVolumeClaim" in vol:
                claim = vol["persistentVolumeClaim"]["claimName"]
                if claim not in self.claims:
                    raise PodConfigError(f"pod {name}: volume {vname}: PersistentVolumeClaim {claim} not found "
                                         "(the pod stays Pending)")
                out[vname] = {"kind": "bind", "source": str(self.claims[claim]),
                              "ro": bool(vol["persistentVolumeClaim"].get("readOnly"))}
            else:
                kinds = sorted(k for k in vol if k != "name")
                raise NotEmulated(f"pod {name}: volume {vname}: {', '.join(kinds)}")
        return out

    def _spawn(self, pod: Pod, c: dict, volumes: dict[str, dict], init: bool = False) -> Container:
        image_name = c.get("image", "")
        if image_name not in self.images:
            raise PodConfigError(f"pod {pod.name}: container {c['name']}: no stand-in for image {image_name!r} "
                                 f"(known: {', '.join(self.images)}); ErrImagePull")
        image = self.images[image_name]
        if not c.get("command"):
            raise NotEmulated(f"pod {pod.name}: container {c['name']}: no command (the image's ENTRYPOINT)")
        env = container_env(pod.manifest, c, image, self.objects, pod.ip, self.net.operator_ip)
        argv = [k8s_expand(a, env) for a in list(c["command"]) + list(c.get("args") or [])]
        cdir = pod.dir / "containers" / c["name"]
        (cdir / "root").mkdir(parents=True)
        (cdir / "tmp").mkdir()
        (cdir / "tmp").chmod(0o1777)
        (cdir / "workdir").mkdir()
        (cdir / "hosts").write_text(hosts_file(pod.ip, pod.name[:63],
                                               {s: ip for s, (ip, _, _) in self.services.items()}, self.namespace))
        (cdir / "resolv.conf").write_text(resolv_conf(self.namespace))
        mounts = [{"target": "/tmp", "kind": "bind", "source": str(cdir / "tmp")},
                  {"target": "/etc/hosts", "kind": "bind", "source": str(cdir / "hosts"), "ro": True},
                  {"target": "/etc/resolv.conf", "kind": "bind", "source": str(cdir / "resolv.conf"), "ro": True},
                  {"target": image.workdir, "kind": "bind", "source": str(cdir / "workdir")}]
        mounts += [{"target": t, "kind": "bind", "source": s, "ro": True} for t, s in image.binds.items()]
        for m in c.get("volumeMounts") or []:
            if m["name"] not in volumes:
                raise PodConfigError(f"pod {pod.name}: container {c['name']}: volumeMount {m['name']}: no such "
                                     "volume in the pod")
            vol = dict(volumes[m["name"]])
            if m.get("subPath"):
                if vol["kind"] != "bind":
                    raise NotEmulated(f"pod {pod.name}: subPath on a {vol['kind']} volume")
                vol["source"] = str(Path(vol["source"]) / m["subPath"])
                Path(vol["source"]).mkdir(parents=True, exist_ok=True)
            vol.update(target=m["mountPath"], ro=bool(m.get("readOnly")) or vol.get("ro", False))
            mounts = [x for x in mounts if x["target"] != m["mountPath"]] + [vol]
        if not any(m["target"] == "/dev/shm" for m in mounts):
            mounts.append({"target": "/dev/shm", "kind": "tmpfs", "size": 64 * 2**20})
        plan = {"root": str(cdir / "root"), "hostname": pod.name[:63], "mounts": mounts,
                "workdir": c.get("workingDir") or image.workdir, "argv": argv, "env": env}
        log = cdir.parent / f"{c['name']}.log"
        data = json.dumps(plan).encode()
        if len(data) > 60000:
            raise HarnessError(f"pod {pod.name}: container {c['name']}: plan of {len(data)} bytes exceeds a pipe")
        read_fd, write_fd = os.pipe()
        os.write(write_fd, data)
        os.close(write_fd)
        try:
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", pod.ns, "unshare", "--mount", "--uts", "--propagation", "private",
                     "--", sys.executable, "-I", str(Path(__file__).resolve()), "--pod-init", str(read_fd)],
                    pass_fds=(read_fd,), env={"PATH": SYSTEM_PATH}, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            os.close(read_fd)
        cont = Container(name=c["name"], proc=proc, log_path=log, init=init)
        pod.containers[c["name"]] = cont
        return cont

    def kill_pod(self, name: str) -> None:
        """Delete a pod: every process in it (SIGTERM, GRACE_S, SIGKILL), then its namespace."""
        self.kill_pods([name])

    def kill_pods(self, names: list[str]) -> None:
        pods = [self.pods[n] for n in names]
        procs = []
        for pod in pods:
            with pod.lock:  # no container starts in a pod being deleted
                pod.deleting = True
                procs += [c.proc for c in pod.containers.values() if c.proc]
        self.net.remove_namespaces([p.ns for p in pods], tuple(procs))
        for pod in pods:
            if pod.thread:
                pod.thread.join(timeout=30)
            for c in pod.containers.values():
                if c.proc and c.proc.poll() is None:
                    c.proc.wait(timeout=10)
            pod.phase, pod.reason = "Failed", "deleted"

    def start_pod(self, name: str) -> Pod:
        """Start a deleted pod again from the same manifest, with the same name and IP."""
        pod = self.pods[name]
        if pod.phase not in ("Failed", "Succeeded"):
            raise HarnessError(f"pod {name} is {pod.phase}: kill it first")
        return self._start(pod.manifest, pod.ip)

    def restart_pod(self, name: str) -> Pod:
        self.kill_pod(name)
        return self.start_pod(name)

    def ray_pods(self) -> list[Pod]:
        return [p for p in self.pods.values() if p.role in ("head", "worker") and
                p.manifest["metadata"]["labels"].get("ray.io/cluster") == self.cluster]

    def delete_cluster(self) -> None:
        """What shutdownAfterJobFinishes and a retry do: the RayCluster's pods and the submitter go."""
        self.kill_pods([p.name for p in self.pods.values() if p.ns in self.net.namespaces])

    # -------------------------------------------------------- readiness, probes, the job

    def _failed(self, pods: list[Pod]) -> Pod | None:
        for pod in pods:
            if pod.phase == "Failed":
                return pod
            if pod.phase == "Running" and any(c.exit_code is not None for c in pod.main()):
                pod.phase = "Failed"
                pod.reason = "; ".join(f"container {c.name} exited {c.exit_code}" for c in pod.main()
                                       if c.exit_code is not None)
                return pod
        return None

    def _ready(self, pod: Pod) -> bool:
        if pod.phase != "Running":
            return False
        for c in pod.manifest["spec"]["containers"]:
            probe = c.get("readinessProbe")
            if not probe:
                continue
            if "httpGet" in probe:
                get = probe["httpGet"]
                status, _ = self._op.call(_http_get, f"http://{pod.ip}:{get['port']}{get.get('path', '/')}")
                if not 200 <= status < 400:
                    return False
            elif "tcpSocket" in probe:
                if not self._op.call(_tcp_open, pod.ip, int(probe["tcpSocket"]["port"])):
                    return False
            else:
                raise NotEmulated(f"pod {pod.name}: readinessProbe {sorted(probe)}")
        return True

    def wait_ready(self, deadline_s: float) -> None:
        """The RayCluster's State Ready: every Ray pod Running and ready. A pod that fails (an init
        container or a container exiting) ends the wait at once with its log's tail."""
        pods = self.ray_pods()
        end = time.monotonic() + deadline_s
        while True:
            bad = self._failed(pods)
            if bad:
                raise PodFailed(f"pod {bad.name} ({bad.role}) failed before the cluster was ready: {bad.reason}\n"
                                f"{bad.tail()}")
            waiting = [p for p in pods if not self._ready(p)]
            if not waiting:
                return
            if time.monotonic() >= end:
                raise HarnessError(f"RayCluster {self.cluster}: not ready after {deadline_s:.0f} s; waiting for "
                                   + ", ".join(f"{p.name} ({p.phase})" for p in waiting) + "\n"
                                   + "\n".join(p.tail(10) for p in waiting))
            time.sleep(POLL_S)

    def submit(self) -> Pod:
        """The submitter Job's (next) pod."""
        pod = self._start(submitter_pod(self.rayjob, self.cluster, self.rng), self.net.pod_ip())
        self.submitters.append(pod)
        return pod

    def _service_url(self, dashboard: str) -> str:
        host, _, port = dashboard.partition(":")
        svc = host.split(".")[0]
        return f"http://{self.services[svc][0]}:{port}"

    def job_info(self) -> dict | None:
        """GET /api/jobs/<jobId> through the head Service, as the operator's dashboard client does."""
        url = self._service_url(dashboard_url(self.rayjob, self.cluster))
        status, body = self._op.call(_http_get, f"{url}/api/jobs/{self.rayjob['spec']['jobId']}")
        if status != 200:
            return None
        try:
            return json.loads(body)
        except ValueError:
            return None

    def wait_job(self, deadline_s: float) -> JobResult:
        """The RayJob controller's Running state: the job's status from the dashboard, the
        submitter Job's pods (retried up to its backoffLimit), the Ray pods' health, deadlines."""
        active = float(self.rayjob["spec"].get("activeDeadlineSeconds") or 0) or float("inf")
        limit_s = min(deadline_s, active)
        end = time.monotonic() + limit_s
        backoff = submitter_backoff_limit(self.rayjob)
        failures, retry_at = 0, None
        while True:
            bad = self._failed(self.ray_pods())
            if bad:
                return self._result(None, "Failed", "RayClusterPodFailed", f"pod {bad.name}: {bad.reason}")
            info = self.job_info()
            status = (info or {}).get("status")
            sub = self.submitters[-1]
            if status in JOB_TERMINAL:
                # The submitter's `ray job logs --follow` ends with the job: let it finish its output.
                self._wait_exit(sub, 30)
                deployment = "Complete" if status == "SUCCEEDED" else "Failed"
                return self._result(status, deployment, "" if status == "SUCCEEDED" else "AppFailed",
                                    (info or {}).get("message", ""))
            if sub.started.is_set() and not sub.main():  # its kubelet refused it: the Job waits forever
                return self._result(status, "Failed", "SubmitterNotStarted", f"pod {sub.name}: {sub.reason}")
            codes = [c.exit_code for c in sub.main()]
            if retry_at is None and codes and codes[0] not in (None, 0):
                failures += 1
                if failures > backoff:
                    return self._result(status, "Failed", "SubmissionFailed",
                                        f"the submitter Job failed {failures} times (backoffLimit {backoff})")
                retry_at = time.monotonic() + 10 * 2 ** (failures - 1)  # the Job controller's back-off
            if retry_at is not None and time.monotonic() >= retry_at:
                retry_at = None
                self.submit()
            if time.monotonic() >= end:
                reason = "DeadlineExceeded" if active <= deadline_s else "HarnessDeadline"
                return self._result(status, "Failed", reason, f"the job did not finish within {limit_s:.0f} s")
            time.sleep(POLL_S)

    def _wait_exit(self, pod: Pod, seconds: float) -> None:
        pod.started.wait(timeout=seconds)
        end = time.monotonic() + seconds
        while any(c.exit_code is None for c in pod.main()) and time.monotonic() < end:
            time.sleep(0.2)

    def _result(self, status, deployment, reason, message) -> JobResult:
        sub = self.submitters[-1] if self.submitters else None
        return JobResult(job_status=status, deployment=deployment, reason=reason, message=message,
                         submitter_log="\n".join(p.log() for p in self.submitters) if sub else "",
                         pods={p.name: p.tail() for p in self.ray_pods()})

    def execute(self, ready_s: float = 300, job_s: float = 900, keep: bool = False) -> JobResult:
        """One attempt of the RayJob: a new RayCluster, ready, the submitter, the job to its end;
        then the cluster goes (shutdownAfterJobFinishes) unless keep. A cluster that never gets
        ready is a Failed result naming the pod, not an exception."""
        self.start_cluster()
        try:
            try:
                self.wait_ready(ready_s)
            except HarnessError as err:
                return JobResult(None, "Failed", "ClusterNotReady", str(err),
                                 pods={p.name: p.tail() for p in self.ray_pods()})
            self.submit()
            return self.wait_job(job_s)
        finally:
            if not keep:
                self.delete_cluster()

    def run_pod(self, manifest: dict, deadline_s: float) -> Pod:
        """Any Pod (a Job's template, an initializer) in this cluster's network, to completion."""
        manifest = copy.deepcopy(manifest)
        manifest.setdefault("metadata", {}).setdefault("name", f"pod-{random_suffix(self.rng)}")
        manifest["metadata"].setdefault("namespace", self.namespace)
        pod = self._start(manifest, self.net.pod_ip())
        pod.started.wait(timeout=deadline_s)
        end = time.monotonic() + deadline_s
        while pod.phase not in ("Failed",) and any(c.exit_code is None for c in pod.main()):
            if time.monotonic() >= end:
                raise HarnessError(f"pod {pod.name}: still running after {deadline_s:.0f} s\n{pod.tail()}")
            time.sleep(0.2)
        if pod.phase != "Failed":
            codes = [c.exit_code for c in pod.main()]
            pod.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        return pod


# ---------------------------------------------------------------- pod-init (inside the namespaces)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
RW_HOST = ("/dev", "/proc", "/sys")  # host directories a container sees read-write


def _pod_init(fd: int) -> None:
    """Build the container's root from the plan read on `fd`, chroot into it, exec the command."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    plan = json.loads(b"".join(chunks))
    libc = ctypes.CDLL(None, use_errno=True)

    def mount(source, target, fstype, flags, data=None):
        args = [None if x is None else x.encode() for x in (source, target, fstype, data)]
        if libc.mount(args[0], args[1], args[2], flags, args[3]) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {source} -> {target}: {os.strerror(err)}")

    root = plan["root"]
    mount("tmpfs", root, "tmpfs", 0, "mode=0755,size=256m")  # the container's writable layer
    targets = [m["target"] for m in plan["mounts"]]

    def mirror(host_dir: str, dst: str) -> None:
        for entry in sorted(os.listdir(host_dir)):
            h, d = os.path.join(host_dir, entry), os.path.join(dst, entry)
            if h in targets:
                continue
            if os.path.islink(h):
                os.symlink(os.readlink(h), d)
                continue
            below = [t for t in targets if t.startswith(h + "/")]
            # A mount point missing on the host (or a symlink there, which mount would follow out
            # of this root): copy this level, bind the rest.
            if os.path.isdir(h) and any(not os.path.lexists(t) or os.path.islink(t) for t in below):
                os.mkdir(d)
                mirror(h, d)
                continue
            if os.path.isdir(h):
                os.mkdir(d)
            else:
                open(d, "w").close()
            mount(h, d, None, MS_BIND | MS_REC)
            if h not in RW_HOST:
                mount(None, d, None, MS_REMOUNT | MS_BIND | MS_RDONLY)

    mirror("/", root)
    for m in sorted(plan["mounts"], key=lambda m: m["target"].count("/")):
        path = root + m["target"]
        is_file = m["kind"] == "bind" and os.path.isfile(m["source"])
        if is_file:
            if not os.path.lexists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w").close()
        else:
            os.makedirs(path, exist_ok=True)
        if m["kind"] == "tmpfs":
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777{',size=%d' % m['size'] if m['size'] else ''}")
        else:
            mount(m["source"], path, None, MS_BIND | MS_REC)
            if m.get("ro"):
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    name = plan["hostname"].encode()
    if libc.sethostname(name, len(name)) != 0:
        raise OSError(ctypes.get_errno(), "sethostname")
    os.chroot(root)
    os.makedirs(plan["workdir"], exist_ok=True)
    os.chdir(plan["workdir"])
    env = plan["env"]
    os.execvpe(plan["argv"][0], plan["argv"], env)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--pod-init":
        try:
            _pod_init(int(sys.argv[2]))
        except OSError as err:
            print(f"kuberay-harness pod-init: {err}", file=sys.stderr)
            sys.exit(128)
    print("usage: python -I kuberay_harness.py --pod-init FD (the harness runs it in each container)",
          file=sys.stderr)
    sys.exit(2)

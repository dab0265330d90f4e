"""The manifests of INFRA=kuberay, rendered from the spec (pure): context() decides everything the
templates under templates/kuberay/ need (the RayJob with its embedded Ray cluster, the inputs Job, the
shared volume, RDMA, monitoring), render() lays them out, and configmap_manifest / secret_manifest
build the two objects that launch sends on kubectl's stdin (the artifacts, the secrets' values).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from rlaunch.backends.kuberay import gke
from rlaunch.backends.kuberay import monitoring
from rlaunch.backends.kuberay.names import (RUN_LABEL, code_configmap_name, configmap_name, head_service, inputs_job_name, job_name,
                                            labels, pvc_name, secret_name)
from rlaunch.config import code, datasource
from rlaunch.config import inputs as run_inputs
from rlaunch.errors import MissingPrerequisite
from rlaunch.plan import artifacts
from rlaunch.plan import imagecheck
from rlaunch.plan import jobenv
from rlaunch.plan.render import render_template
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import KubeRaySettings, Spec

ARTIFACTS_MOUNT = "/opt/rlaunch-run"   # the ConfigMap's mount point in every pod
CODE_MOUNT = "/opt/rlaunch-code"      # CODE's ConfigMap, in the inputs Job's pod
CODE_KEY = "code.tar.gz"
CODE_FETCH_CACHE = "/tmp/rlaunch-code"  # a fetched CODE's checkout: the inputs Job's own disk (its /tmp)
DATA_KEY = "data.tar.gz"              # DATA= of this machine, in the same ConfigMap (one 1 MiB cap)
RLAUNCH_HOME = "/opt/rlaunch"          # rlaunch's tools inside the rlaunch image
ONE_PER_HOST_LABEL = "rlaunch.io/one-per-host"
ARCH_LABEL = "kubernetes.io/arch"      # every pod runs on nodes of its image's architecture
# Ray's default ports (not versions): client, metrics export, autoscaler and dashboard metrics.
CLIENT_PORT, METRICS_PORT, AUTOSCALER_METRICS_PORT, DASHBOARD_METRICS_PORT = 10001, 8080, 44217, 44227
# cluster.accelerator -> GKE's node label value (cloud.google.com/gke-accelerator).
GKE_ACCELERATORS = {
    "T4": "nvidia-tesla-t4", "L4": "nvidia-l4", "A100": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb", "H100": "nvidia-h100-80gb", "H100-MEGA": "nvidia-h100-mega-80gb",
    "H200": "nvidia-h200-141gb", "B200": "nvidia-b200", "GB200": "nvidia-gb200",
}
TOS_CSI_DRIVER = "tos.csi.volcengine.com"
GCSFUSE_CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
# Order of `kubectl apply`: what the RayJob's pods reference exists before the RayJob.
APPLY_ORDER = ["serviceaccount.yaml", "storage.yaml", "network.yaml", "rdma.yaml", "computedomain.yaml",
               "podmonitors.yaml", "grafana.yaml", "ingress.yaml", "inputs.yaml", "rayjob.yaml"]
# The inputs Job's pod: a CPU node, the hub clients' caches on its own disk (datasets converts
# through one; model files go straight to the shared volume).
INPUTS_RESOURCES = {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "20Gi"}
INPUTS_RUNNER = """On KubeRay the inputs Job runs it (one pod: one writer), and
# `make launch` applies the RayJob only once it succeeded: no GPU pod waits on a download."""


# ---------------------------------------------------------------- shape: the spec -> what to render


def _kr(spec: Spec) -> KubeRaySettings:
    return spec.infra.kuberay


def _quantities(cpus: int, memory_gb: int, gpus: int, ephemeral_gb: int = 0) -> dict[str, Any]:
    """Requests == limits (Guaranteed QoS); 0 leaves a resource to the cluster's defaults."""
    out: dict[str, Any] = {}
    if cpus:
        out["cpu"] = str(cpus)
    if memory_gb:
        out["memory"] = f"{memory_gb}Gi"
    if gpus:
        out["nvidia.com/gpu"] = gpus
    if ephemeral_gb:  # the node disk the pod's emptyDirs (/tmp/ray's logs and spill) may fill
        out["ephemeral-storage"] = f"{ephemeral_gb}Gi"
    return out


def _storage(spec: Spec) -> dict[str, Any]:
    """Which shared volume: an existing PVC, a GCS FUSE bucket (gke), a TOS bucket (vke), or a new PVC."""
    flavor, storage, kr = spec.infra.k8s_flavor, spec.storage, _kr(spec)
    if storage.pvc:
        return {"kind": "pvc"}
    bucket, _, subdir = storage.source.partition("://")[2].partition("/")
    if flavor == "gke":
        return {"kind": "gcsfuse", "bucket": bucket, "subdir": subdir.strip("/")}
    if flavor == "vke":
        return {"kind": "tos", "bucket": bucket, "subdir": "/" + subdir.strip("/"),
                "endpoint": kr.object_store_endpoint, "secret": kr.object_store_secret}
    return {"kind": "new-pvc", "size": f"{spec.cluster.disk_gb}Gi"}


def _arch(spec: Spec) -> str:
    """The image's CPU architecture (amd64 | arm64), from its facts: every pod runs on such nodes."""
    _, facts, _ = imagecheck.image_of(spec)
    return str((facts or {}).get("arch") or "amd64")


def _node_selector(spec: Spec) -> dict[str, str]:
    """GPU pods' nodeSelector: the image's architecture, the user's labels (checked by config.check), GKE's
    accelerator label (a CPU-only head gets the architecture alone: cpu_node_selector)."""
    out = {ARCH_LABEL: _arch(spec), **dict(item.partition("=")[::2] for item in _kr(spec).node_selector)}
    if spec.infra.k8s_flavor == "gke" and spec.cluster.gpus_per_node > 0:
        out.setdefault("cloud.google.com/gke-accelerator", GKE_ACCELERATORS[spec.cluster.accelerator])
    return out


def _cpu_placement(spec: Spec) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The CPU pods' (a CPU-only head, the RayJob's submitter, the inputs Job) nodeSelector and
    tolerations: nodes of the image's architecture. On GKE A4X the image is arm64 and the only arm64
    nodes are the A4X pool's, tainted for GPUs and for arm64 (seed 004's CPU pool is x86), so they go
    there as seed 004's head does: the GPU pods' selector and tolerations, requesting no GPU."""
    if gke.pool(spec) == "a4x":
        return _node_selector(spec), _tolerations(spec)
    return {ARCH_LABEL: _arch(spec)}, []


def _tolerations(spec: Spec) -> list[dict[str, Any]]:
    if spec.cluster.gpus_per_node <= 0:
        return []
    out = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if spec.infra.k8s_flavor == "gke" and spec.cluster.accelerator == "GB200":
        out.append({"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoSchedule"})  # arm64 pool
    return out


def _pod_env(spec: Spec) -> list[dict[str, Any]]:
    """The Ray containers' env: every Ray process inherits it (runtime_env carries the job's own)."""
    env = [{"name": "RLAUNCH_RUN_ID", "value": spec.run.id}]
    env += [{"name": name, "value": value} for name, value in spec.derived.nccl_env.items()]
    # cluster.health_check: the head's GCS reads it (on the workers it is unused, and the same).
    env += [{"name": name, "value": value} for name, value in spec.derived.ray_health_env.items()]
    env += [{"name": k, "value": v} for k, v in gke.nccl_env(spec).items()]  # GKE: the node pool's NCCL
    env += [{"name": k, "value": v} for k, v in monitoring.settings(spec)["env"].items()]  # APMPlus tracing
    for name in spec.secrets:
        env.append({"name": name, "secret": secret_name(spec)})
    return env


def _runtime_env(spec: Spec) -> str:
    """runtimeEnvYAML: the artifacts as working_dir, the job's non-secret env for every Ray process."""
    import yaml

    # The tracker's env too: a backoffLimit retry logs into the same W&B run.
    env_vars = jobenv.job_env(spec, {"RLAUNCH_HOME": RLAUNCH_HOME, "RLAUNCH_PYTHON": "python3",
                                     "PYTHONUNBUFFERED": "1"})
    if spec.paths.code_dir:  # CODE first on every Ray worker's path (Ray expands ${PYTHONPATH})
        env_vars["PYTHONPATH"] = f"{spec.paths.code_dir}:${{PYTHONPATH}}"
    runtime = {
        # Uploaded by the submitter, which mounts the ConfigMap; `..data` and the timestamped
        # folder are the ConfigMap volume's own bookkeeping, not artifacts.
        "working_dir": ARTIFACTS_MOUNT,
        "excludes": ["..*"],
        "env_vars": {k: str(v) for k, v in env_vars.items()},
    }
    return str(yaml.safe_dump(runtime, sort_keys=False, default_flow_style=False, width=1000))


def _groups(spec: Spec) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Head and worker group shapes. nodes counts GPU nodes: with a CPU-only head, all are workers."""
    c, kr = spec.cluster, _kr(spec)
    node = _quantities(c.cpus_per_node, c.memory_gb, c.gpus_per_node, kr.ephemeral_storage_gb)
    shm = f"{c.memory_gb // 3}Gi" if c.memory_gb >= 3 else ""
    head_params = {"dashboard-host": "0.0.0.0"}
    if spec.monitoring.apmplus:  # seed 002: the head's hook sets up tracing in every Ray worker
        head_params["tracing-startup-hook"] = spec.monitoring.tracing_hook
    if c.ray_port != 6379:
        head_params["port"] = str(c.ray_port)
    if c.dashboard_port != 8265:
        head_params["dashboard-port"] = str(c.dashboard_port)
    if spec.derived.cpu_only_head:
        # num-cpus "0": no task or actor lands on the head; it only runs the driver and the GCS.
        # A framework that needs Ray CPUs on the head (verl's TransferQueue) gets the pod's CPUs.
        head_params["num-cpus"] = str(spec.derived.head_ray_cpus)
        head = {"params": head_params,
                "resources": _quantities(kr.head_cpus, kr.head_memory_gb, 0, kr.head_ephemeral_storage_gb),
                "shm": f"{kr.head_memory_gb // 3}Gi" if kr.head_memory_gb >= 3 else "",
                "one_per_host": False, "gpu": False}
        workers = c.nodes
    else:
        head = {"params": head_params, "resources": node, "shm": shm, "one_per_host": True,
                "gpu": c.gpus_per_node > 0}
        workers = c.nodes - 1
    worker = None
    if workers > 0:
        worker = {"replicas": workers, "resources": node, "shm": shm, "one_per_host": True,
                  "gpu": c.gpus_per_node > 0}
    return head, worker


def run_files(spec: Spec) -> dict[str, str]:
    """The files every pod may read from the artifacts ConfigMap: spec.json, job.sh, the framework's
    files, and setup.sh (the inputs Job's script) when the framework has inputs to prepare."""
    files = artifacts.common(spec)
    lines = frameworks.get(spec.framework.name).setup(spec)
    if spec.paths.code_dir:  # the inputs Job puts CODE on the run's volume first: from its ConfigMap,
        # or (a git CODE over the ConfigMap's limit) fetched from its repository onto the pod's disk
        lines = [*(code.fetch_lines(spec, CODE_FETCH_CACHE) if code.by_fetch(spec)
                   else code.unpack_lines(spec, f"{CODE_MOUNT}/{CODE_KEY}")), *lines]
    # DATA= of this machine: extracted from the same ConfigMap before the upload line reads it.
    lines = [*run_inputs.unpack_lines(spec, f"{CODE_MOUNT}/{DATA_KEY}"), *lines]
    if lines:
        files["setup.sh"] = render_template("common/setup.sh.j2", spec=spec, lines=lines, runner=INPUTS_RUNNER)
    return files


def _inputs(spec: Spec, files: dict[str, str]) -> dict[str, Any] | None:
    """The inputs Job's shape, when there is a setup.sh to run."""
    if "setup.sh" not in files:
        return None
    env = [{"name": "RLAUNCH_HOME", "value": RLAUNCH_HOME}, {"name": "RLAUNCH_PYTHON", "value": "python3"},
           {"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "HF_HOME", "value": "/tmp/huggingface"},
           {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"}]
    env += [{"name": name, "secret": secret_name(spec)} for name in spec.secrets]
    return {"name": inputs_job_name(spec), "deadline": _kr(spec).inputs_timeout_s, "env": env,
            "resources": INPUTS_RESOURCES}


def context(spec: Spec, files: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything the templates need, decided here so the templates only lay it out. `files`: what
    run_files(spec) returns (computed when not given)."""
    flavor = spec.infra.k8s_flavor
    head, worker = _groups(spec)
    storage = _storage(spec)
    kr = _kr(spec)
    files = run_files(spec) if files is None else files
    rdma = spec.infra.rdma
    nics = gke.dranet_nics(spec)
    service_account = kr.service_account
    render_sa = bool(kr.gcp_service_account)
    if render_sa and not service_account:
        service_account = "rlaunch-gcs"
    return {
        "spec": spec,
        "job": job_name(spec),
        "namespace": spec.infra.namespace,
        "labels": labels(spec),
        "run_label": RUN_LABEL,
        "one_per_host_label": ONE_PER_HOST_LABEL,
        "image": spec.pins.image,
        "ray_version": spec.pins.ray,
        "head": head,
        "worker": worker,
        "storage": storage,
        "pvc": pvc_name(spec),
        "mount": spec.storage.mount,
        "configmap": configmap_name(spec),
        "code_configmap": code_configmap_name(spec) if carried_keys(spec) else "",
        "code_mount": CODE_MOUNT,
        "code_keys": carried_keys(spec),
        "configmap_items": configmap_items(spec, files),
        "inputs": _inputs(spec, files),
        "artifacts_mount": ARTIFACTS_MOUNT,
        "entrypoint": f"bash {ARTIFACTS_MOUNT}/job.sh",
        "runtime_env": _runtime_env(spec),
        "env": _pod_env(spec),
        "node_selector": _node_selector(spec),
        "cpu_node_selector": _cpu_placement(spec)[0],
        "tolerations": _tolerations(spec),
        "cpu_tolerations": _cpu_placement(spec)[1],
        "service_account": service_account,
        "render_service_account": render_sa,
        "gcp_service_account": kr.gcp_service_account,
        "gcsfuse": storage["kind"] == "gcsfuse",
        "ipc_lock": rdma,
        "rdma_nics": nics,
        "rdma_template": f"{job_name(spec)}-rdma-nic",
        "rdma_device_class": gke.RDMA_DEVICE_CLASS,
        "gib": gke.gib(spec),
        "host_paths": {"gib": gke.HOST_GIB, "nvidia": gke.HOST_NVIDIA},
        "compute_domain": f"{job_name(spec)}-compute-domain" if gke.compute_domain(spec) else "",
        "compute_domain_api": gke.COMPUTE_DOMAIN_API,
        "channel_claim": gke.CHANNEL_CLAIM,
        **gke.context(spec),  # GKE Standard's network mapping: networks, network_api, gpu_annotations
        "channel_template": f"{job_name(spec)}-compute-domain-channel",
        "gpu_pods": spec.cluster.nodes,
        "podmonitors": spec.monitoring.podmonitors,
        "monitoring": monitoring.settings(spec),
        "head_service": head_service(job_name(spec)),
        "vmp_label": flavor == "vke",  # VKE's managed Prometheus picks PodMonitors by this label
        "ports": {"gcs": spec.cluster.ray_port, "dashboard": spec.cluster.dashboard_port,
                  "client": CLIENT_PORT, "metrics": METRICS_PORT,
                  "as_metrics": AUTOSCALER_METRICS_PORT, "dash_metrics": DASHBOARD_METRICS_PORT},
        "ttl": kr.ttl_seconds_after_finished,
        "deadline": kr.active_deadline_seconds,
        "backoff": kr.backoff_limit,
        "job_id": spec.run.id,
        "csi": {"gcsfuse": GCSFUSE_CSI_DRIVER, "tos": TOS_CSI_DRIVER},
    }


# ---------------------------------------------------------------- the artifacts ConfigMap


def configmap_key(relpath: str) -> str:
    """ConfigMap keys cannot hold '/': a framework file in a subfolder gets a flat key."""
    return relpath.replace("/", "__")


def _in_configmap(rel: str) -> bool:
    # PROVENANCE (the JSON files' header, for whoever reads the plan) stays with the plan.
    return not rel.startswith("kuberay/") and rel != artifacts.PROVENANCE


def configmap_items(spec: Spec, files: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": configmap_key(rel), "path": rel} for rel in sorted(files) if _in_configmap(rel)]


def configmap_manifest(spec: Spec, files: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap that carries the launch's artifacts (exactly the rendered texts) into the pods."""
    data = {configmap_key(rel): text for rel, text in sorted(files.items()) if _in_configmap(rel)}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": configmap_name(spec), "namespace": spec.infra.namespace,
                         "labels": labels(spec)},
            "data": data}


def carried_keys(spec: Spec) -> list[str]:
    """The keys of the ConfigMap that carries the user's own bytes to the inputs Job: CODE's pack,
    DATA's files when they are on this machine."""
    return ([CODE_KEY] if spec.paths.code_dir and not code.by_fetch(spec) else []) + \
        ([DATA_KEY] if spec.pins.source.get("kind") == "local" else [])


def code_configmap_manifest(spec: Spec) -> dict[str, Any] | None:
    """The ConfigMap that carries CODE's pack and a DATA= of this machine (tar.gz each, binaryData) to
    the inputs Job, which extracts CODE onto the run's volume at paths.code_dir and uploads DATA to its
    content-named directory; None without either. Built at launch, from what the plan pinned (the
    sizes were checked then: Infra.code_limit)."""
    packed = code.of(spec) if CODE_KEY in carried_keys(spec) else None
    blobs = {CODE_KEY: packed.tar_gz()} if packed is not None else {}
    if spec.pins.source.get("kind") == "local":
        blobs[DATA_KEY] = datasource.archive(spec.pins.source)
    if not blobs:
        return None
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": code_configmap_name(spec), "namespace": spec.infra.namespace,
                         "labels": labels(spec)},
            "binaryData": {key: base64.b64encode(blob).decode() for key, blob in blobs.items()}}


def secret_manifest(spec: Spec, environ: dict[str, str]) -> dict[str, Any]:
    """The Secret of spec.secrets, from `environ`; only ever sent to kubectl's stdin."""
    missing = [name for name in spec.secrets if not environ.get(name)]
    if missing:
        raise MissingPrerequisite(f"secret env var {', '.join(missing)}",
                                  f"export {missing[0]}=... in the shell that runs `make launch` "
                                  "(spec.secrets names it; the value is sent to kubectl on stdin only)")
    data = {name: base64.b64encode(environ[name].encode()).decode() for name in spec.secrets}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret_name(spec), "namespace": spec.infra.namespace,
                         "labels": labels(spec)},
            "data": data}


# ---------------------------------------------------------------- the rendered manifests


def render(spec: Spec) -> dict[str, str]:
    """The run's files: run_files(spec), then the manifests its context calls for."""
    files = run_files(spec)
    ctx = context(spec, files)
    files["kuberay/rayjob.yaml"] = render_template("kuberay/rayjob.yaml.j2", **ctx)
    if ctx["inputs"]:
        files["kuberay/inputs.yaml"] = render_template("kuberay/inputs.yaml.j2", **ctx)
    if ctx["storage"]["kind"] != "pvc":
        files["kuberay/storage.yaml"] = render_template("kuberay/storage.yaml.j2", **ctx)
    if ctx["render_service_account"]:
        files["kuberay/serviceaccount.yaml"] = render_template("kuberay/serviceaccount.yaml.j2", **ctx)
    if ctx["networks"]:
        files["kuberay/network.yaml"] = render_template("kuberay/network.yaml.j2", **ctx)
    if ctx["rdma_nics"]:
        files["kuberay/rdma.yaml"] = render_template("kuberay/rdma.yaml.j2", **ctx)
    if ctx["compute_domain"]:
        files["kuberay/computedomain.yaml"] = render_template("kuberay/computedomain.yaml.j2", **ctx)
    if ctx["podmonitors"]:
        files["kuberay/podmonitors.yaml"] = render_template("kuberay/podmonitors.yaml.j2", **ctx)
    if ctx["monitoring"]["grafana"]:
        name, text = monitoring.grafana_dashboard(ctx["job"], spec.run.id)
        files["kuberay/grafana.yaml"] = render_template("kuberay/grafana.yaml.j2", dashboard={
            "file": name, "json": text}, **ctx)
    if ctx["monitoring"]["ingress"]:
        files["kuberay/ingress.yaml"] = render_template("kuberay/ingress.yaml.j2", **ctx)
    return files


def manifest_files(files: dict[str, str]) -> list[str]:
    """The rendered manifests among `files`, in the order `kubectl apply` takes them."""
    return [f"kuberay/{name}" for name in APPLY_ORDER if f"kuberay/{name}" in files]


def documents(files: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(file[#index], object) for every object of the rendered manifests, in apply order."""
    import yaml

    docs = []
    for rel in manifest_files(files):
        for i, doc in enumerate(yaml.safe_load_all(files[rel])):
            if doc is not None:
                docs.append((f"{rel}#{i}" if i else rel, doc))
    return docs

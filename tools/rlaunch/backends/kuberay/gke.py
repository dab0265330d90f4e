"""GKE's GPU node pools for INFRA=kuberay K8S_FLAVOR=gke (seed 004): which kind of pool the
accelerator means, the NCCL settings each kind needs, and what the cluster must have installed.

  - A4X (GB200, arm64, 4 GPUs a node, one NVL72 rack): multi-node NVLink through NVIDIA's DRA driver,
    a ComputeDomain whose IMEX channel every GPU pod claims; NCCL picks its settings through the gIB
    env plugin (NCCL_ENV_PLUGIN=gcp). RDMA NICs from GKE's managed DRANET (mrdma.google.com).
  - A3 Ultra (H200) and A4 (B200), 8 GPUs a node: the gIB NCCL plugin with the pool's own config
    files under /usr/local/gib/configs (seed 004: nccl.a3u.conf and tuner_config_a3u.txtpb for H200;
    Google's GKE verl page gives tuner_config_a4.txtpb for B200).
Every GPU pod of a pool with RDMA also gets GLOO_SOCKET_IFNAME=eth0 (the pod's own interface, not an
RDMA rail) and NCCL_DEBUG=INFO (seed 004 reads "via P2P/MNNVL" in those lines to confirm NVLink).

The pre-checks that launch runs before applying anything are checks(spec): (kubectl args, what is
missing, how to get it).
"""

from __future__ import annotations

from rlaunch.config import pins

# cluster.accelerator -> the kind of GKE node pool it runs on (machine families a4x, a4, a3-ultragpu).
POOLS = {"GB200": "a4x", "B200": "a4", "H200": "a3-ultra"}
POOL_NAMES = {"a4x": "A4X (GB200)", "a4": "A4 (B200)", "a3-ultra": "A3 Ultra (H200)"}
GIB = "/usr/local/gib"        # the gIB NCCL plugin and its configs, from the node (hostPath)
NVIDIA = "/usr/local/nvidia"  # the node's NVIDIA driver libraries (hostPath)
HOST_GIB, HOST_NVIDIA = "/home/kubernetes/bin/gib", "/home/kubernetes/bin/nvidia"
RDMA_DEVICE_CLASS = "mrdma.google.com"   # GKE's managed DRANET RDMA NICs
# NVIDIA's DRA driver for GPUs (configs/versions.yaml nvidia-dra-driver-gpu): the ComputeDomain kind
# and the device class of the IMEX channel its controller's ResourceClaimTemplate asks for.
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
COMPUTE_DOMAIN_CRD = "computedomains.resource.nvidia.com"
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
CHANNEL_CLAIM = "compute-domain-channel"  # the pods' claim name
# The gIB installer (Google's container-engine-accelerators gpudirect-rdma/): a kube-system DaemonSet
# that fills HOST_GIB on each GPU node; seed 004 applies the A4X variant, and the standard one on GKE
# Standard A4 / A3 Ultra.
GIB_INSTALLER = "nccl-rdma-installer"
GIB_INSTALLER_URL = ("https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/"
                     "master/gpudirect-rdma/{file}")
GIB_INSTALLER_FILES = {"a4x": "nccl-rdma-installer-a4x.yaml", "a4": "nccl-rdma-installer.yaml",
                       "a3-ultra": "nccl-rdma-installer.yaml"}
NCCL_ENV = {
    "a4x": {"NCCL_ENV_PLUGIN": "gcp"},
    "a4": {"NCCL_TUNER_CONFIG_PATH": f"{GIB}/configs/tuner_config_a4.txtpb"},
    "a3-ultra": {"NCCL_CONF_FILE": f"{GIB}/configs/nccl.a3u.conf",
                 "NCCL_TUNER_CONFIG_PATH": f"{GIB}/configs/tuner_config_a3u.txtpb"},
}


def pool(spec: dict) -> str:
    """a4x | a4 | a3-ultra for GPU pods on GKE, "" for any other accelerator or flavor."""
    if spec["infra"]["k8s_flavor"] != "gke" or spec["cluster"]["gpus_per_node"] <= 0:
        return ""
    return POOLS.get(spec["cluster"]["accelerator"], "")


def gib(spec: dict) -> bool:
    """The node's gIB plugin and driver libraries are mounted into the GPU pods (RDMA on GKE)."""
    return spec["infra"]["k8s_flavor"] == "gke" and spec["infra"]["rdma"] and spec["cluster"]["gpus_per_node"] > 0


def compute_domain(spec: dict) -> bool:
    """A4X: a ComputeDomain for the run's GPU pods (multi-node NVLink), unless infra.kuberay.imex is off."""
    return pool(spec) == "a4x" and spec["infra"]["kuberay"]["imex"]


def nccl_env(spec: dict) -> dict[str, str]:
    """The GPU pods' NCCL and gloo env for the node pool (RDMA on GKE only: the plugin lives in gIB)."""
    if not gib(spec):
        return {}
    env = {"LD_LIBRARY_PATH": f"{NVIDIA}/lib64:{GIB}/lib64"}
    env.update(NCCL_ENV.get(pool(spec), {}))
    if pool(spec):
        env.update({"GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"})
    return env


def checks(spec: dict, rdma_nics: int) -> list[tuple[list[str], str, str]]:
    """What launch asks the cluster before applying: the DRA device classes the pods claim, the
    ComputeDomain CRD, the gIB installer that fills the directory the GPU pods mount. Each: (kubectl
    args, what is missing, how to get it)."""
    out = []
    if rdma_nics:
        out.append((["get", "deviceclass", RDMA_DEVICE_CLASS, "-o", "name"],
                    f"the DRA device class {RDMA_DEVICE_CLASS} (GKE's managed DRANET RDMA NICs, which the GPU "
                    "pods claim)",
                    "create the GPU node pool with accelerator networking and managed DRANET (A4X: Cluster "
                    "Toolkit's gke-a4x blueprint, enable_dranet: true); `kubectl get deviceclasses` then lists "
                    "it. Or launch without RDMA: RDMA=0"))
    if compute_domain(spec):
        version = pins.get_str("nvidia-dra-driver-gpu")
        install = (f"install NVIDIA's DRA driver for GPUs {version} (seed 004): helm repo add nvidia "
                   "https://helm.ngc.nvidia.com/nvidia && helm upgrade --install nvidia-dra-driver-gpu "
                   f"nvidia/nvidia-dra-driver-gpu --version={version} --namespace nvidia-dra-driver-gpu "
                   f"--create-namespace --set nvidiaDriverRoot={HOST_NVIDIA} --set resources.gpus.enabled=false "
                   "--set 'kubeletPlugin.tolerations[0].key=nvidia.com/gpu' "
                   "--set 'kubeletPlugin.tolerations[0].operator=Exists' "
                   "--set 'kubeletPlugin.tolerations[1].key=kubernetes.io/arch' "
                   "--set 'kubeletPlugin.tolerations[1].operator=Exists'. Or SET infra.kuberay.imex=false "
                   "(no multi-node NVLink)")
        out.append((["get", "crd", COMPUTE_DOMAIN_CRD, "-o", "name"],
                    f"the ComputeDomain CRD ({COMPUTE_DOMAIN_CRD}) for A4X's multi-node NVLink", install))
        out.append((["get", "deviceclass", CHANNEL_DEVICE_CLASS, "-o", "name"],
                    f"the DRA device class {CHANNEL_DEVICE_CLASS} (the IMEX channel the GPU pods claim)", install))
    if gib(spec) and pool(spec):
        url = GIB_INSTALLER_URL.format(file=GIB_INSTALLER_FILES[pool(spec)])
        out.append((["get", "daemonset", GIB_INSTALLER, "-n", "kube-system", "-o", "name"],
                    f"the gIB NCCL plugin installer (DaemonSet kube-system/{GIB_INSTALLER}, which fills "
                    f"{HOST_GIB} on the GPU nodes; the GPU pods mount it)",
                    f"kubectl apply -f {url} (seed 004), then wait for its pods on the GPU nodes: "
                    f"kubectl -n kube-system rollout status daemonset/{GIB_INSTALLER}. Or launch without RDMA: RDMA=0"))
    return out

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

How A4 / A3 Ultra GPU pods get their RDMA NICs (infra.kuberay.gke_networking):
  - dranet (Autopilot; A4X always): one ResourceClaim per GPU on GKE's managed DRANET device class.
  - network-mapping (GKE Standard, seed 004's "configure the network mapping"): the cluster has
    multi-networking and the GPU node pool has additional networks, a gVNIC VPC and an RDMA VPC
    with one subnet per GPU; GKENetworkParamSet + Network objects name them (gvnic-1, rdma-0..7),
    and each GPU pod asks for them with the networking.gke.io/interfaces annotation (eth0 the pod
    network, eth1 gVNIC, eth2..eth9 the RDMA rails). Those objects are the cluster's, shared by
    every run: launch applies them, down leaves them.

The pre-checks that launch runs before applying anything are checks(spec): (kubectl args, what is
missing, how to get it).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from rlaunch.config import pins
from rlaunch.errors import CheckError, ConfigError

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

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
# GKE Standard multi-networking (infra.kuberay.gke_networking=network-mapping): the object kinds and
# their CRDs (installed by --enable-multi-networking), the node's rails, the pools it applies to.
NETWORK_API = "networking.gke.io/v1"
NETWORK_CRDS = ("networks.networking.gke.io", "gkenetworkparamsets.networking.gke.io")
GVNIC_NETWORK = "gvnic-1"
RDMA_RAILS = 8  # A4 and A3 Ultra: one CX-7 RDMA NIC per GPU, eight a node
MAPPED_POOLS = ("a4", "a3-ultra")
# The fields of those kinds rlaunch may render, their CRDs' enums (GKE's multi-network API reference:
# Network spec.type L3 | Device; GKENetworkParamSet spec.deviceMode NetDevice | RDMA | DPDK-VFIO). The
# CRDs come with the cluster and are not pinned here: the plan checks this shape, the API server's
# dry run at launch the rest.
NETWORK_SPEC_FIELDS = {"GKENetworkParamSet": {"vpc", "vpcSubnet", "deviceMode"},
                       "Network": {"type", "parametersRef"}}
DEVICE_MODES = ("NetDevice", "RDMA", "DPDK-VFIO")
NETWORK_TYPES = ("L3", "Device")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A VPC name is an RFC 1035 label of at most 63 characters; the longest one made of a prefix is
# <prefix>-sub-7 (6 more).
VPC_PREFIX = re.compile(r"^[a-z]([-a-z0-9]{0,55}[a-z0-9])?$")
VPC_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
NCCL_ENV = {
    "a4x": {"NCCL_ENV_PLUGIN": "gcp"},
    "a4": {"NCCL_TUNER_CONFIG_PATH": f"{GIB}/configs/tuner_config_a4.txtpb"},
    "a3-ultra": {"NCCL_CONF_FILE": f"{GIB}/configs/nccl.a3u.conf",
                 "NCCL_TUNER_CONFIG_PATH": f"{GIB}/configs/tuner_config_a3u.txtpb"},
}


def pool(spec: Spec) -> str:
    """a4x | a4 | a3-ultra for GPU pods on GKE, "" for any other accelerator or flavor."""
    if spec.infra.k8s_flavor != "gke" or spec.cluster.gpus_per_node <= 0:
        return ""
    return POOLS.get(spec.cluster.accelerator, "")


def gib(spec: Spec) -> bool:
    """The node's gIB plugin and driver libraries are mounted into the GPU pods (RDMA on GKE)."""
    return spec.infra.k8s_flavor == "gke" and spec.infra.rdma and spec.cluster.gpus_per_node > 0


def compute_domain(spec: Spec) -> bool:
    """A4X: a ComputeDomain for the run's GPU pods (multi-node NVLink), unless infra.kuberay.imex is off."""
    return pool(spec) == "a4x" and spec.infra.kuberay.imex


def network_mapping(spec: Spec) -> bool:
    """GKE Standard A4 / A3 Ultra with RDMA: the Network objects and the pods' interfaces annotation
    instead of DRANET claims."""
    return (gib(spec) and pool(spec) in MAPPED_POOLS
            and spec.infra.kuberay.gke_networking == "network-mapping")


def dranet_nics(spec: Spec) -> int:
    """How many RDMA NICs each GPU pod claims through managed DRANET: one per GPU with RDMA on GKE,
    none where the network mapping gives the pod its NICs."""
    if spec.infra.k8s_flavor != "gke" or not spec.infra.rdma or network_mapping(spec):
        return 0
    return spec.cluster.gpus_per_node


def networks(spec: Spec) -> list[dict[str, str]]:
    """The network mapping's pairs (one GKENetworkParamSet and one Network each): name, VPC, subnet,
    deviceMode; [] unless network_mapping(spec)."""
    if not network_mapping(spec):
        return []
    kr = spec.infra.kuberay
    gvnic, rdma = kr.gvnic_network_prefix, kr.rdma_network_prefix
    out = [{"name": GVNIC_NETWORK, "vpc": f"{gvnic}-net", "subnet": f"{gvnic}-sub", "mode": "NetDevice"}]
    out += [{"name": f"rdma-{i}", "vpc": f"{rdma}-net", "subnet": f"{rdma}-sub-{i}", "mode": "RDMA"}
            for i in range(RDMA_RAILS)]
    return out


def pod_annotations(spec: Spec) -> dict[str, str]:
    """The GPU pods' multi-network annotations: eth0 stays the pod network (and the default route),
    then one interface per Network of networks(spec), in order. {} without the network mapping."""
    mapped = networks(spec)
    if not mapped:
        return {}
    interfaces = [{"interfaceName": "eth0", "network": "default"}]
    interfaces += [{"interfaceName": f"eth{i}", "network": n["name"]} for i, n in enumerate(mapped, start=1)]
    # One interface a line, as seed 004 writes it: the annotation is JSON either way.
    lines = ",\n".join("  " + json.dumps(i, separators=(",", ":")) for i in interfaces)
    return {"networking.gke.io/default-interface": "eth0", "networking.gke.io/interfaces": f"[\n{lines}\n]"}


def context(spec: Spec) -> dict[str, Any]:
    """What the templates need for the network mapping (empty lists and maps without it)."""
    return {"networks": networks(spec), "network_api": NETWORK_API, "gpu_annotations": pod_annotations(spec)}


def _network_problem(doc: dict[str, Any], params: set[Any]) -> tuple[str, str] | None:
    """(field, what it must be) for the first thing wrong with one networking.gke.io object, or None."""
    kind, meta, body = doc.get("kind"), doc.get("metadata") or {}, doc.get("spec") or {}
    if doc.get("apiVersion") != NETWORK_API or kind not in NETWORK_SPEC_FIELDS:
        return "apiVersion/kind", f"rlaunch renders {NETWORK_API} {' or '.join(NETWORK_SPEC_FIELDS)}"
    if not DNS1123.match(str(meta.get("name", ""))) or "namespace" in meta:
        return "metadata", "a DNS-1123 name and no namespace (the kind is cluster-scoped)"
    if not body or set(body) - NETWORK_SPEC_FIELDS[kind]:
        return "spec", f"the fields {', '.join(sorted(NETWORK_SPEC_FIELDS[kind]))}, not {sorted(body)}"
    if kind == "GKENetworkParamSet":
        if body.get("deviceMode") not in DEVICE_MODES:
            return "spec.deviceMode", f"one of {', '.join(DEVICE_MODES)}, not {body.get('deviceMode')!r}"
        for field in ("vpc", "vpcSubnet"):
            if not VPC_NAME.match(str(body.get(field, ""))):
                return f"spec.{field}", f"a VPC resource name, not {body.get(field)!r}"
        return None
    ref = body.get("parametersRef") or {}
    if body.get("type") not in NETWORK_TYPES:
        return "spec.type", f"one of {', '.join(NETWORK_TYPES)}, not {body.get('type')!r}"
    if (ref.get("group"), ref.get("kind")) != ("networking.gke.io", "GKENetworkParamSet") or ref.get("name") not in params:
        return "spec.parametersRef", f"a GKENetworkParamSet of this bundle ({', '.join(sorted(params))})"
    return None


def check_networks(docs: list[tuple[str, dict[str, Any]]]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The plan's check of the network mapping's objects, whose CRDs are the cluster's (not pinned):
    their shape, and every Network's parameters naming a GKENetworkParamSet of the bundle. Returns the
    other documents, for the pinned validators, and a line of what passed; CheckError names the field."""
    mine = [(where, doc) for where, doc in docs if str(doc.get("apiVersion", "")).startswith("networking.gke.io/")]
    params = {(doc.get("metadata") or {}).get("name") for _, doc in mine if doc.get("kind") == "GKENetworkParamSet"}
    for where, doc in mine:
        problem = _network_problem(doc, params)
        if problem:
            name = (doc.get("metadata") or {}).get("name", "?")
            raise CheckError("gke-network-shape", f"{where} {doc.get('kind')}/{name}: {problem[0]}: {problem[1]}")
    others = [(where, doc) for where, doc in docs if not str(doc.get("apiVersion", "")).startswith("networking.gke.io/")]
    lines = [f"{len(mine)} GKE network-mapping objects ({NETWORK_API} Network, GKENetworkParamSet): shape "
             "checked (their CRDs are the cluster's; the API server's dry run judges them at launch)"] if mine else []
    return others, lines


def rules(spec: Spec) -> None:
    """What the GKE keys refuse (the backend's rules, before anything renders)."""
    kr = spec.infra.kuberay
    if kr.gke_networking == "network-mapping":
        allowed = ("dranet unless k8s_flavor=gke, RDMA=1 and ACCELERATOR=B200 (A4) or H200 (A3 Ultra): "
                   "network-mapping is GKE Standard's networking for those pools")
        if spec.infra.k8s_flavor != "gke" or not spec.infra.rdma or pool(spec) not in MAPPED_POOLS:
            if pool(spec) == "a4x":
                allowed = "dranet on A4X (GB200): GKE makes A4X's networks and hands its RDMA NICs out through DRANET"
            raise ConfigError("infra.kuberay.gke_networking", "network-mapping", allowed)
    for key in ("gvnic_network_prefix", "rdma_network_prefix"):
        if not VPC_PREFIX.match(getattr(kr, key)):
            raise ConfigError(f"infra.kuberay.{key}", getattr(kr, key), "a VPC name prefix: lowercase letters, digits "
                              "and hyphens, starting with a letter, at most 57 characters (<prefix>-sub-7 is a "
                              "VPC subnet name)")


def nccl_env(spec: Spec) -> dict[str, str]:
    """The GPU pods' NCCL and gloo env for the node pool (RDMA on GKE only: the plugin lives in gIB)."""
    if not gib(spec):
        return {}
    env = {"LD_LIBRARY_PATH": f"{NVIDIA}/lib64:{GIB}/lib64"}
    env.update(NCCL_ENV.get(pool(spec), {}))
    if pool(spec):
        env.update({"GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"})
    return env


def checks(spec: Spec, rdma_nics: int) -> list[tuple[list[str], str, str]]:
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
    if network_mapping(spec):
        kr = spec.infra.kuberay
        gvnic, rdma = kr.gvnic_network_prefix, kr.rdma_network_prefix
        out.append((["get", "crd", *NETWORK_CRDS, "-o", "name"],
                    f"GKE multi-networking (the CRDs {' and '.join(NETWORK_CRDS)}, for the gvnic-1 and rdma-0..7 "
                    "Network objects the GPU pods attach to)",
                    "a GKE Standard cluster made as seed 004 makes it: the VPCs (gcloud compute networks create "
                    f"{gvnic}-net --subnet-mode=custom --mtu=8244; gcloud compute networks subnets create "
                    f"{gvnic}-sub --network={gvnic}-net --region=REGION --range=192.168.0.0/24; gcloud beta compute "
                    f"networks create {rdma}-net --network-profile=ZONE-vpc-roce --subnet-mode=custom; for N in "
                    f"$(seq 0 7): gcloud compute networks subnets create {rdma}-sub-$N --network={rdma}-net "
                    "--region=REGION --range=192.168.$((N+1)).0/24), the cluster with gcloud container clusters "
                    "create CLUSTER --enable-dataplane-v2 --enable-ip-alias --enable-multi-networking, and the GPU "
                    f"node pool with --additional-node-network network={gvnic}-net,subnetwork={gvnic}-sub and one "
                    f"--additional-node-network network={rdma}-net,subnetwork={rdma}-sub-N per N in 0..7 "
                    "(infra.kuberay.gvnic_network_prefix / rdma_network_prefix name them). Or SET "
                    "infra.kuberay.gke_networking=dranet (Autopilot: GKE's managed DRANET), or RDMA=0"))
    if gib(spec) and pool(spec):
        url = GIB_INSTALLER_URL.format(file=GIB_INSTALLER_FILES[pool(spec)])
        out.append((["get", "daemonset", GIB_INSTALLER, "-n", "kube-system", "-o", "name"],
                    f"the gIB NCCL plugin installer (DaemonSet kube-system/{GIB_INSTALLER}, which fills "
                    f"{HOST_GIB} on the GPU nodes; the GPU pods mount it)",
                    f"kubectl apply -f {url} (seed 004), then wait for its pods on the GPU nodes: "
                    f"kubectl -n kube-system rollout status daemonset/{GIB_INSTALLER}. Or launch without RDMA: RDMA=0"))
    return out

"""Golden cases of the KubeRay backend (INFRA=kuberay): the RayJob, storage and monitoring manifests
next to the common artifacts. Flavors and buckets come from the presets' @kuberay overlays."""

CASES = [
    ("kuberay-rehearsal", "rehearsal", {"INFRA": "kuberay"}),
    ("kuberay-rehearsal-3nodes-rdma", "rehearsal", {"INFRA": "kuberay", "NODES": "3", "RDMA": "1"}),
]

"""Every pod of a GKE A4X render (seed 004) can be placed on the nodes seed 004 creates: its
nodeSelector matches a node's labels and its tolerations cover that node's NoSchedule taints
(tests/fixtures/gke/seed004-a4x-nodes.yaml), and that node has the image's architecture."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.kuberay import backend as kr

NODES = yaml.safe_load((Path(__file__).resolve().parents[1] / "fixtures" / "gke" / "seed004-a4x-nodes.yaml").read_text())


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    """Kubernetes' ToleratesTaint: same key (or an empty key with Exists), same effect (or none), and
    Exists or an equal value."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(pod: dict) -> list[str]:
    """The pools a pod spec can be scheduled on (nodeSelector and NoSchedule taints; no affinity to nodes)."""
    selector, tolerations = pod.get("nodeSelector") or {}, pod.get("tolerations") or []
    return [n["pool"] for n in NODES
            if all(n["labels"].get(k) == v for k, v in selector.items())
            and all(tolerates(tolerations, t) for t in n["taints"] if t["effect"] in ("NoSchedule", "NoExecute"))]


def pods(files: dict) -> dict[str, dict]:
    job = yaml.safe_load(files["kuberay/rayjob.yaml"])
    cluster = job["spec"]["rayClusterSpec"]
    out = {"submitter": job["spec"]["submitterPodTemplate"]["spec"],
           "head": cluster["headGroupSpec"]["template"]["spec"]}
    out.update({f"worker {g['groupName']}": g["template"]["spec"] for g in cluster["workerGroupSpecs"]})
    if "kuberay/inputs.yaml" in files:
        out["inputs"] = yaml.safe_load(files["kuberay/inputs.yaml"])["spec"]["template"]["spec"]
    return out


@pytest.mark.parametrize("sets", ["", "cluster.cpu_head=true"], ids=["gpu-head", "cpu-head"])
def test_every_pod_of_the_a4x_render_can_be_placed_on_seed_004s_nodes(sets):
    spec = config.load("verl-grpo-gsm8k-32b", {"INFRA": "kuberay", "RUN_ID": "t1"}, sets)
    assert spec.cluster.accelerator == "GB200" and spec.infra.k8s_flavor == "gke"
    files = artifacts.finish(spec, kr.BACKEND.render(spec))
    found = pods(files)
    assert {"submitter", "head", "inputs"} <= set(found), sorted(found)
    for role, pod in found.items():
        # The image is arm64-only: the A4X pool is the one place for each of them, GPUs or not.
        assert fits(pod) == ["a4x"], (role, pod.get("nodeSelector"), pod.get("tolerations"))


def test_a_cpu_pod_without_the_seeds_tolerations_would_stay_pending():
    """The check above can fail: the arm64 selector alone (what the head had before) fits no node."""
    assert fits({"nodeSelector": {"kubernetes.io/arch": "arm64"}}) == []
    assert fits({}) == ["default-pool"]

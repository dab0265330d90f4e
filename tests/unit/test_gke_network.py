"""GKE Standard A4 / A3 Ultra networking (seed 004's "configure the network mapping"): the Network and
GKENetworkParamSet objects, the GPU pods' multi-network annotations, what refuses them, the plan's
shape check of objects whose CRDs are the cluster's, and launch's pre-check. Pure: no kubectl (the
launch's calls are tests/bats/kuberay.bats')."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from rlaunch.backends.kuberay import backend as kr
from rlaunch.backends.kuberay import gke, manifests
from rlaunch.config import load as config
from rlaunch.errors import CheckError, ConfigError
from rlaunch.plan import artifacts

GKE_BUCKET = "storage.source=gs://bkt/run-data"
STANDARD = f"{GKE_BUCKET} infra.kuberay.gke_networking=network-mapping"
A3U = {"K8S_FLAVOR": "gke", "RDMA": "1", "GPUS_PER_NODE": "8", "ACCELERATOR": "H200", "NODES": "2"}
RAILS = [f"rdma-{i}" for i in range(8)]


def render(sets: str = "", preset: str = "rehearsal", **knobs):
    spec = config.load(preset, {"INFRA": "kuberay", "RUN_ID": "t1", **knobs}, sets)
    return spec, artifacts.finish(spec, kr.BACKEND.render(spec))


def objects(files: dict) -> list[dict]:
    return [d for d in yaml.safe_load_all(files["kuberay/network.yaml"]) if d]


def pods(files: dict) -> dict[str, dict]:
    job = yaml.safe_load(files["kuberay/rayjob.yaml"])["spec"]
    cluster = job["rayClusterSpec"]
    out = {"head": cluster["headGroupSpec"]["template"], "submitter": job["submitterPodTemplate"]}
    if cluster.get("workerGroupSpecs"):
        out["worker"] = cluster["workerGroupSpecs"][0]["template"]
    return out


def interfaces(pod: dict) -> list[dict] | None:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    if "networking.gke.io/interfaces" not in annotations:
        return None
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    return json.loads(annotations["networking.gke.io/interfaces"])


def test_standard_a3_ultra_renders_the_network_mapping_with_the_configured_vpcs():
    _, files = render(f"{STANDARD} infra.kuberay.gvnic_network_prefix=a3u-gvnic "
                      "infra.kuberay.rdma_network_prefix=a3u-rdma", **A3U)
    docs = objects(files)
    params = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "GKENetworkParamSet"}
    nets = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Network"}
    assert {d["apiVersion"] for d in docs} == {"networking.gke.io/v1"}
    assert list(params) == list(nets) == ["gvnic-1", *RAILS]
    assert params["gvnic-1"] == {"vpc": "a3u-gvnic-net", "vpcSubnet": "a3u-gvnic-sub", "deviceMode": "NetDevice"}
    for i, rail in enumerate(RAILS):
        assert params[rail] == {"vpc": "a3u-rdma-net", "vpcSubnet": f"a3u-rdma-sub-{i}", "deviceMode": "RDMA"}
    for name, spec in nets.items():
        assert spec == {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                            "name": name}}
    for d in docs:  # the cluster's, shared by every run: no namespace, no run label (down leaves them)
        assert "namespace" not in d["metadata"]
        assert d["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "rlaunch"}
    # applied with the rest, before the inputs Job and the RayJob
    assert manifests.manifest_files(files).index("kuberay/network.yaml") < manifests.manifest_files(files).index("kuberay/rayjob.yaml")


def test_seed_defaults_name_the_vpcs_gvnic_and_rdma():
    _, files = render(STANDARD, **A3U)
    params = {d["metadata"]["name"]: d["spec"] for d in objects(files) if d["kind"] == "GKENetworkParamSet"}
    assert (params["gvnic-1"]["vpc"], params["rdma-7"]["vpcSubnet"]) == ("gvnic-net", "rdma-sub-7")


def test_gpu_pods_attach_every_mapped_network_in_order_and_claim_no_dranet_nic():
    _, files = render(STANDARD, **A3U)
    names = [d["metadata"]["name"] for d in objects(files) if d["kind"] == "Network"]
    want = [{"interfaceName": "eth0", "network": "default"}]
    want += [{"interfaceName": f"eth{i}", "network": name} for i, name in enumerate(names, start=1)]
    assert want[1] == {"interfaceName": "eth1", "network": "gvnic-1"}
    assert want[-1] == {"interfaceName": "eth9", "network": "rdma-7"}
    for role in ("head", "worker"):  # a GPU head is one of the 2 nodes
        pod = pods(files)[role]
        assert interfaces(pod) == want, role
        assert "resourceClaims" not in pod["spec"]
        assert "claims" not in pod["spec"]["containers"][0]["resources"]
    assert interfaces(pods(files)["submitter"]) is None
    assert "kuberay/rdma.yaml" not in files and "rdma-nic" not in files["kuberay/rayjob.yaml"]
    # the gIB plugin and A3 Ultra's NCCL files stay, as with DRANET
    env = {e["name"]: e.get("value") for e in pods(files)["worker"]["spec"]["containers"][0]["env"]}
    assert env["NCCL_CONF_FILE"] == "/usr/local/gib/configs/nccl.a3u.conf"


def test_a_cpu_only_head_carries_no_network_annotations():
    _, files = render(STANDARD, preset="verl-grpo-gsm8k-32b", ACCELERATOR="H200", GPUS_PER_NODE="8")
    assert interfaces(pods(files)["head"]) is None
    assert len(interfaces(pods(files)["worker"])) == 10
    assert "networking.gke.io" not in files["kuberay/inputs.yaml"]


@pytest.mark.parametrize("accelerator", ["H200", "B200"])
def test_dranet_stays_the_default_autopilots_claims_and_no_annotations(accelerator):
    _, files = render(GKE_BUCKET, **{**A3U, "ACCELERATOR": accelerator})
    assert "kuberay/network.yaml" not in files and "kuberay/rdma.yaml" in files
    assert "networking.gke.io/interfaces" not in files["kuberay/rayjob.yaml"]
    claims = [c["name"] for c in pods(files)["worker"]["spec"]["resourceClaims"]]
    assert claims == [f"rdma-nic-{i}" for i in range(8)]


def test_a4_standard_maps_the_same_networks():
    _, files = render(STANDARD, **{**A3U, "ACCELERATOR": "B200"})
    assert len(objects(files)) == 18 and len(interfaces(pods(files)["worker"])) == 10


@pytest.mark.parametrize(("sets", "knobs", "key", "allowed"), [
    (STANDARD, {**A3U, "ACCELERATOR": "GB200", "GPUS_PER_NODE": "4"}, "infra.kuberay.gke_networking",
     "dranet on A4X"),
    (STANDARD, {**A3U, "RDMA": "0"}, "infra.kuberay.gke_networking", "RDMA=1"),
    ("infra.kuberay.gke_networking=network-mapping", {**A3U, "K8S_FLAVOR": "generic"},
     "infra.kuberay.gke_networking", "k8s_flavor=gke"),
    (STANDARD, {**A3U, "ACCELERATOR": "H100"}, "infra.kuberay.gke_networking", "B200 (A4) or H200 (A3 Ultra)"),
    (f"{STANDARD} infra.kuberay.rdma_network_prefix=RDMA_net", A3U, "infra.kuberay.rdma_network_prefix",
     "lowercase letters"),
    (f"{STANDARD} infra.kuberay.gvnic_network_prefix={'g' * 58}", A3U, "infra.kuberay.gvnic_network_prefix",
     "at most 57"),
], ids=["a4x", "no-rdma", "not-gke", "h100", "prefix-case", "prefix-length"])
def test_refused_combinations_name_the_key_the_value_and_what_is_allowed(sets, knobs, key, allowed):
    with pytest.raises(ConfigError) as err:
        render(sets, **knobs)
    assert err.value.key == key
    assert allowed in str(err.value)


def test_an_unknown_networking_value_names_the_allowed_ones():
    with pytest.raises(ConfigError) as err:
        render(f"{GKE_BUCKET} infra.kuberay.gke_networking=standard", **A3U)
    assert err.value.key == "infra.kuberay.gke_networking"
    assert "standard" in str(err.value) and "dranet" in str(err.value) and "network-mapping" in str(err.value)


# ---------------------------------------------------------------- the plan's shape check


def _bundle() -> list[tuple[str, dict]]:
    _, files = render(STANDARD, **A3U)
    return manifests.documents(files)


def test_shape_check_passes_the_rendered_mapping_and_hands_the_rest_on():
    docs = _bundle()
    rest, lines = gke.check_networks(docs)
    assert len(docs) - len(rest) == 18
    assert {d["kind"] for _, d in rest} >= {"RayJob", "PersistentVolume"}
    assert not any(d["apiVersion"].startswith("networking.gke.io/") for _, d in rest)
    assert lines == ["18 GKE network-mapping objects (networking.gke.io/v1 Network, GKENetworkParamSet): shape "
                     "checked (their CRDs are the cluster's; the API server's dry run judges them at launch)"]
    assert gke.check_networks([(w, d) for w, d in docs if not w.startswith("kuberay/network.yaml")])[1] == []


def _broken(kind: str, name: str, change) -> list[tuple[str, dict]]:
    docs = copy.deepcopy(_bundle())
    doc = next(d for _, d in docs if d.get("kind") == kind and d["metadata"]["name"] == name)
    change(doc)
    return docs


@pytest.mark.parametrize(("kind", "name", "change", "field"), [
    ("GKENetworkParamSet", "rdma-3", lambda d: d["spec"].update(deviceMode="Rdma"), "spec.deviceMode"),
    ("GKENetworkParamSet", "gvnic-1", lambda d: d["spec"].update(vpc="Gvnic_Net"), "spec.vpc"),
    ("GKENetworkParamSet", "rdma-0", lambda d: d["spec"].update(mtu=8896), "spec"),
    ("Network", "rdma-7", lambda d: d["spec"]["parametersRef"].update(name="rdma-8"), "spec.parametersRef"),
    ("Network", "rdma-1", lambda d: d["spec"].update(type="L2"), "spec.type"),
    ("Network", "gvnic-1", lambda d: d["metadata"].update(namespace="default"), "metadata"),
    ("Network", "rdma-2", lambda d: d.update(apiVersion="networking.gke.io/v1beta1"), "apiVersion/kind"),
], ids=["device-mode", "vpc-name", "unknown-field", "dangling-ref", "network-type", "namespaced", "api-version"])
def test_shape_check_names_the_wrong_field(kind, name, change, field):
    with pytest.raises(CheckError) as err:
        gke.check_networks(_broken(kind, name, change))
    assert f"{kind}/{name}: {field}:" in str(err.value)


def test_backend_check_validates_the_rest_against_the_pinned_schemas(crds, monkeypatch):
    from rlaunch.registry import frameworks

    monkeypatch.setenv("RLAUNCH_KUBECTL", "rlaunch-test-no-such-kubectl")
    monkeypatch.setattr(type(frameworks.get("trl")), "loader_check", lambda self, spec, files: "loader ok")
    spec, files = render(STANDARD, **A3U)
    text = "\n".join(kr.BACKEND.check(spec, files))
    assert "RayJob/" in text and "PersistentVolume/" in text
    assert "18 GKE network-mapping objects" in text


# ---------------------------------------------------------------- launch's pre-checks


def test_launch_checks_multi_networking_and_the_standard_gib_installer_not_dranet():
    spec, _ = render(f"{STANDARD} infra.kuberay.rdma_network_prefix=a3u-rdma", **A3U)
    checks = gke.checks(spec, gke.dranet_nics(spec))
    assert [args for args, _, _ in checks] == [
        ["get", "crd", "networks.networking.gke.io", "gkenetworkparamsets.networking.gke.io", "-o", "name"],
        ["get", "daemonset", "nccl-rdma-installer", "-n", "kube-system", "-o", "name"],
    ]
    _, what, how = checks[0]
    assert "GKE multi-networking" in what
    for part in ("--enable-multi-networking", "--network-profile=ZONE-vpc-roce", "a3u-rdma-sub-$N",
                 "--additional-node-network network=a3u-rdma-net", "infra.kuberay.gke_networking=dranet", "RDMA=0"):
        assert part in how, part
    assert checks[1][2].startswith("kubectl apply -f https://raw.githubusercontent.com/GoogleCloudPlatform/"
                                   "container-engine-accelerators/master/gpudirect-rdma/nccl-rdma-installer.yaml")
    plan = "\n".join(kr.BACKEND.plan(spec, artifacts.finish(spec, kr.BACKEND.render(spec))))
    assert "GKE multi-networking, gIB NCCL plugin installer" in plan

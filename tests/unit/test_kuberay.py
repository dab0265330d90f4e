"""INFRA=kuberay rendering: focused assertions ("setting X puts Y at path Z") on the RayJob, its
storage, secrets, RDMA and monitoring, and the errors a bad combination gets. Pure: no kubectl."""

from __future__ import annotations

import base64
import json
import os

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.kuberay import backend as kr
from rlaunch.backends.kuberay import manifests
from rlaunch.backends.kuberay import names
from rlaunch.errors import CheckError, ConfigError, MissingPrerequisite
from rlaunch.validate import kuberay as validate

GKE_BUCKET = "storage.source=gs://bkt/run-data"
VKE_TOS = ("storage.source=tos://bkt infra.kuberay.object_store_endpoint=https://tos.example "
           "infra.kuberay.object_store_secret=tos-keys")


def render(sets: str = "", preset: str = "rehearsal", **knobs):
    spec = config.load(preset, {"INFRA": "kuberay", "RUN_ID": "t1", **knobs}, sets)
    return spec, artifacts.finish(spec, kr.BACKEND.render(spec))


def rayjob(files: dict) -> dict:
    return yaml.safe_load(files["kuberay/rayjob.yaml"])


def cluster(files: dict) -> dict:
    return rayjob(files)["spec"]["rayClusterSpec"]


def head_pod(files: dict) -> dict:
    return cluster(files)["headGroupSpec"]["template"]


def worker_group(files: dict) -> dict:
    return cluster(files)["workerGroupSpecs"][0]


def container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def env_of(pod: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(pod)["env"]}


def mounts(pod: dict) -> dict:
    return {m["mountPath"]: m["name"] for m in container(pod)["volumeMounts"]}


def volumes(pod: dict) -> dict:
    return {v["name"]: v for v in pod["spec"]["volumes"]}


# ---------------------------------------------------------------- shape of the Ray cluster


def test_gpus_per_node_8_puts_8_gpus_in_the_worker_limits_and_requests():
    _, files = render(GPUS_PER_NODE="8", ACCELERATOR="H100")
    res = container(worker_group(files)["template"])["resources"]
    assert res["limits"]["nvidia.com/gpu"] == 8
    assert res["requests"] == res["limits"]  # requests == limits, cpu and memory included
    assert res["limits"]["cpu"] == "2" and res["limits"]["memory"] == "6Gi"


def test_gpu_head_counts_as_a_node_and_cpu_head_adds_one():
    _, files = render(NODES="3", GPUS_PER_NODE="2", ACCELERATOR="A100")
    group = worker_group(files)
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)
    assert container(head_pod(files))["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert "num-cpus" not in cluster(files)["headGroupSpec"]["rayStartParams"]

    _, files = render("cluster.cpu_head=true infra.kuberay.head_cpus=12", NODES="3", GPUS_PER_NODE="2",
                      ACCELERATOR="A100")
    head = cluster(files)["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert worker_group(files)["replicas"] == 3
    limits = container(head["template"])["resources"]["limits"]
    assert "nvidia.com/gpu" not in limits and limits["cpu"] == "12"
    assert "affinity" not in head["template"]["spec"]  # the CPU head may share a host


def test_cpu_head_keeps_ray_cpus_where_the_framework_needs_them_on_the_head():
    # verl's TransferQueue needs >= 10 Ray CPUs on the head (rlaunch.verify.preflight.CPU_RULES).
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "t1", "FRAMEWORK": "verl"},
                       "cluster.cpu_head=true infra.kuberay.head_cpus=12", rules=False)
    head, _ = manifests._groups(spec)
    assert head["params"]["num-cpus"] == "12"
    with pytest.raises(ConfigError, match="infra.kuberay.head_cpus"):
        config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "t1", "FRAMEWORK": "verl"},
                    "cluster.cpu_head=true infra.kuberay.head_cpus=8", rules=False)


def test_one_node_without_cpu_head_has_no_worker_group():
    _, files = render(NODES="1")
    assert "workerGroupSpecs" not in cluster(files)


def test_head_listens_on_all_interfaces_and_every_ray_start_param_is_a_string():
    _, files = render("cluster.cpu_head=true cluster.dashboard_port=8266")
    params = cluster(files)["headGroupSpec"]["rayStartParams"]
    assert params["dashboard-host"] == "0.0.0.0"
    assert params["dashboard-port"] == "8266"
    assert all(isinstance(v, str) for v in params.values())
    ports = {p["name"]: p["containerPort"] for p in container(head_pod(files))["ports"]}
    assert ports["dashboard"] == 8266 and ports["gcs-server"] == 6379


def test_anti_affinity_selects_exactly_the_gpu_pods_one_per_host():
    _, files = render(GPUS_PER_NODE="4", ACCELERATOR="H100")
    for pod in (head_pod(files), worker_group(files)["template"]):
        term = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        selector = term["labelSelector"]["matchLabels"]
        labels = pod["metadata"]["labels"]
        assert selector.items() <= labels.items(), "the selector must match the pod's own labels"
        assert selector["rlaunch.io/run"] == "t1"


def test_every_pod_has_memory_backed_shm_logs_and_the_shared_volume_at_the_mount():
    spec, files = render("cluster.memory_gb=600", GPUS_PER_NODE="4", ACCELERATOR="H100")
    for pod in (head_pod(files), worker_group(files)["template"]):
        at = mounts(pod)
        assert at["/dev/shm"] == "shm" and at[spec.storage.mount] == "shared"
        vols = volumes(pod)
        assert vols["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "200Gi"}
        assert vols["shared"]["persistentVolumeClaim"]["claimName"] == "t1-data"
    # Data and checkpoints are under the mount, i.e. on the shared volume, not in a pod.
    assert spec.paths.ckpt_dir.startswith(spec.storage.mount + "/")
    assert spec.paths.data_dir.startswith(spec.storage.mount + "/")


def test_gpu_pods_tolerate_the_gpu_taint_and_cpu_pods_do_not_need_to():
    _, files = render(GPUS_PER_NODE="1", ACCELERATOR="L4")
    taints = worker_group(files)["template"]["spec"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in taints
    _, files = render()
    assert "tolerations" not in worker_group(files)["template"]["spec"]


def test_extra_node_selector_from_config_and_a_bad_entry_names_the_key():
    _, files = render("infra.kuberay.node_selector=[pool=gpu-a]", GPUS_PER_NODE="1", ACCELERATOR="L4")
    # the image's architecture too: every pod runs on nodes of its image's arch (issue 15)
    assert worker_group(files)["template"]["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64",
                                                                      "pool": "gpu-a"}
    with pytest.raises(ConfigError, match="infra.kuberay.node_selector"):
        render("infra.kuberay.node_selector=[nolabel]", GPUS_PER_NODE="1", ACCELERATOR="L4")


# ---------------------------------------------------------------- the job


def test_rayjob_lifecycle_fields_come_from_the_config():
    _, files = render("infra.kuberay.ttl_seconds_after_finished=60 infra.kuberay.active_deadline_seconds=7200 "
                      "infra.kuberay.backoff_limit=2")
    spec = rayjob(files)["spec"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert (spec["ttlSecondsAfterFinished"], spec["activeDeadlineSeconds"], spec["backoffLimit"]) == (60, 7200, 2)
    assert spec["submissionMode"] == "K8sJobMode" and spec["jobId"] == "t1"


def test_entrypoint_runs_job_sh_from_the_artifacts_configmap_on_every_pod():
    spec, files = render()
    job = rayjob(files)["spec"]
    assert job["entrypoint"] == f"bash {manifests.ARTIFACTS_MOUNT}/job.sh"
    items = {i["path"] for i in volumes(head_pod(files))["artifacts"]["configMap"]["items"]}
    assert items == {"job.sh", "spec.json", "trl.json"}  # everything artifacts.common renders
    for pod in (head_pod(files), worker_group(files)["template"], job["submitterPodTemplate"]):
        assert manifests.ARTIFACTS_MOUNT in {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    cm = manifests.configmap_manifest(spec, files)
    assert set(cm["data"]) == {"job.sh", "spec.json", "trl.json"}
    assert cm["data"]["job.sh"] == files["job.sh"]  # byte for byte what plan wrote


def test_runtime_env_ships_the_artifacts_and_the_jobs_env():
    _, files = render()
    runtime = yaml.safe_load(rayjob(files)["spec"]["runtimeEnvYAML"])
    assert runtime["working_dir"] == manifests.ARTIFACTS_MOUNT
    assert runtime["env_vars"]["RLAUNCH_HOME"] == manifests.RLAUNCH_HOME
    assert runtime["env_vars"]["NCCL_IB_DISABLE"] == "1"  # no RDMA
    assert all(isinstance(v, str) for v in runtime["env_vars"].values())


def test_provenance_stays_with_the_plan_and_the_plans_configmap_line_says_what_travels():
    spec, finished = render()  # what plan writes: PROVENANCE beside the JSON files
    assert artifacts.PROVENANCE in finished
    assert set(manifests.configmap_manifest(spec, finished)["data"]) == {"job.sh", "spec.json", "trl.json"}
    assert {i["path"] for i in manifests.configmap_items(spec, finished)} == {"job.sh", "spec.json", "trl.json"}
    line = next(line for line in kr.BACKEND.plan(spec, finished) if "ConfigMap t1-artifacts" in line)
    assert "(job.sh, spec.json, trl.json)" in line


def test_framework_files_in_a_subfolder_get_a_flat_configmap_key():
    assert manifests.configmap_key("conf/rlinf.yaml") == "conf__rlinf.yaml"
    items = manifests.configmap_items({}, {"conf/rlinf.yaml": "", "kuberay/rayjob.yaml": ""})
    assert items == [{"key": "conf__rlinf.yaml", "path": "conf/rlinf.yaml"}]


def test_the_rlaunch_image_is_required():
    with pytest.raises(ConfigError, match="framework.image"):
        render("framework.image=official")


def test_rayjob_name_is_a_dns1035_label_even_for_a_numeric_run_id():
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "42-a"})
    assert names.job_name(spec) == "r42-a"
    assert validate.DNS1035.match(names.job_name(spec))


# ---------------------------------------------------------------- secrets


def test_secrets_are_referenced_by_name_and_their_values_are_never_rendered(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "sekret-value")
    spec, files = render("secrets=[WANDB_API_KEY,HF_TOKEN]")
    for pod in (head_pod(files), worker_group(files)["template"]):
        ref = env_of(pod)["WANDB_API_KEY"]["secretKeyRef"]
        assert ref == {"name": "t1-secrets", "key": "WANDB_API_KEY"}
        assert env_of(pod)["HF_TOKEN"]["secretKeyRef"]["key"] == "HF_TOKEN"
    encoded = base64.b64encode(b"sekret-value").decode()
    for rel, text in files.items():
        assert "sekret-value" not in text and encoded not in text, rel
    plan = "\n".join(kr.BACKEND.plan(spec, files))
    assert "sekret-value" not in plan and "$WANDB_API_KEY" in plan


def test_secret_manifest_carries_the_value_and_a_missing_one_names_the_variable():
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": "t1"}, "secrets=[WANDB_API_KEY]")
    doc = manifests.secret_manifest(spec, {"WANDB_API_KEY": "sekret-value"})
    assert base64.b64decode(doc["data"]["WANDB_API_KEY"]) == b"sekret-value"
    assert doc["metadata"]["labels"]["rlaunch.io/run"] == "t1"  # down finds it by label
    with pytest.raises(MissingPrerequisite, match="WANDB_API_KEY"):
        manifests.secret_manifest(spec, {})


# ---------------------------------------------------------------- storage per flavor


def test_gke_bucket_is_a_gcsfuse_volume_with_annotation_and_service_account():
    _, files = render(f"{GKE_BUCKET} infra.kuberay.service_account=ksa", K8S_FLAVOR="gke")
    pv, pvc = list(yaml.safe_load_all(files["kuberay/storage.yaml"]))
    assert pv["spec"]["csi"] == {"driver": manifests.GCSFUSE_CSI_DRIVER, "volumeHandle": "bkt"}
    assert "only-dir=run-data" in pv["spec"]["mountOptions"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    for pod in (head_pod(files), worker_group(files)["template"]):
        assert pod["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
        assert pod["spec"]["serviceAccountName"] == "ksa"
    assert "kuberay/serviceaccount.yaml" not in files  # an existing KSA is used, not created


def test_gke_workload_identity_renders_the_annotated_service_account():
    _, files = render(f"{GKE_BUCKET} infra.kuberay.gcp_service_account=trainer@p.iam.gserviceaccount.com",
                      K8S_FLAVOR="gke")
    sa = yaml.safe_load(files["kuberay/serviceaccount.yaml"])
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": "trainer@p.iam.gserviceaccount.com"}
    assert head_pod(files)["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert "rlaunch.io/run" not in sa["metadata"]["labels"]  # shared by runs: down keeps it


def test_gke_gpu_pods_select_the_accelerator_node_pool():
    _, files = render(GKE_BUCKET, K8S_FLAVOR="gke", GPUS_PER_NODE="8", ACCELERATOR="H200")
    selector = worker_group(files)["template"]["spec"]["nodeSelector"]
    assert selector == {"kubernetes.io/arch": "amd64", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
    with pytest.raises(ConfigError, match="cluster.accelerator"):
        render(GKE_BUCKET, K8S_FLAVOR="gke", GPUS_PER_NODE="8", ACCELERATOR="H9000")


def test_vke_tos_bucket_is_a_csi_volume_with_endpoint_and_key_secret():
    _, files = render(VKE_TOS, K8S_FLAVOR="vke")
    pv, _ = list(yaml.safe_load_all(files["kuberay/storage.yaml"]))
    csi = pv["spec"]["csi"]
    assert csi["driver"] == manifests.TOS_CSI_DRIVER
    assert csi["volumeAttributes"] == {"url": "https://tos.example", "bucket": "bkt", "path": "/"}
    assert csi["nodePublishSecretRef"] == {"name": "tos-keys", "namespace": "default"}
    with pytest.raises(ConfigError, match="infra.kuberay.object_store_endpoint"):
        render("storage.source=tos://bkt", K8S_FLAVOR="vke")


def test_existing_pvc_is_mounted_as_is_and_nothing_is_created():
    _, files = render("storage.pvc=team-rwx", K8S_FLAVOR="gke")
    assert "kuberay/storage.yaml" not in files
    assert volumes(head_pod(files))["shared"]["persistentVolumeClaim"]["claimName"] == "team-rwx"


def test_generic_without_a_pvc_claims_a_new_rwx_volume():
    _, files = render("cluster.disk_gb=50")
    pvc = yaml.safe_load(files["kuberay/storage.yaml"])
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"


@pytest.mark.parametrize(("flavor", "sets", "key"), [
    ("generic", "storage.source=s3://bkt", "storage.source"),
    ("gke", "storage.source=tos://bkt", "storage.source"),
    ("gke", "", "storage.source"),
    ("vke", "storage.source=gs://bkt", "storage.source"),
    ("gke", "storage.bucket=new storage.store=gcs", "storage.bucket"),
    ("generic", "storage.pvc=x storage.source=gs://bkt", "storage.source"),
])
def test_storage_that_does_not_fit_the_flavor_names_the_key(flavor, sets, key):
    with pytest.raises(ConfigError) as err:
        render(sets, K8S_FLAVOR=flavor)
    assert err.value.key == key


# ---------------------------------------------------------------- RDMA and monitoring


def test_rdma_adds_ipc_lock_and_on_gke_one_nic_claim_per_gpu():
    # (the NIC claims alone: A4X's IMEX channel claim is test_a4x_gpu_pods_claim_the_imex_channel...)
    _, files = render(f"{GKE_BUCKET} infra.kuberay.imex=false", K8S_FLAVOR="gke", RDMA="1", GPUS_PER_NODE="4",
                      ACCELERATOR="GB200")
    pod = worker_group(files)["template"]
    assert container(pod)["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    claims = [c["name"] for c in container(pod)["resources"]["claims"]]
    assert claims == [f"rdma-nic-{i}" for i in range(4)]
    assert {c["name"] for c in pod["spec"]["resourceClaims"]} == set(claims)
    template = yaml.safe_load(files["kuberay/rdma.yaml"])
    assert {c["resourceClaimTemplateName"] for c in pod["spec"]["resourceClaims"]} == {template["metadata"]["name"]}
    assert "NCCL_IB_DISABLE" not in env_of(pod)
    _, files = render(RDMA="1", GPUS_PER_NODE="4", ACCELERATOR="H100")  # generic: capability only
    assert "kuberay/rdma.yaml" not in files
    assert container(worker_group(files)["template"])["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]


A4X = (GKE_BUCKET, {"K8S_FLAVOR": "gke", "RDMA": "1", "GPUS_PER_NODE": "4", "ACCELERATOR": "GB200", "NODES": "3"})


def test_a4x_gpu_pods_claim_the_imex_channel_of_the_runs_compute_domain():
    _, files = render(A4X[0], **A4X[1])
    domain = yaml.safe_load(files["kuberay/computedomain.yaml"])
    assert (domain["apiVersion"], domain["kind"]) == ("resource.nvidia.com/v1beta1", "ComputeDomain")
    assert domain["spec"]["numNodes"] == 3  # every GPU pod's node joins the IMEX domain
    assert domain["metadata"]["labels"]["rlaunch.io/run"] == "t1"  # make down deletes it by label
    channel = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    for pod in (head_pod(files), worker_group(files)["template"]):  # a GPU head is one of the 3
        claims = {c["name"]: c["resourceClaimTemplateName"] for c in pod["spec"]["resourceClaims"]}
        assert claims["compute-domain-channel"] == channel
        assert "compute-domain-channel" in [c["name"] for c in container(pod)["resources"]["claims"]]
    _, files = render(f"{A4X[0]} infra.kuberay.imex=false", **A4X[1])
    assert "kuberay/computedomain.yaml" not in files
    assert "compute-domain-channel" not in files["kuberay/rayjob.yaml"]
    _, files = render(GKE_BUCKET, K8S_FLAVOR="gke", RDMA="1", GPUS_PER_NODE="8", ACCELERATOR="H200")
    assert "kuberay/computedomain.yaml" not in files  # A3 Ultra: no NVL72 rack, no IMEX


@pytest.mark.parametrize(("accelerator", "gpus", "want", "lacks"), [
    ("GB200", "4", {"NCCL_ENV_PLUGIN": "gcp", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"},
     ["NCCL_CONF_FILE", "NCCL_TUNER_CONFIG_PATH"]),
    ("H200", "8", {"NCCL_CONF_FILE": "/usr/local/gib/configs/nccl.a3u.conf",
                   "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb",
                   "GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}, ["NCCL_ENV_PLUGIN"]),
    ("B200", "8", {"NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a4.txtpb"},
     ["NCCL_ENV_PLUGIN", "NCCL_CONF_FILE"]),
    ("H100", "8", {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/gib/lib64"},
     ["NCCL_ENV_PLUGIN", "NCCL_CONF_FILE", "NCCL_TUNER_CONFIG_PATH", "GLOO_SOCKET_IFNAME"]),
], ids=["a4x", "a3-ultra", "a4", "other"])
def test_gke_nccl_env_follows_the_kind_of_node_pool(accelerator, gpus, want, lacks):
    _, files = render(GKE_BUCKET, K8S_FLAVOR="gke", RDMA="1", GPUS_PER_NODE=gpus, ACCELERATOR=accelerator)
    pod = worker_group(files)["template"]
    env = env_of(pod)
    assert {k: env.get(k) for k in want} == want
    assert not set(lacks) & set(env)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/gib/lib64"
    assert mounts(pod)["/usr/local/gib"] == "gib" and mounts(pod)["/usr/local/nvidia"] == "nvidia"
    assert volumes(pod)["nvidia"]["hostPath"]["path"] == "/home/kubernetes/bin/nvidia"
    _, files = render(GKE_BUCKET, K8S_FLAVOR="gke", GPUS_PER_NODE=gpus, ACCELERATOR=accelerator)  # no RDMA
    env = env_of(worker_group(files)["template"])
    assert env["NCCL_IB_DISABLE"] == "1" and not {"NCCL_ENV_PLUGIN", "NCCL_CONF_FILE", "LD_LIBRARY_PATH"} & set(env)


def test_ephemeral_storage_requests_for_gpu_pods_and_the_cpu_only_head():
    _, files = render("infra.kuberay.ephemeral_storage_gb=500 infra.kuberay.head_ephemeral_storage_gb=20 "
                      "cluster.cpu_head=true", GPUS_PER_NODE="2", ACCELERATOR="A100")
    worker = container(worker_group(files)["template"])["resources"]
    head = container(head_pod(files))["resources"]
    assert worker["requests"]["ephemeral-storage"] == worker["limits"]["ephemeral-storage"] == "500Gi"
    assert head["requests"]["ephemeral-storage"] == head["limits"]["ephemeral-storage"] == "20Gi"
    _, files = render()
    assert "ephemeral-storage" not in files["kuberay/rayjob.yaml"]  # 0: none requested


def test_without_rdma_nccl_ib_is_disabled_in_every_pod():
    _, files = render()
    assert env_of(worker_group(files)["template"])["NCCL_IB_DISABLE"] == "1"
    assert "securityContext" not in container(worker_group(files)["template"])


def test_podmonitors_scrape_ports_the_pods_really_expose():
    _, files = render(f"monitoring.podmonitors=true {VKE_TOS}", K8S_FLAVOR="vke")
    head_mon, worker_mon = list(yaml.safe_load_all(files["kuberay/podmonitors.yaml"]))
    head_ports = {p["name"] for p in container(head_pod(files))["ports"]}
    worker_ports = {p["name"] for p in container(worker_group(files)["template"])["ports"]}
    assert [e["port"] for e in head_mon["spec"]["podMetricsEndpoints"]] == ["metrics", "as-metrics", "dash-metrics"]
    assert {e["port"] for e in head_mon["spec"]["podMetricsEndpoints"]} <= head_ports
    assert {e["port"] for e in worker_mon["spec"]["podMetricsEndpoints"]} <= worker_ports
    assert head_mon["spec"]["selector"]["matchLabels"]["ray.io/node-type"] == "head"
    assert head_mon["spec"]["selector"]["matchLabels"]["rlaunch.io/run"] == "t1"
    assert head_mon["metadata"]["labels"]["volcengine.vmp"] == "true"  # VKE's managed Prometheus
    _, files = render()
    assert "kuberay/podmonitors.yaml" not in files


def test_grafana_dashboard_is_rays_own_for_this_runs_cluster():
    spec, files = render(f"monitoring.grafana_dashboard=true {VKE_TOS}", K8S_FLAVOR="vke")
    cm = yaml.safe_load(files["kuberay/grafana.yaml"])
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["labels"]["rlaunch.io/run"] == "t1"  # make down deletes it with the run
    (name, text), = cm["data"].items()
    board = json.loads(text)
    assert name == "ray-t1.json" and board["uid"] == "rlaunch-t1" and board["title"] == "Ray: rlaunch run t1"
    assert f"rayVersion:{spec.pins.ray}" in board["tags"]  # Ray's generator at the pinned Ray
    from ray.dashboard.modules.metrics import grafana_dashboard_factory as factory

    rays, _ = factory.generate_default_grafana_dashboard()
    assert [p["title"] for p in board["panels"]] == [p["title"] for p in json.loads(rays)["panels"]]
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", []) if "{" in t["expr"]]  # not "100"
    assert len(exprs) > 40 and all('ray_io_cluster=~"t1-[a-z0-9]{5}"' in e for e in exprs)  # this run's cluster
    assert "RAY_GRAFANA_DEFAULT_DASHBOARD_GLOBAL_FILTERS" not in os.environ  # render left no trace
    _, files = render()
    assert "kuberay/grafana.yaml" not in files


def test_dashboard_ingress_routes_to_the_head_services_dashboard_port_when_asked():
    spec, files = render("monitoring.dashboard_ingress=true monitoring.ingress_class=alb "
                         "monitoring.ingress_host=ray.example.com cluster.dashboard_port=8266")
    ing = yaml.safe_load(files["kuberay/ingress.yaml"])
    assert ing["spec"]["ingressClassName"] == "alb"
    (rule,) = ing["spec"]["rules"]
    assert rule["host"] == "ray.example.com"
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/", "Prefix")
    assert path["backend"]["service"] == {"name": names.head_service(names.job_name(spec)), "port": {"number": 8266}}
    assert any("WARNING: it has no login" in line for line in kr.BACKEND.plan(spec, files))
    _, files = render()
    assert "kuberay/ingress.yaml" not in files
    with pytest.raises(ConfigError, match="monitoring.ingress_class='alb'.*dashboard_ingress=true"):
        render("monitoring.ingress_class=alb")


# An rlaunch image the user built with seed 002's APMPlus hook in it (docker/verl has none).
SEED_002 = {"K8S_FLAVOR": "vke", "IMAGE": "cr.volces.com/my-team/rlaunch-verl-apmplus:0.9.1"}
HOOK = "framework.image_facts.modules=[tracing.setup_tracing]"


def test_apmplus_tracing_hook_annotations_and_env_on_vke_only():
    _, files = render(f"monitoring.apmplus=true {VKE_TOS} {HOOK}", **SEED_002)
    assert cluster(files)["headGroupSpec"]["rayStartParams"]["tracing-startup-hook"] == \
        "tracing.setup_tracing:setup_tracing"
    for pod in (head_pod(files), worker_group(files)["template"]):
        assert pod["metadata"]["annotations"]["instrumentation.apmplus.volcengine.com/inject-python"] == "true"
        env = env_of(pod)
        assert env["PYTHONPATH"] == "/workspace/verl" and env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] == "system_metrics"
    assert "tracing-startup-hook" not in worker_group(files)["rayStartParams"]
    _, files = render(VKE_TOS, K8S_FLAVOR="vke")
    assert "apmplus" not in files["kuberay/rayjob.yaml"] and "tracing" not in files["kuberay/rayjob.yaml"]
    with pytest.raises(ConfigError, match="monitoring.apmplus=True.*k8s_flavor=vke"):
        render("monitoring.apmplus=true")
    with pytest.raises(ConfigError, match="monitoring.tracing_hook='nohook'.*module:function"):
        render(f"monitoring.apmplus=true monitoring.tracing_hook=nohook {VKE_TOS} {HOOK}", **SEED_002)


@pytest.mark.parametrize(("sets", "knobs"), [
    ("", {"K8S_FLAVOR": "vke"}),                       # the pinned image: its facts name no hook
    ("", SEED_002),                                   # IMAGE= without the fact
    ("framework.image_facts.modules=[tracing.other]", SEED_002),
], ids=["pinned-image", "image-without-fact", "another-module"])
def test_apmplus_is_refused_on_an_image_without_the_tracing_hook(sets, knobs):
    with pytest.raises(ConfigError) as err:
        render(f"monitoring.apmplus=true {VKE_TOS} {sets}", **knobs)
    message = str(err.value)
    assert "monitoring.apmplus" in message and "tracing hook module tracing.setup_tracing" in message
    assert "docker/" in message and "IMAGE=<that image>" in message and HOOK in message


# ---------------------------------------------------------------- check() and plan()


@pytest.fixture
def no_kubectl(monkeypatch):
    monkeypatch.setenv("RLAUNCH_KUBECTL", "rlaunch-test-no-such-kubectl")


@pytest.fixture
def quiet_loader(monkeypatch):
    """The framework loader is the framework adapter's own test subject."""
    from rlaunch.registry import frameworks

    fw = frameworks.get("trl")
    monkeypatch.setattr(type(fw), "loader_check", lambda self, spec, files: "loader ok")


def test_check_validates_every_manifest_and_skips_server_dry_run_without_a_cluster(crds, dra_crd, no_kubectl, quiet_loader):
    spec, files = render(f"monitoring.podmonitors=true {GKE_BUCKET}", K8S_FLAVOR="gke", RDMA="1",
                         GPUS_PER_NODE="4", ACCELERATOR="GB200")
    lines = kr.BACKEND.check(spec, files)
    text = "\n".join(lines)
    for kind in ("PersistentVolume/", "PersistentVolumeClaim/", "ResourceClaimTemplate/", "PodMonitor/",
                 "ConfigMap/", "RayJob/"):
        assert kind in text, kind
    assert "kubectl apply --dry-run=server: at launch, before anything is applied (plan is offline)" in text


def test_check_rejects_an_oversized_configmap(no_kubectl, quiet_loader):
    spec, files = render()
    files = {**files, "spec.json": "x" * (kr.CONFIGMAP_MAX_BYTES + 1)}
    with pytest.raises(CheckError, match="configmap-size"):
        kr.BACKEND.check(spec, files)


def test_a_negative_ttl_from_the_config_fails_the_operator_rule(crds, no_kubectl, quiet_loader):
    spec, files = render("infra.kuberay.ttl_seconds_after_finished=-1")
    with pytest.raises(CheckError, match="ttlSecondsAfterFinished"):
        kr.BACKEND.check(spec, files)


def test_plan_lists_secret_configmap_and_manifests_in_apply_order():
    spec, files = render(f"secrets=[HF_TOKEN] monitoring.podmonitors=true {GKE_BUCKET}", K8S_FLAVOR="gke")
    lines = kr.BACKEND.plan(spec, files)
    text = "\n".join(lines)
    assert text.index("Secret t1-secrets") < text.index("ConfigMap t1-artifacts") < text.index("rayjob.yaml")
    apply = next(line for line in lines if "-f " in line and "rayjob.yaml" in line)
    assert apply.index("storage.yaml") < apply.index("podmonitors.yaml") < apply.index("rayjob.yaml")


# ---------------------------------------------------------------- the presets' KubeRay shapes


def preset_on_kuberay(preset: str) -> dict:
    return config.load(preset, {"INFRA": "kuberay", "RUN_ID": "t1"})


def test_verl_ppo_preset_on_vke_is_two_nodes_of_two_gpus_on_a_tos_bucket():
    spec = preset_on_kuberay("verl-ppo-gsm8k-0.5b")
    assert spec.infra.k8s_flavor == "vke" and spec.framework.image == "rlaunch"
    head, worker = manifests._groups(spec)
    assert head["resources"]["nvidia.com/gpu"] == 2 and "num-cpus" not in head["params"]
    assert worker["replicas"] == 1 and worker["resources"]["nvidia.com/gpu"] == 2
    assert worker["resources"]["cpu"] == "30" and worker["resources"]["memory"] == "100Gi"
    assert manifests._storage(spec)["kind"] == "tos"
    assert spec.paths.ckpt_dir.startswith("/data/")
    # Seed 002's observability: PodMonitors and the Grafana dashboard are on by default.
    assert spec.monitoring.podmonitors is True and spec.monitoring.grafana_dashboard is True
    assert spec.monitoring.dashboard_ingress is False and spec.monitoring.apmplus is False


def test_verl_grpo_32b_preset_on_gke_is_a_cpu_head_and_four_workers_of_four_gpus():
    spec = preset_on_kuberay("verl-grpo-gsm8k-32b")
    assert spec.infra.k8s_flavor == "gke" and spec.infra.rdma is True
    head, worker = manifests._groups(spec)
    assert "nvidia.com/gpu" not in head["resources"]
    assert int(head["params"]["num-cpus"]) >= 10  # verl's TransferQueue lives on the head
    assert worker["replicas"] == 4 and worker["resources"]["nvidia.com/gpu"] == 4
    assert spec.rollout.tp == 4 and spec.algo.group_size == 8
    assert (head["resources"]["ephemeral-storage"], worker["resources"]["ephemeral-storage"]) == ("20Gi", "500Gi")
    storage = manifests._storage(spec)
    assert storage["kind"] == "gcsfuse"  # checkpoints on the bucket, through the /data mount
    assert spec.paths.ckpt_dir.startswith(spec.storage.mount + "/")

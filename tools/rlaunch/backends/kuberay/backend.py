"""INFRA=kuberay: one RayJob (with its Ray cluster embedded) on any Kubernetes with the KubeRay operator.

Why a RayJob with an embedded rayClusterSpec, not a RayCluster plus a RayJob: the cluster then lives
exactly as long as the run (shutdownAfterJobFinishes, ttlSecondsAfterFinished), activeDeadlineSeconds
bounds GPU time, backoffLimit retries the whole run on a fresh cluster (the operator refuses
backoffLimit with a clusterSelector), and `make down` has one object to delete. The operator names
the cluster <rayjob>-<5 chars>, which is why the RayJob name may have 47 characters, not 53.

What goes where:
  - rlaunch's tools come from the rlaunch image (framework.image=rlaunch: the framework's official
    image plus /opt/rlaunch, docker/<framework>); job.sh needs them for preflight and postflight.
  - the launch's artifacts (spec.json, job.sh, the framework's files) go into a ConfigMap, built at
    launch from the rendered files and mounted read-only at /opt/rlaunch-run in the head, the
    workers and the job submitter; the submitter uploads it as the job's runtime_env working_dir.
  - secrets (names in spec.secrets) become a Secret applied through kubectl's stdin at launch, read
    from the launching shell's environment; pods reference it with secretKeyRef. Their values are
    never in a rendered file, a log line or a process argument.
  - data, model and checkpoints live on one shared volume at storage.mount in every pod: a GCS FUSE
    bucket (gke), a TOS bucket through its CSI driver (vke), or an existing PVC (storage.pvc).
  - the inputs (rlaunch.config.inputs: the pinned model and dataset, or the user's model.path / data.path)
    are made ready by the inputs Job, a CPU pod that runs setup.sh on that volume, before the RayJob
    is applied: `make launch` waits for it, so no GPU pod starts before its inputs are there.

Render is pure (manifests.py); launch/status/logs/down/dashboard call `kubectl` with argv lists
(kubectl.py: $RLAUNCH_KUBECTL, default kubectl) and never fake success: anything missing is a MissingPrerequisite naming the fix.
Every object of a run carries rlaunch.io/run=<run_id> (the shared ServiceAccount only
app.kubernetes.io/managed-by=rlaunch), so down/status/logs work from the run id and the namespace
alone, and `make runs` lists RayJobs by label. Only the API server's "NotFound" (or an empty list
by label) means "not there"; any other failure is a MissingPrerequisite (exit 3).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import progress
from rlaunch.backends.base import Answer, Backend, LaunchPlan, Place, Run, RunHandle
from rlaunch.backends.kuberay import gke
from rlaunch.backends.kuberay import kubectl
from rlaunch.backends.kuberay import manifests
from rlaunch.backends.kuberay import monitoring
from rlaunch.backends.kuberay import registry
from rlaunch.backends.kuberay.names import (MANAGED_BY, RUN_LABEL, code_configmap_name, configmap_name, head_service, inputs_job_name,
                                            job_name, secret_name)
from rlaunch.config import code, pins
from rlaunch.errors import CheckError, ConfigError, MissingPrerequisite
from rlaunch.plan import imagecheck
from rlaunch.registry import backends
from rlaunch.validate import kuberay as validate

if TYPE_CHECKING:
    from rlaunch.config.spec import Config, Spec

TENSORBOARD_POD_PORT = 6006  # `make tensorboard`: TensorBoard on the head pod's loopback
LOGS_POLL_S = 5  # `make logs` polls for the submitter job this often, until formation_timeout_s
# A ConfigMap holds at most 1 MiB; leave room for its metadata.
CONFIGMAP_MAX_BYTES = 900 * 1024
# What a launch creates, by kind (the API server's names); down deletes those the server has.
RUN_KINDS = ["rayjobs.ray.io", "jobs.batch", "configmaps", "secrets", "persistentvolumeclaims",
             "podmonitors.monitoring.coreos.com", "resourceclaimtemplates.resource.k8s.io",
             gke.COMPUTE_DOMAIN_CRD, "ingresses.networking.k8s.io"]
CLUSTER_KINDS = ["persistentvolumes"]
INPUTS_POLL_S = 5  # launch polls the inputs Job this often, until infra.kuberay.inputs_timeout_s
# A RayJob that reached one of these holds no Ray cluster any more (only its small objects).
FINISHED_DEPLOYMENTS = {"Complete", "Failed"}


def rules(spec: Spec) -> None:
    """What INFRA=kuberay refuses (config.check's pass, before anything renders)."""
    flavor, storage, kr = spec.infra.k8s_flavor, spec.storage, spec.infra.kuberay
    if spec.framework.image != "rlaunch":
        raise ConfigError("framework.image", spec.framework.image, "rlaunch on INFRA=kuberay: pods "
                          f"run job.sh with rlaunch's tools from {manifests.RLAUNCH_HOME} in the rlaunch image "
                          f"(make image-build / image-push FRAMEWORK={spec.framework.name}, then "
                          "SET=framework.image=rlaunch)")
    if kr.gcp_service_account and flavor != "gke":
        raise ConfigError("infra.kuberay.gcp_service_account", kr.gcp_service_account,
                          "empty unless k8s_flavor=gke (Workload Identity)")
    source = storage.source
    scheme, _, rest = source.partition("://")
    bucket = rest.partition("/")[0]
    if storage.bucket:
        raise ConfigError("storage.bucket", storage.bucket, "empty on INFRA=kuberay: create the bucket "
                          "first, then mount it with storage.source (gs://... on gke, tos://... on vke)")
    if storage.pvc:
        if source:
            raise ConfigError("storage.source", source, "empty when storage.pvc is set (one shared volume)")
    elif flavor == "gke" and (scheme != "gs" or not bucket):
        raise ConfigError("storage.source", source, "gs://BUCKET[/DIR] (mounted with Cloud Storage FUSE) "
                          "or storage.pvc=<an existing ReadWriteMany PVC> on k8s_flavor=gke")
    elif flavor == "vke":
        if scheme != "tos" or not bucket:
            raise ConfigError("storage.source", source, "tos://BUCKET[/DIR] (a TOS bucket through its CSI "
                              "driver) or storage.pvc=<an existing ReadWriteMany PVC> on k8s_flavor=vke")
        for key in ("object_store_endpoint", "object_store_secret"):
            if not getattr(kr, key):
                raise ConfigError(f"infra.kuberay.{key}", "", "needed for a tos:// storage.source: the TOS "
                                  "endpoint URL, and the Secret holding the bucket's access keys")
    elif flavor == "generic" and source:
        raise ConfigError("storage.source", source, "empty on k8s_flavor=generic (bucket mounts are gke/vke); "
                          "use storage.pvc=<an existing ReadWriteMany PVC>, or neither for a new one")
    for item in kr.node_selector:
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise ConfigError("infra.kuberay.node_selector", item, "a list of key=value node labels")
    accelerator = spec.cluster.accelerator
    if flavor == "gke" and spec.cluster.gpus_per_node > 0 and accelerator not in manifests.GKE_ACCELERATORS:
        raise ConfigError("cluster.accelerator", accelerator, "on GKE one of " + ", ".join(manifests.GKE_ACCELERATORS))
    gke.rules(spec)


def _timestamp(text: str) -> float | None:
    try:
        return _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _group_gpus(group: dict[str, Any]) -> int:
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    return int(limits.get("nvidia.com/gpu") or 0)


def rayjob_run(item: dict[str, Any]) -> Run:
    """A Run from a RayJob as the API server returns it; nodes count GPU nodes as rlaunch does
    (a CPU-only head is not one)."""
    meta, status = item.get("metadata") or {}, item.get("status") or {}
    cluster = (item.get("spec") or {}).get("rayClusterSpec") or {}
    head, workers = cluster.get("headGroupSpec") or {}, cluster.get("workerGroupSpecs") or []
    replicas = sum(int(w.get("replicas") or 0) for w in workers)
    worker_gpus = max((_group_gpus(w) for w in workers), default=0)
    head_gpus = _group_gpus(head)
    cpu_head = bool(worker_gpus) and not head_gpus
    deployment = status.get("jobDeploymentStatus") or "New"
    labels = {((g.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get(
        "cloud.google.com/gke-accelerator") for g in [*workers, head]}
    accelerator = next((k for k, v in manifests.GKE_ACCELERATORS.items() if v in labels), "")
    return Run(run_id=(meta.get("labels") or {}).get(RUN_LABEL, meta.get("name", "")), infra="kuberay",
               state=f"{status.get('jobStatus') or 'PENDING'} ({deployment})",
               where=f"RayJob {meta.get('namespace', '?')}/{meta.get('name', '?')}",
               nodes=replicas if cpu_head else replicas + 1, gpus_per_node=max(worker_gpus, head_gpus),
               accelerator=accelerator, created=_timestamp(meta.get("creationTimestamp", "")), kind="rayjob",
               active=deployment not in FINISHED_DEPLOYMENTS)


# ---------------------------------------------------------------- the backend


class KubeRay(Backend):
    name = "kuberay"
    resume_hint = ("the operator retries a failed RayJob on a fresh cluster (infra.kuberay.backoff_limit) "
                   "and the run resumes from its checkpoints")

    def rules(self, spec: Spec) -> None:
        rules(spec)

    def render(self, spec: Spec) -> dict[str, str]:
        return manifests.render(spec)

    def check(self, spec: Spec, files: dict[str, str]) -> list[str]:
        k8s = pins.get_str("kubernetes")
        cm = manifests.configmap_manifest(spec, files)
        size = sum(len(text.encode()) for text in cm["data"].values())
        if size > CONFIGMAP_MAX_BYTES:
            raise CheckError("configmap-size", f"the artifacts ConfigMap would hold {size} bytes; Kubernetes "
                             f"allows 1 MiB (rlaunch keeps it under {CONFIGMAP_MAX_BYTES})")
        docs, lines_gke = gke.check_networks(manifests.documents(files))  # GKE's Network CRDs are not pinned
        lines = validate.check_documents(docs + [("ConfigMap (built at launch)", cm)], k8s) + lines_gke
        # Plan is offline: the API server judges at launch, before anything is applied.
        lines.append("kubectl apply --dry-run=server: at launch, before anything is applied (plan is offline)")
        return lines

    def _server_dry_run(self, spec: Spec, files: dict[str, str], cm: dict[str, Any], context_name: str) -> str:
        """The API server (and the operator's webhook, if any) judges every object, applying none:
        a rejection is a CheckError (exit 2) before launch applies anything."""
        import yaml

        ns = spec.infra.namespace
        docs = [cm] + [doc for _, doc in manifests.documents(files)]
        args = ["apply", "--dry-run=server", "--server-side", "--field-manager=rlaunch", "-n", ns, "-f", "-"]
        result = kubectl.run(args, stdin=yaml.safe_dump_all(docs, sort_keys=False))
        if result.returncode != 0:
            raise CheckError("server-dry-run", f"kubectl apply --dry-run=server (context {context_name}): "
                             f"{result.stderr.strip() or result.stdout.strip()}")
        return f"kubectl apply --dry-run=server: accepted by context {context_name}"

    def plan(self, spec: Spec, files: dict[str, str]) -> list[str]:
        ns, name = spec.infra.namespace, job_name(spec)
        out = spec.run.out
        extra = "".join(f", {what.split(' (')[0].replace('the ', '', 1)}"
                        for _, what, _ in gke.checks(spec, manifests.context(spec, files)["rdma_nics"]))
        lines = [f"checks: kubectl context reachable, KubeRay CRDs installed, namespace {ns} exists{extra}"]
        if spec.secrets:
            lines.append(f"kubectl apply --server-side -n {ns} -f -   # Secret {secret_name(spec)} from "
                         f"${', $'.join(spec.secrets)} in your environment (stdin only)")
        items = ", ".join(i["path"] for i in manifests.configmap_items(spec, files))
        lines.append(f"kubectl apply --server-side -n {ns} -f -   # ConfigMap {configmap_name(spec)} ({items}) "
                     f"-> {manifests.ARTIFACTS_MOUNT} in every pod")
        carried = manifests.carried_keys(spec)
        if manifests.CODE_KEY in carried:
            lines.append(f"kubectl apply --server-side -n {ns} -f -   # ConfigMap {code_configmap_name(spec)} "
                         f"(CODE's pack, {manifests.CODE_KEY}) -> the inputs Job -> {spec.paths.code_dir}")
        elif spec.paths.code_dir:
            url, _, commit = spec.code.dir.rpartition("@")
            lines.append(f"CODE: fetched by the inputs Job from {url} at {commit[:12]}, "
                         f"{code.packed_size(spec) / 2**20:.1f} MiB compressed (over the ConfigMap's "
                         f"{backends.infra(spec.infra.name).code_limit // 1024} KiB; a public repository: the Job "
                         f"has no git credentials), its hash checked -> {spec.paths.code_dir}")
        if manifests.DATA_KEY in carried:
            also = "" if manifests.CODE_KEY in carried else f"kubectl apply --server-side -n {ns} -f -   # ConfigMap "
            lines.append(f"{also or '  and in '}{code_configmap_name(spec)}: DATA's files ({manifests.DATA_KEY}) "
                         f"-> the inputs Job -> {spec.pins.source['dir']}")
        batch = manifests.manifest_files(files)
        if "kuberay/inputs.yaml" in files:
            first = " ".join(f"-f {out}/{rel}" for rel in batch if rel != "kuberay/rayjob.yaml")
            lines.append(f"kubectl apply --server-side -n {ns} {first}")
            lines.append(f"wait for Job {inputs_job_name(spec)} (setup.sh: the inputs below, made ready on the "
                         f"shared volume) to complete, at most {spec.infra.kuberay.inputs_timeout_s} s")
            batch = ["kuberay/rayjob.yaml"]
        paths = " ".join(f"-f {out}/{rel}" for rel in batch)
        lines.append(f"kubectl apply --server-side -n {ns} {paths}")
        if "kuberay/serviceaccount.yaml" in files:
            ctx = manifests.context(spec)
            ksa, bucket = ctx["service_account"], ctx["storage"].get("bucket", "BUCKET")
            lines.append(f"(once) grant the bucket to the service account: gcloud storage buckets "
                         f"add-iam-policy-binding gs://{bucket} --role roles/storage.objectUser --member "
                         f"serviceAccount:{spec.infra.kuberay.gcp_service_account}   # used by {ksa}")
        mon = spec.monitoring
        if mon.grafana_dashboard:
            cm, key = f"{name}-grafana-dashboard", f"ray-{name}.json"
            lines.append(f"Grafana: ConfigMap {cm} (label {'='.join(monitoring.GRAFANA_LABEL)}) holds Ray's dashboard "
                         "for this run's cluster; a dashboard sidecar loads it, or import it: kubectl get configmap "
                         f"{cm} -n {ns} -o jsonpath='{{.data.{key.replace('.', chr(92) + '.')}}}' > {key}, data "
                         "source: your Prometheus (VKE: the VMP workspace)")
        if mon.dashboard_ingress:
            lines.append(f"Ingress {name}-dashboard -> service {head_service(name)}:{spec.cluster.dashboard_port} "
                         "(the Ray dashboard). WARNING: it has no login; whoever reaches the Ingress can submit "
                         "jobs: keep it private or behind your own access control")
        lines.append(f"RayJob {name}: submitter runs `ray job submit --submission-id {spec.run.id} -- "
                     f"bash {manifests.ARTIFACTS_MOUNT}/job.sh` on the head")
        lines.append(f"then: make status / make logs / make dashboard / make down RUN_ID={spec.run.id}")
        return lines

    # -------------------------------------------------------- acting

    def inputs_now(self, spec: Spec, files: dict[str, str]) -> list[str]:
        """Decided on the cluster: the storage is a volume this machine does not mount."""
        if "kuberay/inputs.yaml" not in files:
            return []
        return [f"prepared or not: decided by the inputs Job {inputs_job_name(spec)} on the shared volume (a "
                "matching stamp: nothing read, nothing downloaded), before any GPU pod exists"]

    def _require(self, args: list[str], what: str, how: str) -> None:
        result = kubectl.run(args)
        if result.returncode != 0:
            raise MissingPrerequisite(what, f"{how} ({kubectl.first_line(result.stderr)})")

    def preflight(self, spec: Spec, files: dict[str, str]) -> str:
        """Everything launch needs from the cluster, each with its own message; the context's name."""
        ns = spec.infra.namespace
        kubectl.require()
        reachable, why = kubectl.context_reachable()
        if not reachable:
            if why == "kubectl has no current context":
                raise MissingPrerequisite("a kubectl context", "GKE: `gcloud container clusters get-credentials "
                                          "CLUSTER --location REGION`; VKE/other: set KUBECONFIG to the "
                                          "cluster's kubeconfig")
            raise MissingPrerequisite("a reachable Kubernetes cluster", f"{why}; check `kubectl cluster-info`")
        self._require(["get", "crd", "rayjobs.ray.io", "rayclusters.ray.io", "-o", "name"],
                      "the KubeRay CRDs (rayjobs.ray.io, rayclusters.ray.io)",
                      f"run `make kuberay-operator` (KubeRay {spec.pins.kuberay} with Helm)")
        self._require(["get", "namespace", ns, "-o", "name"], f"namespace {ns}", f"kubectl create namespace {ns}")
        for args, what, how in gke.checks(spec, manifests.context(spec, files)["rdma_nics"]):
            self._require(args, what, how)
        if spec.monitoring.podmonitors:
            self._require(["get", "crd", "podmonitors.monitoring.coreos.com", "-o", "name"],
                          "the Prometheus Operator's PodMonitor CRD",
                          "install the Prometheus Operator, or SET monitoring.podmonitors=false")
        if spec.storage.pvc:
            self._require(["get", "pvc", spec.storage.pvc, "-n", ns, "-o", "name"],
                          f"PVC {spec.storage.pvc} in namespace {ns}",
                          "create it (ReadWriteMany, shared by every pod) or unset storage.pvc")
        kr = spec.infra.kuberay
        if kr.service_account and not kr.gcp_service_account:
            self._require(["get", "serviceaccount", kr.service_account, "-n", ns, "-o", "name"],
                          f"service account {kr.service_account} in namespace {ns}",
                          f"kubectl create serviceaccount {kr.service_account} -n {ns}")
        if kr.object_store_secret and spec.storage.source.startswith("tos://"):
            self._require(["get", "secret", kr.object_store_secret, "-n", ns, "-o", "name"],
                          f"the TOS access-key Secret {kr.object_store_secret} in namespace {ns}",
                          "create it as the VKE object-storage volume docs describe")
        return why  # the context that answered

    def launch(self, plan: LaunchPlan) -> int:
        # The texts plan checked and wrote to plan.out: the ConfigMap and the manifests are both them.
        spec, out, files = plan.spec, plan.out, plan.rendered
        ns = spec.infra.namespace
        secret = manifests.secret_manifest(spec, dict(os.environ)) if spec.secrets else None
        context_name = self.preflight(spec, files)
        # Before anything is applied: an image no registry has leaves the pods in ImagePullBackOff.
        own = imagecheck.pinned_image(spec.framework.name, spec.cluster.accelerator,
                                      pins.load_versions())[1] != f"images.{spec.framework.name}"
        print("kuberay: " + registry.require_pullable(spec.pins.image, spec.framework.name,
                                                       spec.framework.image,
                                                       spec.cluster.accelerator if own else ""))
        configmap = manifests.configmap_manifest(spec, files)
        print(self._server_dry_run(spec, files, configmap, context_name))
        steps: list[tuple[str, subprocess.CompletedProcess[str]]] = []
        if secret is not None:
            steps.append((f"Secret {secret_name(spec)}", kubectl.apply_stdin(ns, secret)))
            if steps[-1][1].returncode != 0:
                return _report_failure(steps[-1])
        steps.append((f"ConfigMap {configmap_name(spec)}", kubectl.apply_stdin(ns, configmap)))
        if steps[-1][1].returncode != 0:
            return _report_failure(steps[-1])
        code_map = manifests.code_configmap_manifest(spec)  # CODE's pack, for the inputs Job
        if code_map is not None:
            steps.append((f"ConfigMap {code_map['metadata']['name']}", kubectl.apply_stdin(ns, code_map)))
            if steps[-1][1].returncode != 0:
                return _report_failure(steps[-1])
        # With an inputs Job: everything else first, then the RayJob once the inputs are ready.
        batches = [manifests.manifest_files(files)]
        if "kuberay/inputs.yaml" in files:
            batches = [[rel for rel in batches[0] if rel != "kuberay/rayjob.yaml"], ["kuberay/rayjob.yaml"]]
        for i, batch in enumerate(batches):
            if i:
                rc = wait_inputs(spec)
                if rc:
                    return rc
            args = ["apply", "--server-side", "--field-manager=rlaunch", "--force-conflicts", "-n", ns]
            for rel in batch:
                args += ["-f", str(out / rel)]
            result = kubectl.run(args)
            print(result.stdout, end="")
            if result.returncode != 0:
                return _report_failure(("manifests", result))
        print(f"kuberay: RayJob {job_name(spec)} applied in namespace {ns}; follow it with "
              f"`make logs RUN_ID={spec.run.id}`, check it with `make status`, stop it with `make down`")
        return 0

    def place(self, spec: Config) -> Place:
        return Place(spec.infra.name, namespace=spec.infra.namespace)

    def kind(self, spec: Spec) -> str:
        return "rayjob"

    def status(self, run: RunHandle) -> int:
        ns, name = run.place.namespace, run.name
        job = kubectl.run(["get", "rayjob", name, "-n", ns, "-o", "json"])
        if job.returncode != 0 and not kubectl.not_found(job):
            raise kubectl.unreachable(job, f"get RayJob {name} in namespace {ns}")
        if job.returncode != 0:
            print(f"kuberay: no RayJob {name} in namespace {ns} ({kubectl.first_line(job.stderr)})")
            return 1
        st = json.loads(job.stdout or "{}").get("status") or {}
        print(f"RayJob {name}: jobStatus={st.get('jobStatus') or 'PENDING'} "
              f"jobDeploymentStatus={st.get('jobDeploymentStatus') or 'New'} "
              f"rayCluster={st.get('rayClusterName') or '-'} jobId={st.get('jobId') or '-'}")
        if st.get("message"):
            print(f"  message: {st['message']}")
        pods = kubectl.run(["get", "pods", "-n", ns, "-l", f"{RUN_LABEL}={run.run_id}", "-o", "json"])
        if pods.returncode != 0:
            print(pods.stderr, end="", file=sys.stderr)
            return pods.returncode
        items = json.loads(pods.stdout or "{}").get("items") or []
        for pod in items:
            print(kubectl.pod_row(pod))
        for line in kubectl.pull_errors(items):
            print(f"  {line}")
        return 0

    def logs(self, run: RunHandle) -> int:
        # The submitter Job is named after the RayJob; its pod streams `ray job logs --follow`. The
        # operator creates it only once the Ray cluster is up, which can take GPU nodes minutes.
        ns, name = run.place.namespace, run.name
        deadline_s = run.wait_s
        deadline = time.monotonic() + deadline_s
        def submitter() -> subprocess.CompletedProcess[str]:
            found = kubectl.run(["get", "job", name, "-n", ns, "-o", "name"])
            if found.returncode != 0 and not kubectl.not_found(found):
                raise kubectl.unreachable(found, f"get the submitter job {name} in namespace {ns}")
            return found

        if submitter().returncode != 0:
            with progress.Wait(f"kuberay: RayJob {name}", deadline_s, "pending: waiting for its Ray cluster "
                               "(the operator starts the submitter job once it is up)",
                               out=progress.console(sys.stderr)) as wait:
                while submitter().returncode != 0:
                    stuck = self._pull_errors(run)
                    if stuck:
                        wait.update("pods cannot pull their image")
                        print("kuberay: " + "\nkuberay: ".join(stuck), file=sys.stderr)
                        return 3
                    if time.monotonic() >= deadline:
                        wait.update("no submitter job")
                        print(f"kuberay: no submitter job {name} in namespace {ns} after {deadline_s} s "
                              "(cluster.formation_timeout_s); `make status` shows where the RayJob is", file=sys.stderr)
                        return 1
                    time.sleep(min(LOGS_POLL_S, max(0.0, deadline - time.monotonic())))
                    wait.update()  # off a terminal: the heartbeat line
                wait.update("submitter job running; following its log")
        args = ["logs", "-f", f"job/{name}", "-n", ns, "--pod-running-timeout=10m"]
        return kubectl.run(args, capture=False, timeout=None).returncode

    def _pull_errors(self, run: RunHandle) -> list[str]:
        """The run's pods that Kubernetes says cannot pull their image (none when it cannot say)."""
        pods = kubectl.run(["get", "pods", "-n", run.place.namespace, "-l", f"{RUN_LABEL}={run.run_id}", "-o", "json"])
        if pods.returncode != 0 or not pods.stdout.strip():
            return []
        return kubectl.pull_errors(json.loads(pods.stdout).get("items") or [])

    def dashboard(self, run: RunHandle, port: int | None = None) -> int:
        remote = run.dashboard_port
        local = remote if port is None else port
        print(f"kuberay: Ray dashboard on http://localhost:{local} (Ctrl-C stops the port-forward)")
        args = ["port-forward", "-n", run.place.namespace, f"service/{head_service(run.name)}",
                f"{local}:{remote}"]
        return kubectl.run(args, capture=False, timeout=None).returncode

    def tensorboard(self, run: RunHandle, port: int) -> int:
        """TensorBoard next to the head, on the run directory of the cluster's shared volume, and
        `kubectl port-forward` to it, until Ctrl-C. The pod runs it under a shell that stops it when
        our `kubectl exec` goes (stdin closes), so nothing is left running in the pod."""
        ns, run_dir = run.place.namespace, run.run_dir
        selector = f"{RUN_LABEL}={run.run_id},ray.io/node-type=head"
        found = kubectl.run(["get", "pods", "-n", ns, "-l", selector, "-o", "name"])
        pod = (found.stdout.split() or [""])[0] if found.returncode == 0 else ""
        if not pod:
            raise MissingPrerequisite(
                f"a running head pod of run {run.run_id} in namespace {ns}",
                "its Ray cluster is deleted when the job ends (shutdownAfterJobFinishes): copy the run "
                f"directory {run_dir} off the shared volume (kubectl cp, or the bucket) and pass it: "
                "make tensorboard RUN_DIR=...")
        serve = (f"python3 -m tensorboard.main --logdir {shlex.quote(run_dir)} --host 127.0.0.1 "
                 f"--port {TENSORBOARD_POD_PORT} & tb=$!; cat >/dev/null; kill $tb")
        exe = kubectl.require()
        board = subprocess.Popen([exe, "exec", "-i", "-n", ns, pod, "--", "sh", "-c", serve],
                                 stdin=subprocess.PIPE)
        forward = subprocess.Popen([exe, "port-forward", "-n", ns, pod, f"{port}:{TENSORBOARD_POD_PORT}"])
        print(f"kuberay: TensorBoard of run {run.run_id} ({pod}, {run_dir}): open "
              f"http://localhost:{port} (Ctrl-C stops it)", flush=True)
        rc = 0
        try:
            while board.poll() is None and forward.poll() is None:
                time.sleep(0.5)
            rc = board.returncode or forward.returncode or 0
            if board.returncode:
                print(f"kuberay: TensorBoard in {pod} exited {board.returncode} (does the image have "
                      "tensorboard? the rlaunch images do)", file=sys.stderr)
        except KeyboardInterrupt:
            pass
        finally:
            board.stdin.close()  # type: ignore[union-attr]  # Popen(stdin=PIPE)
            for proc in (forward, board):
                if proc.poll() is None:
                    proc.terminate()
                proc.wait()
        return rc

    def down(self, run: RunHandle) -> int:
        """Delete every object labelled with the run, after asking the API server which exist."""
        ns, run_id = run.place.namespace, run.run_id
        selector = f"{RUN_LABEL}={run_id}"
        context = kubectl.current_context()
        served = kubectl.api_resources()
        kinds = [k for k in RUN_KINDS if k in served]
        cluster_kinds = [k for k in CLUSTER_KINDS if k in served]
        get = ["-l", selector, "-o", "name"]
        found = kubectl.ask(["get", ",".join(kinds), "-n", ns, *get],
                            f"list objects in namespace {ns}").stdout.split() if kinds else []
        found_pv = kubectl.ask(["get", ",".join(cluster_kinds), *get],
                               "list persistent volumes").stdout.split() if cluster_kinds else []
        if not found and not found_pv:
            print(f"kuberay: nothing of run {run_id} in namespace {ns} of context {context}: `kubectl get "
                  f"{','.join(kinds + cluster_kinds)} -l {selector}` found none: nothing to do")
            return 0
        print(f"kuberay: deleting {len(found) + len(found_pv)} objects of run {run_id} (context {context}): "
              + ", ".join(found + found_pv))
        common = ["-l", selector, "--ignore-not-found", "--timeout=300s"]
        rc = 0
        deletes = ([["delete", ",".join(kinds), "-n", ns, *common]] if found else []) + \
                  ([["delete", ",".join(cluster_kinds), *common]] if found_pv else [])
        for args in deletes:
            result = kubectl.run(args, timeout=360)
            print(result.stdout, end="")
            if result.returncode != 0:
                print(f"kuberay: kubectl {' '.join(args[:2])} failed: {result.stderr.strip()}", file=sys.stderr)
                rc = result.returncode
        if rc == 0:
            print(f"kuberay: nothing of run {run_id} left in namespace {ns}")
        return rc

    def runs(self, place: Place) -> Answer:
        """RayJobs labelled by rlaunch in the current context: every namespace, or the place's when
        the context may not list them all."""
        context = kubectl.current_context()
        query = ["rayjobs.ray.io", "-l", f"app.kubernetes.io/managed-by={MANAGED_BY}", "-o", "json"]
        result = kubectl.run(["get", "--all-namespaces", *query])
        asked = f"kubectl get --all-namespaces {' '.join(query[:3])} (context {context})"
        note = ""
        if result.returncode != 0 and "(Forbidden)" in result.stderr:
            ns = place.namespace
            result = kubectl.run(["get", "-n", ns, *query])
            asked = asked.replace("--all-namespaces", f"-n {ns}")
            note = f"kuberay: context {context} may not list RayJobs in every namespace: namespace {ns} only"
        if result.returncode != 0 and "doesn't have a resource type" in result.stderr:
            return Answer(asked, (), f"kuberay: context {context} has no RayJob kind (KubeRay is not installed)")
        if result.returncode != 0:
            raise kubectl.unreachable(result, "list RayJobs")
        items = json.loads(result.stdout or "{}").get("items") or []
        return Answer(asked, tuple(rayjob_run(item) for item in items), note)


def wait_inputs(spec: Spec) -> int:
    """Wait for the inputs Job to succeed, until infra.kuberay.inputs_timeout_s; 0 when it did. A failed
    or late Job: its log's tail, and the RayJob is not applied (no GPU pod was started)."""
    ns, name = spec.infra.namespace, inputs_job_name(spec)
    deadline_s = spec.infra.kuberay.inputs_timeout_s
    state, message = kubectl.wait_job(ns, name, f"inputs Job {name}", deadline_s, "preparing the model and dataset "
                                      "on the shared volume (the RayJob is applied once they are ready)", INPUTS_POLL_S)
    tail = kubectl.run(["logs", f"job/{name}", "-n", ns, "--tail=20"])
    if tail.returncode == 0 and tail.stdout.strip():
        print("\n".join(f"  {line}" for line in tail.stdout.rstrip().splitlines()))
    if state == "Complete":
        print(f"kuberay: inputs Job {name} succeeded: the model and dataset are ready on the shared volume")
        return 0
    why = f"failed ({message})" if state == "Failed" else \
        f"did not finish within {deadline_s} s (infra.kuberay.inputs_timeout_s)"
    print(f"kuberay: inputs Job {name} {why}; the RayJob was not applied, no GPU pod started. Its log: "
          f"kubectl logs job/{name} -n {ns}; after a fix, `make down RUN_ID={spec.run.id}` and launch "
          "again (whatever already verifies is kept)", file=sys.stderr)
    return 1


def _report_failure(step: tuple[str, subprocess.CompletedProcess[str]]) -> int:
    what, result = step
    print(f"kuberay: applying {what} failed: {result.stderr.strip() or result.stdout.strip()}", file=sys.stderr)
    return result.returncode or 1


BACKEND = KubeRay()

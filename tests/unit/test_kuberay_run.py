"""The rendered KubeRay RayJob runs: what the operator (v1.7.0) would make of it, executed in
network-namespace pods by tests/kuberay_harness.py (its docstring says what is emulated and how).

Fast, no root: the operator's rules on the rendered rehearsal (the `ray start` commands, the env it
injects, the submitter's `ray job submit`) and the kubelet's (env from Secrets and fields, volumes).
Root, seconds: a plain pod with its volumes, env and workdir; deleting and starting a pod again.
Root, `cluster`: the rehearsal preset trains, verifies and passes postflight as a RayJob with 2 pods
(with the user's CODE, through its ConfigMap and the inputs Job: every pod reads its hash, every
worker imports the reward from it), 3 pods and a CPU-only head; and the same RayJob with one thing
changed (a mount path, an env var, a ray start param, a secret reference) fails before training,
saying why. Recovery proof (b): a
worker pod killed mid-training, the RayJob retried on a fresh cluster (backoffLimit), the run resumed.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import kuberay_harness as kh
from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.kuberay import backend as kuberay
from rlaunch.backends.kuberay import names

CLUSTER = "r-abcde"  # a RayCluster name as the operator would pick it: <rayjob>-<5 chars>
FQDN = f"{CLUSTER}-head-svc.default.svc.cluster.local"
SECRET = "hf-not-a-real-token-kharness"
TRAIN = "train.steps=150"  # the digit-copy task is learned by ~100 steps; postflight's thresholds hold


# The user's own code (issue 47): the reward the workers import comes from CODE, through CODE's
# ConfigMap and the inputs Job onto the volume, never through the submitter's upload.
CODE = {"CODE": "tests/fixtures/code/rehearsal"}
CODE_REWARD = 'framework.overrides=["reward=rehearsal_reward:copy_reward"]'


def plan(run_id: str, sets: str = "", environ: dict | None = None, knobs: dict | None = None):
    spec = config.load("rehearsal", {"INFRA": "kuberay", "RUN_ID": run_id, **(knobs or {})}, sets)
    files = artifacts.finish(spec, kuberay.BACKEND.render(spec))
    return spec, kh.kuberay_objects(spec, files, environ or {})


def rayjob(objects):
    return kh.find(objects, "RayJob")


def args_of(pod: dict) -> str:
    (arg,) = pod["spec"]["containers"][0]["args"]
    return arg


def env_of(pod: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


# ---------------------------------------------------------------- the operator's rules (no root)


def test_rehearsal_pods_get_the_operators_ray_start_commands_and_env():
    _, objects = plan("r")
    head, worker = kh.ray_pods(rayjob(objects), CLUSTER, random.Random(1))
    common = ("--block  --dashboard-agent-listen-port=52365  {}--memory=6442450944  "
              "--metrics-export-port=8080  --num-cpus=2 ")
    head_start = "ray start --head  " + common.format("--dashboard-host=0.0.0.0  ")
    worker_start = f"ray start  --address={FQDN}:6379  " + common.format("")
    assert args_of(head) == "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; " + head_start
    assert args_of(worker) == "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; " + worker_start
    assert head["spec"]["containers"][0]["command"] == ["/bin/bash", "-c", "--"]
    henv, wenv = env_of(head), env_of(worker)
    assert henv["KUBERAY_GEN_RAY_START_CMD"] == head_start and wenv["KUBERAY_GEN_RAY_START_CMD"] == worker_start
    assert henv["RAY_ADDRESS"] == "127.0.0.1:6379" and wenv["RAY_ADDRESS"] == f"{FQDN}:6379"
    assert wenv["FQ_RAY_IP"] == FQDN and wenv["RAY_IP"] == f"{CLUSTER}-head-svc" and "FQ_RAY_IP" not in henv
    assert henv["RAY_CLUSTER_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}
    assert henv["RAY_USAGE_STATS_EXTRA_TAGS"] == "kuberay_version=v1.7.0;kuberay_crd=RayJob"
    assert henv["RLAUNCH_RUN_ID"] == "r" and henv["NCCL_IB_DISABLE"] == "1"  # the rendered env, first
    assert [e["name"] for e in head["spec"]["containers"][0]["env"]][:2] == ["RLAUNCH_RUN_ID", "NCCL_IB_DISABLE"]
    (init,) = worker["spec"]["initContainers"]
    assert init["name"] == "wait-gcs-ready" and f"ray health-check --address {FQDN}:6379" in init["args"][0]
    assert head["metadata"]["name"].startswith(f"{CLUSTER}-head-")
    assert worker["metadata"]["name"].startswith(f"{CLUSTER}-workers-worker-")
    assert worker["metadata"]["labels"]["ray.io/group"] == "workers"
    assert head["metadata"]["labels"]["rlaunch.io/run"] == "r"


def test_cpu_only_head_starts_with_num_cpus_0_and_the_head_resources():
    _, objects = plan("r", "cluster.cpu_head=true")
    pods = kh.ray_pods(rayjob(objects), CLUSTER)
    assert [p["metadata"]["labels"]["ray.io/node-type"] for p in pods] == ["head", "worker", "worker"]
    head = args_of(pods[0])
    assert " --num-cpus=0 " in head and f" --memory={32 * 2**30} " in head  # infra.kuberay.head_memory_gb
    assert all(" --num-cpus=2 " in args_of(p) for p in pods[1:])


@pytest.mark.parametrize(("params", "resources", "has", "lacks"), [
    ({"num-cpus": "3"}, {"limits": {"cpu": "8"}}, [" --num-cpus=3 "], [" --num-cpus=8 "]),
    ({}, {"limits": {"cpu": "500m", "memory": "1G"}}, [" --num-cpus=1 ", " --memory=1000000000 "], []),
    ({}, {"requests": {"cpu": "2", "memory": "1Gi"}}, [" --num-cpus=2 "], ["--memory"]),  # requests: CPU only
    ({}, {"limits": {"nvidia.com/gpu": 8}}, [" --num-gpus=8 "], []),
    ({}, {"limits": {"google.com/tpu": "4"}}, [""" --resources='{"TPU":4}' """], []),
    ({"include-dashboard": "false", "disable-usage-stats": "true", "no-monitor": "false"}, {},
     [" --include-dashboard=false ", " --disable-usage-stats "], ["no-monitor"]),
])
def test_ray_start_flags_follow_generate_ray_start_command(params, resources, has, lacks):
    command, _ = kh.ray_start_command("worker", kh.complete_ray_start_params(params, "worker", "6379", FQDN),
                                      resources)
    assert command.startswith("ray start  ") and " --block " in command
    for text in has:
        assert text in command, command
    for text in lacks:
        assert text not in command, command


def test_a_users_command_runs_before_ray_start_and_overwrite_keeps_it():
    _, objects = plan("r")
    job = rayjob(objects)
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["command"], head["args"] = ["echo"], ["hi"]
    assert args_of(kh.ray_pods(job, CLUSTER)[0]).startswith(" echo  hi  && ulimit -n")
    job["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    pod = kh.ray_pods(job, CLUSTER)[0]
    assert pod["spec"]["containers"][0]["command"] == ["echo"] and args_of(pod) == "hi"
    assert env_of(pod)["KUBERAY_GEN_RAY_START_CMD"].startswith("ray start --head ")


def test_submitter_submits_the_rendered_entrypoint_once_with_the_runtime_env():
    _, objects = plan("r")
    job = rayjob(objects)
    pod = kh.submitter_pod(job, CLUSTER)
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    words = shlex.split(args_of(pod))  # what bash makes of it
    address = f"http://{FQDN}:8265"
    submit = words.index("submit")
    assert words[words.index("!") + 1:words.index("!") + 6] == ["ray", "job", "status", "--address", address]
    runtime_env = json.loads(words[words.index("--runtime-env-json") + 1])
    assert runtime_env == yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert words[words.index("--submission-id") + 1] == "r" and "--no-wait" in words[submit:]
    dashdash = words.index("--")  # the entrypoint goes in unquoted: the shell splits it
    assert words[dashdash + 1:words.index(";", dashdash)] == ["bash", "/opt/rlaunch-run/job.sh"]
    assert words[-7:] == ["ray", "job", "logs", "--address", address, "--follow", "r"]
    assert env_of(pod)["RAY_DASHBOARD_ADDRESS"] == f"{FQDN}:8265" and env_of(pod)["RAY_JOB_SUBMISSION_ID"] == "r"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"artifacts": "/opt/rlaunch-run"}  # the working_dir it uploads


def test_the_submitter_quotes_like_go_and_bash_reads_it_back():
    text = 'a "b" \\ c\n\t$HOME <&> é \x01'
    assert kh.go_quote(text) == '"a \\"b\\" \\\\ c\\n\\t$HOME <&> é \\x01"'
    assert kh.go_json({"b": 1.0, "a": "<x>"}) == '{"a":"\\u003cx\\u003e","b":1}'


def test_not_emulated_features_are_refused_by_name():
    _, objects = plan("r")
    job = copy.deepcopy(rayjob(objects))
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    with pytest.raises(kh.NotEmulated, match="enableInTreeAutoscaling"):
        kh.ray_pods(job, CLUSTER)
    job = copy.deepcopy(rayjob(objects))
    job["spec"]["submissionMode"] = "HTTPMode"
    with pytest.raises(kh.NotEmulated, match="HTTPMode"):
        kh.ray_pods(job, CLUSTER)


def test_quantities_round_up_like_kubernetes():
    assert [kh.quantity_value(q) for q in ("2", "500m", "1.5", "6Gi", "1e3", 4, "100M")] == \
        [2, 1, 2, 6 * 2**30, 1000, 4, 10**8]
    with pytest.raises(kh.HarnessError, match="not a Kubernetes quantity"):
        kh.quantity("6 GB")


# ---------------------------------------------------------------- the kubelet's rules (no root)


def test_env_resolves_secret_refs_fields_and_expansions():
    _, objects = plan("r", "secrets=[HF_TOKEN]", {"HF_TOKEN": SECRET})
    worker = kh.ray_pods(rayjob(objects), CLUSTER)[1]
    c = worker["spec"]["containers"][0]
    c["env"].append({"name": "WHERE", "value": "$(RAY_CLUSTER_NAME) on $(POD_IP_UNSET) costs $$(x)"})
    env = kh.container_env(worker, c, kh.rlaunch_image(), objects, "10.9.9.2", "10.9.9.250")
    assert env["HF_TOKEN"] == SECRET
    assert env["RAY_CLUSTER_NAME"] == CLUSTER and env["RAY_NODE_TYPE_NAME"] == "workers"
    assert env["RAY_CLOUD_INSTANCE_ID"] == worker["metadata"]["name"] == env["HOSTNAME"]
    assert env["WHERE"] == f"{CLUSTER} on $(POD_IP_UNSET) costs $(x)"
    assert env["PATH"].startswith("/opt/rlaunch/scripts:") and env["HOME"] == "/home/ray"
    assert SECRET not in json.dumps(worker)  # the manifest only references it

    secret = kh.find(objects, "Secret")
    wrong = [o for o in objects if o is not secret]
    with pytest.raises(kh.PodConfigError, match=f"Secret {secret['metadata']['name']} not found"):
        kh.container_env(worker, c, kh.rlaunch_image(), wrong, "10.9.9.2", "10.9.9.250")
    typo = copy.deepcopy(c)
    next(e for e in typo["env"] if e["name"] == "HF_TOKEN")["valueFrom"]["secretKeyRef"]["key"] = "HF_TOKN"
    with pytest.raises(kh.PodConfigError, match="env HF_TOKEN: Secret .* has no key 'HF_TOKN'"):
        kh.container_env(worker, typo, kh.rlaunch_image(), objects, "10.9.9.2", "10.9.9.250")


def test_configmap_volume_has_the_kubelets_layout(tmp_path):
    kh.atomic_writer_layout(tmp_path / "v", {"job.sh": b"echo\n", "sub/x.json": b"{}"})
    v = tmp_path / "v"
    assert os.readlink(v / "job.sh") == "..data/job.sh" and os.readlink(v / "sub") == "..data/sub"
    assert os.readlink(v / "..data").startswith("..20")
    assert (v / "sub" / "x.json").read_text() == "{}" and (v / "job.sh").stat().st_mode & 0o777 == 0o644


def test_hosts_file_maps_the_service_names_to_their_cluster_ip():
    text = kh.hosts_file("10.1.1.2", "pod-a", {f"{CLUSTER}-head-svc": "10.1.1.200"}, "default")
    assert "10.1.1.2\tpod-a" in text
    assert f"10.1.1.200\t{FQDN} {CLUSTER}-head-svc.default.svc {CLUSTER}-head-svc.default {CLUSTER}-head-svc" in text


# ---------------------------------------------------------------- pods on this host (root)


PLAIN_POD = """
apiVersion: v1
kind: Pod
metadata: {name: plain, labels: {app: x}}
spec:
  containers:
    - name: main
      image: IMAGE
      command: [/bin/bash, -c]
      args:
        - |
          set -e
          echo "pwd=$(pwd) host=$(hostname) ip=$POD_IP token=${#TOKEN} app=$APP"
          cat /opt/rlaunch-run/job.sh
          ls -a /opt/rlaunch-run | tr '\\n' ' '; echo
          echo written > /data/out.txt
          touch /opt/rlaunch-run/x 2>/dev/null && echo cm-writable || echo cm-read-only
          touch /opt/rlaunch/x 2>/dev/null && echo image-writable || echo image-read-only
          test -x "$(command -v ray)" && echo "ray=$(command -v ray)"
          getent hosts kuberay-svc
          df -k /dev/shm | tail -1 | awk '{print "shm_kb=" $2}'
      workingDir: /work-dir
      env:
        - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: s, key: TOKEN}}
      volumeMounts:
        - {name: cm, mountPath: /opt/rlaunch-run, readOnly: true}
        - {name: pvc, mountPath: /data}
        - {name: shm, mountPath: /dev/shm}
  volumes:
    - {name: cm, configMap: {name: cm}}
    - {name: pvc, persistentVolumeClaim: {claimName: claim}}
    - {name: shm, emptyDir: {medium: Memory, sizeLimit: 8Mi}}
"""


def _objects_for_plain_pod(spec):
    return [{"kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"job.sh": "echo job"}},
            {"kind": "Secret", "metadata": {"name": "s"}, "data": {"TOKEN": "c2VrcmV0"}}]  # "sekret"


def test_a_plain_pod_sees_its_volumes_env_workdir_and_dns(host_ok, tmp_path):
    spec, _ = plan("r")
    image = spec.pins.image
    pod = yaml.safe_load(PLAIN_POD.replace("IMAGE", image))
    with kh.RayJobRun(_objects_for_plain_pod(spec), workdir=tmp_path / "k8s", images=kh.default_images(spec),
                      claims={"claim": tmp_path / "pvc"}) as run:
        run.services = {"kuberay-svc": ("10.0.0.200", "10.0.0.1", {"x": 80})}  # what a RayCluster sets up
        done = run.run_pod(pod, deadline_s=60)
        out = done.log()
        assert done.phase == "Succeeded", out
        assert f"pwd=/work-dir host=plain ip={done.ip} token=6 app=x" in out
        assert "echo job" in out and "..data" in out and "job.sh" in out
        assert "cm-read-only" in out and "image-read-only" in out
        assert f"ray={kh.VENV}/bin/ray" in out
        assert re.search(r"^10\.0\.0\.200 +kuberay-svc\.default\.svc\.cluster\.local", out, re.M), out
        assert "shm_kb=8192" in out
        assert (tmp_path / "pvc" / "out.txt").read_text() == "written\n"
        assert "sekret" not in out + " ".join(pod["spec"]["containers"][0]["args"])


def test_a_pod_can_be_deleted_and_started_again(host_ok, tmp_path):
    spec, _ = plan("r")
    pod = {"metadata": {"name": "sleeper"}, "spec": {"containers": [{
        "name": "main", "image": spec.pins.image, "command": ["/bin/sleep", "600"]}]}}
    with kh.RayJobRun(_objects_for_plain_pod(spec), workdir=tmp_path / "k8s", images=kh.default_images(spec)) as run:
        first = run._start(pod, run.net.pod_ip())
        first.started.wait(30)
        assert first.phase == "Running"
        run.kill_pod("sleeper")  # at once: its process may not have entered the pod's netns yet
        assert first.phase == "Failed" and first.reason == "deleted" and first.ns not in run.net.namespaces
        again = run.start_pod("sleeper")
        again.started.wait(30)
        assert again.phase == "Running" and again.ip == first.ip and again.name == "sleeper"
        again = run.restart_pod("sleeper")
        again.started.wait(30)
        proc = again.containers["main"].proc
        assert again.phase == "Running" and proc.poll() is None
        assert again.log() == ""  # the sleep itself, not ip/unshare/pod-init complaining
    assert again.ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


# ---------------------------------------------------------------- the RayJob, end to end (cluster)


def inputs_job_pod(objects: list[dict]) -> dict | None:
    """The inputs Job's pod, as the Job controller creates it (None: the plan has no inputs Job)."""
    job = next((o for o in objects if o.get("kind") == "Job"), None)
    if job is None:
        return None
    return {"metadata": {**job["spec"]["template"].get("metadata", {}), "name": f"{job['metadata']['name']}-x7k2p"},
            "spec": job["spec"]["template"]["spec"]}


def run_rayjob(tmp_path: Path, objects: list[dict], spec: dict, **kwargs) -> kh.JobResult:
    with kh.RayJobRun(objects, workdir=tmp_path / "k8s", images=kh.default_images(spec)) as run:
        inputs = inputs_job_pod(objects)
        if inputs is not None:  # launch applies the RayJob once the inputs Job has succeeded
            done = run.run_pod(inputs, deadline_s=120)
            assert done.phase == "Succeeded", done.tail(60)
        result = run.execute(ready_s=300, job_s=900, **kwargs)
        run_dir = run.claims[names.pvc_name(spec)] / Path(spec.paths.run_dir).relative_to("/data")
        return result, run_dir


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize(("sets", "pods", "workers", "knobs"), [
    (CODE_REWARD, 2, 2, CODE),  # with the user's code: the reward comes from CODE
    pytest.param("cluster.nodes=3", 3, 3, {}, marks=pytest.mark.full),
    pytest.param("cluster.cpu_head=true", 3, 2, {}, marks=pytest.mark.full),  # seed 004's: a head with num-cpus 0
], ids=["2-pods-code", "3-pods", "cpu-only-head"])
def test_rehearsal_rayjob_trains_verifies_and_passes_postflight(host_ok, tmp_path, sets, pods, workers, knobs):
    run_id = f"kh-{pods}-{workers}-{os.getpid()}"
    spec, objects = plan(run_id, f"{TRAIN} {sets}", knobs=knobs)
    assert len(kh.ray_pods(rayjob(objects), CLUSTER)) == pods
    result, run_dir = run_rayjob(tmp_path, objects, spec)
    assert result.succeeded, result.describe()
    assert "postflight: passed" in result.submitter_log and "preflight: passed" in result.submitter_log
    assert json.loads((run_dir / "verification.json").read_text())["passed"] is True
    preflight = json.loads((run_dir / "preflight.json").read_text())
    assert preflight["passed"] is True and preflight["expected_nodes"] == pods
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["num_workers"] == workers and len(set(summary["worker_nodes"])) == workers
    assert summary["steps"] == 150 and summary["reward_last"] >= 0.9
    # job.sh keeps the plan it ran from the ConfigMap volume: the files, not the kubelet's ..data.
    plan_files = ["job.sh", *(["setup.sh"] if knobs else []), "spec.json", "trl.json"]  # setup.sh: the inputs Job's
    assert sorted(p.name for p in (run_dir / "plan").iterdir()) == plan_files
    if knobs:  # every pod read the pinned hash, and every worker imported its reward from the staged dir
        code_dir, want = spec.paths.code_dir, spec.pins.code["hash"]
        assert code_dir.endswith(f"/code/{want}")
        assert [n["code"]["hash"] for n in preflight["nodes"]] == [want] * pods
        assert next(c for c in preflight["checks"] if c["name"] == "code")["passed"]
        found = json.loads((run_dir / "ray-train" / "workers.json").read_text())["worker_reward"]
        assert found == [f"{code_dir}/rehearsal_reward/__init__.py"] * workers, found


def mutate_worker_mount(objects):
    worker = rayjob(objects)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    next(m for m in worker["containers"][0]["volumeMounts"] if m["name"] == "shared")["mountPath"] = "/data-moved"


def mutate_runtime_env_var(objects):
    job = rayjob(objects)
    runtime = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    runtime["env_vars"]["RLAUNCH_PYTHON"] = "python3-missing"
    job["spec"]["runtimeEnvYAML"] = yaml.safe_dump(runtime)


def mutate_head_num_cpus(objects):
    rayjob(objects)["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "0"


def mutate_secret_key(objects):
    worker = rayjob(objects)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    ref = next(e for e in worker["containers"][0]["env"] if e["name"] == "HF_TOKEN")
    ref["valueFrom"]["secretKeyRef"]["key"] = "HF_TOKN"


@pytest.mark.cluster
@pytest.mark.parametrize(("mutation", "sets", "reason", "why"), [
    pytest.param(mutate_worker_mount, "", "AppFailed", "storage not shared: node", marks=pytest.mark.full),
    pytest.param(mutate_runtime_env_var, "", "AppFailed", "python3-missing: command not found", marks=pytest.mark.full),
    pytest.param(mutate_head_num_cpus, "", "AppFailed", "ray cpus on node", marks=pytest.mark.full),
    (mutate_secret_key, "secrets=[HF_TOKEN]", "ClusterNotReady", "env HF_TOKEN: Secret .* has no key 'HF_TOKN'"),
], ids=["mount-path", "env-var", "ray-start-param", "secret-ref"])
def test_one_change_to_the_rendered_rayjob_fails_before_training_and_says_why(
        host_ok, tmp_path, mutation, sets, reason, why):
    spec, objects = plan(f"kh-mut-{os.getpid()}", f"{TRAIN} {sets}", {"HF_TOKEN": SECRET})
    mutation(objects)
    result, run_dir = run_rayjob(tmp_path, objects, spec)
    assert not result.succeeded and result.reason == reason, result.describe()
    assert re.search(why, result.describe()), result.describe()
    assert not (run_dir / "metrics.jsonl").exists()  # it failed before training
    assert SECRET not in result.describe()


# ---------------------------------------------------------------- recovery proof (b): a backoffLimit retry


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.full  # resume after a loss: e2e/test_faults runs it on the local cluster
def test_a_rayjob_retry_on_a_fresh_cluster_resumes_the_run(host_ok, tmp_path):
    """A worker pod is killed mid-training; the Ray job fails; the operator retries the RayJob
    (backoffLimit) as it does: the RayCluster goes, a new one (<rayjob>-<new suffix>) comes from the
    same RayJob, the job is submitted again, and it continues from the last checkpoint on the PVC."""
    from faults_support import steps, wait_for_step

    save_freq = 20
    spec, objects = plan(f"kh-retry-{os.getpid()}",
                         f"train.steps=120 train.save_freq={save_freq} infra.kuberay.backoff_limit=1")
    assert rayjob(objects)["spec"]["backoffLimit"] == 1
    with kh.RayJobRun(objects, workdir=tmp_path / "k8s", images=kh.default_images(spec)) as run:
        run_dir = run.claims[names.pvc_name(spec)] / Path(spec.paths.run_dir).relative_to("/data")
        run.start_cluster()
        first_cluster = run.cluster
        run.wait_ready(300)
        run.submit()
        wait_for_step(run_dir / "metrics.jsonl", save_freq + 5, 600)
        worker = next(p for p in run.ray_pods() if p.role == "worker")
        run.kill_pod(worker.name)
        # The Ray job fails on its own (the node watch names the pod's node); then the RayJob is Failed.
        end, info = time.monotonic() + 300, None
        while time.monotonic() < end:
            info = run.job_info()
            if (info or {}).get("status") in kh.JOB_TERMINAL:
                break
            time.sleep(1)
        assert (info or {}).get("status") == "FAILED", info
        loss = next(json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()
                    if '"node_lost"' in line)
        assert loss["ip"] == worker.ip and loss["rank"] == 1, loss
        run.delete_cluster()
        result = run.execute(ready_s=300, job_s=900)  # the retry, on a fresh RayCluster
        assert run.attempts == 2 and run.cluster != first_cluster
        assert result.succeeded, result.describe()
    second = next(json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()
                  if '"start"' in line and '"attempt": 2' in line)
    assert second["resume_step"] == save_freq and 0 < second["steps_lost"] <= save_freq, second
    assert steps(run_dir / "metrics.jsonl") == list(range(1, 121))
    report = json.loads((run_dir / "verification.json").read_text())
    assert report["passed"] is True, [c for c in report["checks"] if not c["passed"]]

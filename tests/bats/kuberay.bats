#!/usr/bin/env bats
# INFRA=kuberay through rlaunch's CLI (what `make launch|status|logs|dashboard|down INFRA=kuberay`
# runs) with a PATH stub for `kubectl` that records every call and its stdin; and
# scripts/kuberay-operator (`make kuberay-operator`) with a PATH stub for `helm`.
# WANDB_API_KEY=sekret-value is in every test's environment: it may reach kubectl only on stdin
# (base64 in a Secret), never an argument, a rendered file or the output.

load stub_helper

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  PY="${REPO}/.venv/bin/python"
  [[ -x "${PY}" ]] || missing "needs the launcher venv (make setup)"
  stub_command kubectl
  stub_reply kubectl config current-context "gke_proj_us-central1_train"
  # launch asks the registry for the image first, with the user's container client (rlaunch.backends.kuberay.registry)
  stub_command skopeo
  export RLAUNCH_IMAGE_CLIENT=skopeo
  export STUB_ENV_NAMES="WANDB_API_KEY"
  export WANDB_API_KEY="sekret-value"
  ENCODED="$(printf '%s' "${WANDB_API_KEY}" | base64)"
  unset RLAUNCH_KUBECTL KUBERAY_NAMESPACE KUBERAY_WATCH_NAMESPACE KUBERAY_VERSION HELM
  OUT="${BATS_TEST_TMPDIR}/out"
  RUN_ID="bats-kr-$$"
  APPLY="apply --server-side --field-manager=rlaunch --force-conflicts -n default"
  # `rlaunch launch` records the last run: in this test's own file, not the developer's build/last-run
  # (and not another test's, with bats --jobs).
  export RLAUNCH_LAST_RUN="${BATS_TEST_TMPDIR}/last-run"
}

# rl VERB ARGS...: python -m rlaunch as the Makefile runs it.
rl() {
  PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch "$@"
}

launch() {
  rl launch --PRESET=rehearsal --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" --SET="secrets=[WANDB_API_KEY]" "$@"
}

rendered() {
  rl render --PRESET=rehearsal --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" >/dev/null
}

# no_secret_anywhere: the value (plain or base64) is in no argv, no env record, no rendered file
# and no output; base64 may only be on kubectl's stdin.
# (Bats ignores a failing `! cmd` inside a test or function: every check here returns 1 itself.)
no_secret_anywhere() {
  if grep -rlF "sekret-value" "${BATS_TEST_TMPDIR}"/kubectl.* "${OUT}"; then return 1; fi
  if grep -rlF "${ENCODED}" "${BATS_TEST_TMPDIR}/kubectl.calls" "${OUT}"; then return 1; fi
  [[ "${output}" != *sekret-value* && "${output}" != *"${ENCODED}"* ]]
}

# nothing_applied: no recorded call applied for real (a server dry run is not an apply).
nothing_applied() {
  if stub_calls kubectl | grep "^apply --server-side"; then return 1; fi
}

@test "launch: checks the cluster, sends Secret and ConfigMap on stdin, applies the manifests in order" {
  need_crds
  run launch
  [ "${status}" -eq 0 ]
  [ "$(stub_calls kubectl)" = "config current-context
get --raw /readyz --request-timeout=10s
get crd rayjobs.ray.io rayclusters.ray.io -o name
get namespace default -o name
apply --dry-run=server --server-side --field-manager=rlaunch -n default -f -
${APPLY} -f -
${APPLY} -f -
${APPLY} -f ${OUT}/kuberay/storage.yaml -f ${OUT}/kuberay/rayjob.yaml" ]
  # The Secret travelled on stdin, base64-encoded, under the name the pods reference.
  grep -qF "\"WANDB_API_KEY\": \"${ENCODED}\"" "${BATS_TEST_TMPDIR}/kubectl.stdin"
  grep -qF "secretKeyRef: {name: \"${RUN_ID}-secrets\", key: WANDB_API_KEY}" "${OUT}/kuberay/rayjob.yaml"
  # The ConfigMap carries the very job.sh that was rendered.
  grep -qF "\"name\": \"${RUN_ID}-artifacts\"" "${BATS_TEST_TMPDIR}/kubectl.stdin"
  no_secret_anywhere
  [[ "${output}" == *"accepted by context gke_proj_us-central1_train"* ]]
  [[ "${output}" == *"make logs RUN_ID=${RUN_ID}"* ]]
}

# launch_inputs: a preset with inputs (seed 002's verl PPO on VKE): an inputs Job before the RayJob.
launch_inputs() {
  rl launch --PRESET=verl-ppo-gsm8k-0.5b --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" \
    --SET="infra.kuberay.inputs_timeout_s=30" "$@"
}

@test "launch with inputs: applies the inputs Job, waits for it, then applies the RayJob" {
  need_crds
  stub_reply kubectl get job '{"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}'
  stub_reply kubectl logs "inputs: dataset /data/data/gsm8k/cc7b047b6e5b matches its SHA256SUMS: kept"
  run launch_inputs
  [ "${status}" -eq 0 ]
  local calls
  calls="$(stub_calls kubectl | sed -n '/^get namespace/,$p')"
  [ "${calls}" = "get namespace default -o name
get crd podmonitors.monitoring.coreos.com -o name
get secret tos-credentials -n default -o name
apply --dry-run=server --server-side --field-manager=rlaunch -n default -f -
${APPLY} -f -
${APPLY} -f ${OUT}/kuberay/storage.yaml -f ${OUT}/kuberay/podmonitors.yaml -f ${OUT}/kuberay/grafana.yaml -f ${OUT}/kuberay/inputs.yaml
get job ${RUN_ID}-inputs -n default -o json
logs job/${RUN_ID}-inputs -n default --tail=20
${APPLY} -f ${OUT}/kuberay/rayjob.yaml" ]
  [[ "${output}" == *"inputs Job ${RUN_ID}-inputs succeeded"* ]]
  [[ "${output}" == *"matches its SHA256SUMS: kept"* ]]
  # The ConfigMap carries setup.sh, the Job's script.
  grep -qF '"setup.sh": "#!/usr/bin/env bash' "${BATS_TEST_TMPDIR}/kubectl.stdin"
}

@test "launch whose inputs Job fails: exit 1 with its log, the RayJob is never applied" {
  need_crds
  stub_reply kubectl get job '{"status": {"failed": 3, "conditions": [{"type": "Failed", "status": "True", "message": "Job has reached the specified backoff limit"}]}}'
  stub_reply kubectl logs "data: could not fetch qwen2.5-0.5b-instruct at its pinned revision (ConnectError: ...)"
  run launch_inputs
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"inputs Job ${RUN_ID}-inputs failed (Job has reached the specified backoff limit); the RayJob was not applied"* ]]
  [[ "${output}" == *"could not fetch qwen2.5-0.5b-instruct"* ]]
  if stub_calls kubectl | grep -F "rayjob.yaml"; then return 1; fi
}

@test "launch whose inputs Job is still running at its deadline: exit 1, the RayJob is never applied" {
  need_crds
  stub_reply kubectl get job '{"status": {"active": 1}}'
  run launch_inputs --SET="infra.kuberay.inputs_timeout_s=1"
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"did not finish within 1 s (infra.kuberay.inputs_timeout_s)"* ]]
  if stub_calls kubectl | grep -F "rayjob.yaml"; then return 1; fi
}

# launch_a4x: seed 004's GKE A4X preset: RDMA NICs and an IMEX channel, claimed through DRA.
launch_a4x() {
  rl launch --PRESET=verl-grpo-gsm8k-32b --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" \
    --SET="infra.kuberay.inputs_timeout_s=30" "$@"
}

@test "launch on A4X checks the DRA device classes, the ComputeDomain CRD and the gIB installer, then applies the ComputeDomain" {
  need_crds RayCluster RayJob ComputeDomain
  stub_reply kubectl get job '{"status": {"conditions": [{"type": "Complete", "status": "True"}]}}'
  run launch_a4x
  [ "${status}" -eq 0 ]
  local calls
  calls="$(stub_calls kubectl)"
  [[ "${calls}" == *"get deviceclass mrdma.google.com -o name
get crd computedomains.resource.nvidia.com -o name
get deviceclass compute-domain-default-channel.nvidia.com -o name
get daemonset nccl-rdma-installer -n kube-system -o name"* ]]
  [[ "${calls}" == *"-f ${OUT}/kuberay/rdma.yaml -f ${OUT}/kuberay/computedomain.yaml -f ${OUT}/kuberay/inputs.yaml"* ]]
}

@test "launch on A4X without managed DRANET: exit 3, names the device class and how to get it, applies nothing" {
  need_crds RayCluster RayJob ComputeDomain
  stub_fail kubectl get deviceclass mrdma.google.com 1 \
    'Error from server (NotFound): deviceclasses.resource.k8s.io "mrdma.google.com" not found'
  run launch_a4x
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the DRA device class mrdma.google.com"*"managed DRANET"*"RDMA=0"* ]]
  nothing_applied
}

@test "launch on A4X without the gIB installer: exit 3 with seed 004's kubectl apply of its A4X variant, applies nothing" {
  need_crds RayCluster RayJob ComputeDomain
  stub_fail kubectl get daemonset nccl-rdma-installer 1 \
    'Error from server (NotFound): daemonsets.apps "nccl-rdma-installer" not found'
  run launch_a4x
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the gIB NCCL plugin installer (DaemonSet kube-system/nccl-rdma-installer"* ]]
  [[ "${output}" == *"kubectl apply -f https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/gpudirect-rdma/nccl-rdma-installer-a4x.yaml"* ]]
  nothing_applied
}

@test "launch on A4X without NVIDIA's DRA driver: exit 3 with the pinned helm install, applies nothing" {
  need_crds RayCluster RayJob ComputeDomain
  stub_fail kubectl get crd computedomains.resource.nvidia.com 1 \
    'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "computedomains.resource.nvidia.com" not found'
  run launch_a4x
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the ComputeDomain CRD (computedomains.resource.nvidia.com)"* ]]
  [[ "${output}" == *"helm upgrade --install nvidia-dra-driver-gpu nvidia/nvidia-dra-driver-gpu --version=25.3.1"* ]]
  [[ "${output}" == *"infra.kuberay.imex=false"* ]]
  nothing_applied
  # The KubeRay CRDs were found: `get crd` of the RayJob kinds still answered.
  stub_calls kubectl | grep -qx "get crd rayjobs.ray.io rayclusters.ray.io -o name"
}

# launch_standard: seed 004's A3 Ultra pool on GKE Standard: the network mapping, not DRANET.
launch_standard() {
  rl launch --PRESET=verl-grpo-gsm8k-32b --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" \
    --ACCELERATOR=H200 --GPUS_PER_NODE=8 \
    --SET="infra.kuberay.inputs_timeout_s=30 infra.kuberay.gke_networking=network-mapping" "$@"
}

@test "launch on GKE Standard A3 Ultra checks multi-networking and the gIB installer, asks for no DRANET, applies the network mapping first" {
  need_crds RayCluster RayJob
  stub_reply kubectl get job '{"status": {"conditions": [{"type": "Complete", "status": "True"}]}}'
  run launch_standard
  [ "${status}" -eq 0 ]
  local calls
  calls="$(stub_calls kubectl)"
  [[ "${calls}" == *"get crd networks.networking.gke.io gkenetworkparamsets.networking.gke.io -o name
get daemonset nccl-rdma-installer -n kube-system -o name"* ]]
  if grep -F "deviceclass" <<<"${calls}"; then return 1; fi
  [[ "${calls}" == *"${APPLY} -f ${OUT}/kuberay/storage.yaml -f ${OUT}/kuberay/network.yaml -f ${OUT}/kuberay/inputs.yaml"* ]]
  # the API server's dry run saw the mapping too (its CRDs are the cluster's, not pinned here)
  grep -q "kind: GKENetworkParamSet" "${BATS_TEST_TMPDIR}/kubectl.stdin"
}

@test "launch on GKE Standard without multi-networking: exit 3 with seed 004's VPC and cluster commands, applies nothing" {
  need_crds RayCluster RayJob
  stub_fail kubectl get crd networks.networking.gke.io 1 \
    'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "networks.networking.gke.io" not found'
  run launch_standard
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing GKE multi-networking (the CRDs networks.networking.gke.io and gkenetworkparamsets.networking.gke.io"* ]]
  [[ "${output}" == *"gcloud beta compute networks create rdma-net --network-profile=ZONE-vpc-roce"*"--enable-multi-networking"*"--additional-node-network network=gvnic-net,subnetwork=gvnic-sub"* ]]
  [[ "${output}" == *"infra.kuberay.gke_networking=dranet"* ]]
  nothing_applied
}

@test "launch without the KubeRay CRDs: exit 3, names make kuberay-operator, applies nothing" {
  need_crds
  stub_fail kubectl get crd 1 'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "rayjobs.ray.io" not found'
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the KubeRay CRDs"*"make kuberay-operator"* ]]
  nothing_applied
  no_secret_anywhere
}

@test "launch without a kubectl context: exit 3 with how to get credentials; plan left the dry run to launch" {
  need_crds
  stub_fail kubectl config current-context 1 "error: current-context is not set"
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"dry-run=server: at launch, before anything is applied (plan is offline)"* ]]
  [[ "${output}" == *"missing a kubectl context"*"get-credentials"* ]]
  nothing_applied
}

@test "launch with the API server unreachable: exit 3, says which context" {
  need_crds
  stub_fail kubectl get --raw 1 "Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout"
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing a reachable Kubernetes cluster"*"gke_proj_us-central1_train"*"i/o timeout"* ]]
  nothing_applied
}

@test "launch into a missing namespace: exit 3 with the command that creates it" {
  need_crds
  stub_fail kubectl get namespace 1 'Error from server (NotFound): namespaces "default" not found'
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing namespace default: kubectl create namespace default"* ]]
  nothing_applied
}

@test "launch with the secret's variable unset: exit 3 naming it, nothing applied" {
  need_crds
  unset WANDB_API_KEY
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing WANDB_API_KEY in your environment: export WANDB_API_KEY="* ]]
  nothing_applied
}

@test "launch without kubectl: exit 3 naming kubectl" {
  need_crds
  RLAUNCH_KUBECTL="rlaunch-no-such-kubectl" run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"dry-run=server: at launch, before anything is applied (plan is offline)"* ]]
  [[ "${output}" == *"missing kubectl: install kubectl"* ]]
  [ -z "$(stub_calls kubectl)" ]
}

@test "launch: a server-side rejection fails with exit 2 before anything is applied" {
  need_crds
  stub_fail kubectl apply --dry-run=server 1 'Error from server (Forbidden): rayjobs.ray.io is forbidden'
  run launch
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"check server-dry-run"*"forbidden"* ]]
  nothing_applied
}

@test "plan is offline: it asks kubectl nothing, even with a reachable context" {
  need_crds
  run rl plan --PRESET=rehearsal --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"dry-run=server: at launch, before anything is applied (plan is offline)"* ]]
  [ -z "$(stub_calls kubectl)" ]
}

@test "status: RayJob job and deployment status, then the run's pods" {
  rendered
  stub_reply kubectl get rayjob '{"status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "rayClusterName": "c-x1y2z", "jobId": "j"}}'
  stub_reply kubectl get pods '{"items": [{"metadata": {"name": "'"${RUN_ID}"'-head-abc"}, "spec": {"nodeName": "n1"},
    "status": {"phase": "Running", "containerStatuses": [{"ready": true, "state": {"running": {}}}]}}]}'
  run rl status --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"RayJob ${RUN_ID}: jobStatus=RUNNING jobDeploymentStatus=Running rayCluster=c-x1y2z"* ]]
  [[ "${output}" == *"${RUN_ID}-head-abc 1/1 Running n1"* ]]
  [ "$(stub_calls kubectl)" = "get rayjob ${RUN_ID} -n default -o json
get pods -n default -l rlaunch.io/run=${RUN_ID} -o json" ]
}

# pods_cannot_pull REASON: `kubectl get pods` shows the head pod waiting on REASON, as the kubelet reports it.
pods_cannot_pull() {
  stub_reply kubectl get pods '{"items": [{"metadata": {"name": "'"${RUN_ID}"'-head-abc"}, "spec": {},
    "status": {"phase": "Pending", "containerStatuses": [{"ready": false, "image": "ghcr.io/rlaunch/rlaunch-trl:1.16.0",
    "state": {"waiting": {"reason": "'"$1"'", "message": "Back-off pulling image \"ghcr.io/rlaunch/rlaunch-trl:1.16.0\""}}}]}}]}'
}

@test "status reports pods that cannot pull their image: pod, image, reason" {
  rendered
  stub_reply kubectl get rayjob '{"status": {"jobDeploymentStatus": "Initializing"}}'
  pods_cannot_pull ImagePullBackOff
  run rl status --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"${RUN_ID}-head-abc 0/1 ImagePullBackOff <none>"* ]]
  [[ "${output}" == *"pod ${RUN_ID}-head-abc: image ghcr.io/rlaunch/rlaunch-trl:1.16.0: ImagePullBackOff: Back-off pulling image"* ]]
}

@test "logs stop with exit 3 as soon as the pods cannot pull their image" {
  rendered
  stub_fail kubectl get job 1 "Error from server (NotFound): jobs.batch \"${RUN_ID}\" not found"
  pods_cannot_pull ErrImagePull
  run rl logs --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"pod ${RUN_ID}-head-abc: image ghcr.io/rlaunch/rlaunch-trl:1.16.0: ErrImagePull"* ]]
  if stub_calls kubectl | grep "^logs"; then return 1; fi
}

@test "launch asks the registry for the image first; one it lacks is exit 3 naming make image-push, nothing applied" {
  need_crds
  stub_fail skopeo inspect 1 "FATA[0001] Error parsing image name: reading manifest 1.16.0 in ghcr.io/rlaunch/rlaunch-trl: manifest unknown"
  run launch
  [ "${status}" -eq 3 ]
  [ "$(stub_calls skopeo)" = "inspect --raw docker://ghcr.io/rlaunch/rlaunch-trl:1.16.0" ]
  [[ "${output}" == *"missing the image ghcr.io/rlaunch/rlaunch-trl:1.16.0, which the pods pull (skopeo: "*"manifest unknown)"* ]]
  [[ "${output}" == *"make image-build image-push FRAMEWORK=trl REGISTRY=<a registry you can push to>"* ]]
  nothing_applied
}

@test "launch with REGISTRY= runs and checks the rlaunch image pushed there" {
  need_crds
  run launch --REGISTRY=registry.example.com:5000/team
  [ "${status}" -eq 0 ]
  [ "$(stub_calls skopeo)" = "inspect --raw docker://registry.example.com:5000/team/rlaunch-trl:1.16.0" ]
  grep -qF 'image: "registry.example.com:5000/team/rlaunch-trl:1.16.0"' "${OUT}/kuberay/rayjob.yaml"
  [[ "${output}" == *"image registry.example.com:5000/team/rlaunch-trl:1.16.0: its registry has it"* ]]
}

@test "status of a run that is not there: exit 1 and says so" {
  rendered
  stub_fail kubectl get rayjob 1 "Error from server (NotFound): rayjobs.ray.io \"${RUN_ID}\" not found"
  run rl status --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"no RayJob ${RUN_ID} in namespace default"* ]]
}

@test "logs follow the submitter job; dashboard forwards the head service's 8265" {
  rendered
  run rl logs --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  run rl dashboard --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"http://localhost:8265"* ]]
  [ "$(stub_calls kubectl)" = "get job ${RUN_ID} -n default -o name
logs -f job/${RUN_ID} -n default --pod-running-timeout=10m
port-forward -n default service/${RUN_ID}-head-svc 8265:8265" ]
}

@test "dashboard on another local port forwards it to the head service's 8265" {
  rendered
  run rl dashboard --RUN_ID="${RUN_ID}" --OUT="${OUT}" --PORT=18265
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"http://localhost:18265"* ]]
  [ "$(stub_calls kubectl)" = "port-forward -n default service/${RUN_ID}-head-svc 18265:8265" ]
}

@test "tensorboard runs next to the head pod on the run directory and port-forwards to it" {
  rendered
  stub_reply kubectl get pods "pod/${RUN_ID}-head-abc"
  run rl tensorboard --RUN_ID="${RUN_ID}" --OUT="${OUT}" --PORT=16006
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"TensorBoard of run ${RUN_ID} (pod/${RUN_ID}-head-abc, /data/runs/rehearsal/${RUN_ID}): open http://localhost:16006"* ]]
  local calls
  calls="$(stub_calls kubectl)"
  [[ "${calls}" == *"get pods -n default -l rlaunch.io/run=${RUN_ID}\,ray.io/node-type=head -o name"* ]]
  # TensorBoard on the pod's loopback, stopped by its shell when our exec's stdin closes.
  local serve="python3 -m tensorboard.main --logdir /data/runs/rehearsal/${RUN_ID} --host 127.0.0.1 --port 6006 & tb=\$!; cat >/dev/null; kill \$tb"
  local exec_call
  exec_call="$(printf '%q ' exec -i -n default "pod/${RUN_ID}-head-abc" -- sh -c "${serve}")"
  [[ "${calls}" == *"${exec_call% }"* ]]
  [[ "${calls}" == *"port-forward -n default pod/${RUN_ID}-head-abc 16006:6006"* ]]
}

@test "tensorboard without a head pod: exit 3, says the cluster is gone and what to do" {
  rendered
  run rl tensorboard --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing a running head pod of run ${RUN_ID} in namespace default"*"make tensorboard RUN_DIR="* ]]
  if stub_calls kubectl | grep -E "^(exec|port-forward)"; then return 1; fi
}

@test "logs give up after cluster.formation_timeout_s when the submitter job never appears" {
  rl render --PRESET=rehearsal --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}" --SET="cluster.formation_timeout_s=1" >/dev/null
  stub_fail kubectl get job 1 "Error from server (NotFound): jobs.batch \"${RUN_ID}\" not found"
  run rl logs --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"no submitter job ${RUN_ID} in namespace default after 1 s"* ]]
  if stub_calls kubectl | grep "^logs"; then return 1; fi
}

@test "down deletes what launch created by label, and a second down is fine" {
  rendered
  local kinds="rayjobs.ray.io,configmaps,secrets,persistentvolumeclaims"
  stub_reply kubectl api-resources "configmaps
secrets
persistentvolumeclaims
persistentvolumes
rayjobs.ray.io
rayclusters.ray.io"
  stub_reply kubectl get "${kinds}" "rayjob.ray.io/${RUN_ID}
configmap/${RUN_ID}-artifacts"
  run rl down --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"deleting 2 objects of run ${RUN_ID} (context gke_proj_us-central1_train)"* ]]
  # The API server now has none of them.
  rm "${BATS_TEST_TMPDIR}/kubectl.reply.get.${kinds}"
  run rl down --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing of run ${RUN_ID} in namespace default of context gke_proj_us-central1_train"*"nothing to do"* ]]
  # (the calls are recorded shell-quoted: printf %q escapes the commas)
  local get="get rayjobs.ray.io\\,configmaps\\,secrets\\,persistentvolumeclaims -n default -l rlaunch.io/run=${RUN_ID} -o name"
  local get_pv="get persistentvolumes -l rlaunch.io/run=${RUN_ID} -o name"
  local namespaced="delete rayjobs.ray.io\\,configmaps\\,secrets\\,persistentvolumeclaims -n default -l rlaunch.io/run=${RUN_ID} --ignore-not-found --timeout=300s"
  [ "$(stub_calls kubectl)" = "config current-context
api-resources -o name
${get}
${get_pv}
${namespaced}
config current-context
api-resources -o name
${get}
${get_pv}" ]
}

@test "down without kubectl: exit 3, never a fake success" {
  rendered
  RLAUNCH_KUBECTL="rlaunch-no-such-kubectl" run rl down --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing kubectl"* ]]
}

# ---------------------------------------------------------------- scripts/kuberay-operator

operator() {
  "${REPO}/scripts/kuberay-operator" "$@"
}

@test "kuberay-operator --help prints the header with every variable" {
  run operator --help
  [ "${status}" -eq 0 ]
  for var in KUBERAY_NAMESPACE KUBERAY_WATCH_NAMESPACE KUBERAY_VERSION KUBERAY_HELM_TIMEOUT HELM PYTHON; do
    [[ "${output}" == *"${var}"* ]]
  done
}

@test "kuberay-operator without helm: exit 3 and the exact commands at the pinned version" {
  HELM="rlaunch-no-such-helm" run operator
  [ "${status}" -eq 3 ]
  pinned="$(PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch.config.pins get kuberay)"
  [[ "${output}" == *"helm is not installed"* ]]
  [[ "${output}" == *"rlaunch-no-such-helm repo add kuberay https://ray-project.github.io/kuberay-helm/"* ]]
  [[ "${output}" == *"upgrade --install kuberay-operator kuberay/kuberay-operator --version ${pinned} "* ]]
}

@test "kuberay-operator installs at the pin when the release is missing" {
  stub_command helm
  stub_reply helm list "[]"
  KUBERAY_VERSION=9.8.7 run operator
  [ "${status}" -eq 0 ]
  [ "$(stub_calls helm)" = "list --namespace kuberay-system --filter \\^kuberay-operator\\\$ --output json
repo add kuberay https://ray-project.github.io/kuberay-helm/ --force-update
repo update kuberay
upgrade --install kuberay-operator kuberay/kuberay-operator --version 9.8.7 --namespace kuberay-system --create-namespace --wait --timeout 5m" ]
}

@test "kuberay-operator is idempotent: deployed at the pin means nothing to do" {
  stub_command helm
  stub_reply helm list '[{"name":"kuberay-operator","namespace":"kuberay-system","status":"deployed","chart":"kuberay-operator-9.8.7","app_version":"v9.8.7"}]'
  KUBERAY_VERSION=9.8.7 run operator
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"already deployed"* ]]
  [ "$(stub_calls helm | wc -l)" -eq 1 ]
  # An older chart is upgraded.
  KUBERAY_VERSION=9.8.8 run operator
  [ "${status}" -eq 0 ]
  stub_calls helm | grep -q "^upgrade --install kuberay-operator kuberay/kuberay-operator --version 9.8.8 "
}

@test "kuberay-operator limited to one namespace, as seed 004 installs it" {
  stub_command helm
  stub_reply helm list "[]"
  KUBERAY_VERSION=9.8.7 KUBERAY_WATCH_NAMESPACE=ml-team run operator
  [ "${status}" -eq 0 ]
  stub_calls helm | grep -qF "upgrade --install kuberay-operator kuberay/kuberay-operator --version 9.8.7 --namespace ml-team --create-namespace --wait --timeout 5m --set singleNamespaceInstall=true --set watchNamespace=\\{ml-team\\}"
}

@test "kuberay-operator: a failed install exits 1; a bad namespace exits 2 before helm runs" {
  stub_command helm
  stub_reply helm list "[]"
  stub_fail helm upgrade 1 "Error: INSTALLATION FAILED: context deadline exceeded"
  KUBERAY_VERSION=9.8.7 run operator
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"helm upgrade --install kuberay-operator 9.8.7 failed"* ]]
  rm -f "${BATS_TEST_TMPDIR}/helm.calls"
  KUBERAY_VERSION=9.8.7 KUBERAY_WATCH_NAMESPACE="Not_A_Namespace" run operator
  [ "${status}" -eq 2 ]
  [ -z "$(stub_calls helm)" ]
}

#!/usr/bin/env bats
# A run's lifecycle from its id alone, as on a machine that did not launch it: every test drives
# the real Makefile in a fresh copy of the repository (its tracked and untracked files, no build/,
# no ../shared), so `make down|status|logs|runs INFRA=... RUN_ID=...` can only ask the
# infrastructure. sky and kubectl are PATH stubs that record their calls (no cloud or Kubernetes
# API server can run here); the local infrastructure is a real network-namespace cluster named
# after the run; AIStudio's shared storage is a directory.

bats_require_minimum_version 1.5.0

setup_file() {
  # One fixture for the whole file, its tests in order: never two of them at once (bats --jobs).
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  export CLONE="${BATS_FILE_TMPDIR}/clone" LOCAL_RUN="lc-local-$$"
  mkdir -p "${CLONE}"
  git -C "${REPO}" ls-files -z -co --exclude-standard |
    (cd "${REPO}" && tar --null -T - -cf -) | tar -C "${CLONE}" -xf -
}

teardown_file() {
  # Whatever a failed test left of the local cluster: the same down the test checks, then a sweep.
  RLAUNCH_CLUSTER_NAME="${LOCAL_RUN}" "${CLONE}/scripts/local-cluster" down >/dev/null 2>&1 || true
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^rl-${LOCAL_RUN}-" || true); do
    # shellcheck disable=SC2046 # one PID per word
    kill -KILL $(ip netns pids "${ns}") 2>/dev/null || true
    ip netns del "${ns}" || true
  done
}

setup() {
  load stub_helper
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  [[ -x "${REPO}/.venv/bin/python" ]] || missing "needs the launcher venv (make setup)"
  stub_command sky
  stub_command kubectl
  stub_reply kubectl config current-context "gke_proj_us-central1_train"
  stub_reply sky api info '{"server": {"url": "http://127.0.0.1:46580", "status": "healthy"}}'
  unset RLAUNCH_SKY RLAUNCH_KUBECTL WORK_ROOT
  # SkyPilot and kubectl read HOME; nothing here may touch the developer's.
  export HOME="${BATS_TEST_TMPDIR}/home"
  mkdir -p "${HOME}"
  NO_JOBS="sky.exceptions.ClusterNotUpError: No in-progress managed jobs."
}

# mk ARGS...: the fresh copy's Makefile with the launcher venv (the copy's own tools/ first).
mk() {
  PYTHONPATH="${CLONE}/tools" make -C "${CLONE}" --no-print-directory VENV="${REPO}/.venv" "$@"
}

# front ARGS...: the fresh copy's scripts/rlaunch, the front door that keeps rlaunch's exit code.
front() {
  PYTHONPATH="${CLONE}/tools" RLAUNCH_VENV="${REPO}/.venv" "${CLONE}/scripts/rlaunch" "$@"
}

fresh() {
  [ ! -e "${CLONE}/build" ] || { echo "build/ exists in the fresh copy"; return 1; }
}

cluster_json() { # cluster_json NAME STATUS CLOUD [LABELLED]: one `sky status -o json` record
  local labels='{}'
  [[ "${4:-yes}" == yes ]] && labels="{\"rlaunch-run\": \"$1\"}"
  printf '{"name": "%s", "status": "%s", "nodes": 2, "accelerators": "{'"'"'H100'"'"': 1}", "cloud": "%s", "launched_at": %s, "labels": %s}' \
    "$1" "$2" "$3" "$((EPOCHSECONDS - 7200))" "${labels}"
}

# ---------------------------------------------------------------- SkyPilot

@test "gcp: make down RUN_ID=exp-7 from an empty build/ asks SkyPilot, then sky down exp-7" {
  fresh
  stub_reply sky status "[$(cluster_json exp-7 UP GCP)]"
  stub_fail sky jobs queue 1 "${NO_JOBS}"
  run mk down INFRA=gcp RUN_ID=exp-7
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"taking down sky cluster exp-7 (UP)"* ]]
  [ "$(stub_calls sky)" = "status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
down -y exp-7" ]
  fresh
}

@test "gcp: a managed job of the run is cancelled by name" {
  stub_reply sky status "Cluster(s) not found: exp-7.
[]"
  stub_reply sky jobs queue '[{"job_id": 3, "job_name": "exp-7", "status": "RECOVERING", "resources": "2x[A100:8]", "submitted_at": 1764500000.5, "labels": null}]'
  run mk down INFRA=gcp RUN_ID=exp-7
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"taking down sky managed job 3 exp-7 (RECOVERING)"* ]]
  [ "$(stub_calls sky)" = "status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
jobs cancel -y -n exp-7" ]
}

@test "gcp: SkyPilot knows no such run: one line naming what was asked and where, exit 0, nothing torn down" {
  stub_reply sky status "Cluster(s) not found: exp-7.
[]"
  stub_reply sky jobs queue '[{"job_id": 1, "job_name": "exp-7", "status": "SUCCEEDED", "resources": "1x[CPU:1+]"}, {"job_id": 2, "job_name": "other", "status": "RUNNING"}]'
  run mk down INFRA=gcp RUN_ID=exp-7
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"no cluster or in-progress managed job of run exp-7: \`sky status -u -o json exp-7 exp-7-inputs\` and \`sky jobs queue -u -o json\` (API server http://127.0.0.1:46580) found none"* ]]
  [[ "${output}" == *"finished: sky managed job 1 exp-7 SUCCEEDED: nothing to do. That server is this machine's own"*"sky api login -e"* ]]
  [ "$(stub_calls sky)" = "status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
api info -o json" ]
}

@test "gcp: SkyPilot cannot be asked: exit 3 with what is missing, never a success" {
  stub_fail sky status 1 "Failed to connect to SkyPilot API server at http://10.0.0.5:46580."
  run mk down INFRA=gcp RUN_ID=exp-7
  [ "${status}" -eq 2 ] # make's own exit for a failed recipe
  [[ "${output}" == *"rlaunch: missing an answer from SkyPilot"*"Failed to connect"* ]]
  # The front door that keeps rlaunch's own code (docs/configuration.md): exit 3.
  run front down INFRA=gcp RUN_ID=exp-7
  [ "${status}" -eq 3 ]
  [ "$(stub_calls sky | grep -c '^down')" -eq 0 ]
  # No sky client at all.
  RLAUNCH_SKY="${BATS_TEST_TMPDIR}/no-such-sky" run front down INFRA=aws RUN_ID=exp-7
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the sky CLI"* ]]
}

@test "gcp: status, logs and dashboard from the id: what SkyPilot reports, then its own commands for the name" {
  stub_reply sky status "[$(cluster_json exp-7 UP GCP)]"
  stub_fail sky jobs queue 1 "${NO_JOBS}"
  run mk status INFRA=gcp RUN_ID=exp-7
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"run exp-7: sky cluster exp-7: UP, 2x H100:1"* ]]
  run mk logs INFRA=gcp RUN_ID=exp-7
  [ "${status}" -eq 0 ]
  run mk dashboard INFRA=gcp RUN_ID=exp-7
  [ "${status}" -eq 0 ]
  [ "$(stub_calls sky)" = "status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
status exp-7
status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
logs exp-7
status -u -o json exp-7 exp-7-inputs
jobs queue -u -o json
status --endpoint 8265 exp-7" ]
  fresh
}

@test "runs INFRA=gcp: rlaunch's clusters and managed jobs by label, SkyPilot asked once" {
  stub_reply sky status "[$(cluster_json exp-7 UP GCP), $(cluster_json mine UP GCP no), $(cluster_json exp-9 STOPPED AWS)]"
  stub_reply sky jobs queue '[{"job_id": 4, "job_name": "exp-8", "status": "RUNNING", "cloud": "GCP", "resources": "2x[H100:8]", "accelerators": {"H100": 8}, "submitted_at": 1764500000, "labels": {"rlaunch-run": "exp-8"}}, {"job_id": 5, "job_name": "someone", "status": "PENDING", "labels": null}]'
  run mk runs INFRA=gcp
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "$(grep '^RUN ID' <<<"${output}")" == "RUN ID"*"INFRA"*"STATE"*"NODES"*"AGE"*"WHERE" ]]
  [[ "${output}" == *"skypilot: asking SkyPilot's API server"* ]]
  [[ "${output}" =~ exp-7\ +gcp\ +UP\ +2x\ H100:1\ +2h\ +sky\ cluster\ exp-7 ]]
  [[ "${output}" =~ exp-8\ +gcp\ +RUNNING\ +2x\ H100:8\ +[0-9]+d\ +sky\ managed\ job\ 4\ exp-8 ]]
  [[ "${output}" != *mine* && "${output}" != *exp-9* && "${output}" != *"job 5"* ]]
  [[ "${output}" == *"1 managed job(s) report no labels"* ]]
  [ "$(stub_calls sky)" = "status -u -o json
jobs queue -u -o json" ]
  [ -z "$(stub_calls kubectl)" ]
}

# ---------------------------------------------------------------- KubeRay

@test "kuberay: make down RUN_ID=exp-7 from an empty build/ deletes by the run's label" {
  fresh
  local kinds="rayjobs.ray.io,configmaps,secrets,persistentvolumeclaims,podmonitors.monitoring.coreos.com"
  stub_reply kubectl api-resources "configmaps
secrets
persistentvolumeclaims
persistentvolumes
podmonitors.monitoring.coreos.com
rayjobs.ray.io"
  stub_reply kubectl get "${kinds}" "rayjob.ray.io/exp-7
configmap/exp-7-artifacts
secret/exp-7-secrets"
  stub_reply kubectl get persistentvolumes "persistentvolume/exp-7-data-default"
  run mk down INFRA=kuberay RUN_ID=exp-7
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"deleting 4 objects of run exp-7 (context gke_proj_us-central1_train)"* ]]
  local sel="-l rlaunch.io/run=exp-7"
  local quoted="${kinds//,/\\,}"
  [ "$(stub_calls kubectl)" = "config current-context
api-resources -o name
get ${quoted} -n default ${sel} -o name
get persistentvolumes ${sel} -o name
delete ${quoted} -n default ${sel} --ignore-not-found --timeout=300s
delete persistentvolumes ${sel} --ignore-not-found --timeout=300s" ]
  fresh
}

@test "kuberay: status, logs and dashboard from the id: the RayJob, its submitter and head service by name" {
  stub_reply kubectl get rayjob '{"status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}}'
  run mk status INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"RayJob exp-7: jobStatus=RUNNING jobDeploymentStatus=Running"* ]]
  run mk logs INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 0 ]
  run mk dashboard INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 0 ]
  [ "$(stub_calls kubectl)" = "get rayjob exp-7 -n default -o json
get pods -n default -l rlaunch.io/run=exp-7 -o json
get job exp-7 -n default -o name
logs -f job/exp-7 -n default --pod-running-timeout=10m
port-forward -n default service/exp-7-head-svc 8265:8265" ]
  fresh
}

@test "kuberay: nothing labelled with the run: one line naming the query, exit 0; another namespace by SET" {
  stub_reply kubectl api-resources "configmaps
rayjobs.ray.io"
  run mk down INFRA=kuberay RUN_ID=exp-7 SET="infra.namespace=team-a"
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing of run exp-7 in namespace team-a of context gke_proj_us-central1_train: \`kubectl get rayjobs.ray.io,configmaps -l rlaunch.io/run=exp-7\` found none: nothing to do"* ]]
  if stub_calls kubectl | grep "^delete"; then return 1; fi
}

@test "kuberay: no context, or an API server that does not answer: exit 3, nothing deleted" {
  stub_fail kubectl config current-context 1 "error: current-context is not set"
  run front down INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing a kubectl context"*"get-credentials"* ]]
  rm "${BATS_TEST_TMPDIR}"/kubectl.rc.* "${BATS_TEST_TMPDIR}"/kubectl.stderr.*
  stub_fail kubectl api-resources 1 "Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout"
  run front down INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing a reachable Kubernetes cluster"*"i/o timeout"* ]]
  stub_fail kubectl get rayjob 1 'Error from server (Forbidden): rayjobs.ray.io "exp-7" is forbidden'
  run front status INFRA=kuberay RUN_ID=exp-7
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing permission to get RayJob exp-7 in namespace default"* ]]
  if stub_calls kubectl | grep "^delete"; then return 1; fi
}

@test "runs INFRA=kuberay: RayJobs by rlaunch's label in every namespace, nodes x GPUs as rlaunch counts them" {
  stub_reply kubectl get --all-namespaces "$(cat "${BATS_TEST_DIRNAME}/../fixtures/lifecycle/rayjobs.json")"
  run mk runs INFRA=kuberay
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" =~ rh-1\ +kuberay\ +RUNNING\ \(Running\)\ +2x\ CPU\ +[0-9]+[dhm]\ +RayJob\ default/rh-1 ]]
  [[ "${output}" =~ big-2\ +kuberay\ +PENDING\ \(Initializing\)\ +4x\ GB200:4\ +[0-9]+[dhm]\ +RayJob\ ml/big-2 ]]
  [ "$(stub_calls kubectl)" = "config current-context
get --all-namespaces rayjobs.ray.io -l app.kubernetes.io/managed-by=rlaunch -o json" ]
}

@test "runs INFRA=kuberay: may not list every namespace: the configured one, and says so" {
  stub_fail kubectl get --all-namespaces 1 'Error from server (Forbidden): rayjobs.ray.io is forbidden: cannot list resource "rayjobs" at the cluster scope'
  stub_reply kubectl get -n '{"apiVersion": "v1", "kind": "List", "items": []}'
  run mk runs INFRA=kuberay
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"may not list RayJobs in every namespace: namespace default only"* ]]
  [[ "${output}" == *"asked: kuberay (kubectl get -n default rayjobs.ray.io -l app.kubernetes.io/managed-by=rlaunch (context gke_proj_us-central1_train))"* ]]
  [ "$(stub_calls kubectl | tail -n1)" = "get -n default rayjobs.ray.io -l app.kubernetes.io/managed-by=rlaunch -o json" ]
}

# ---------------------------------------------------------------- AIStudio (a directory as the storage)

@test "aistudio: launch installs on the storage; with build/ gone, runs, status and down find it there" {
  local root="${BATS_TEST_TMPDIR}/storage" run_id="lc-ais-$$"
  mkdir -p "${root}"
  run mk launch INFRA=aistudio PRESET=rehearsal WORK_ROOT="${root}" RUN_ID="${run_id}"
  [ "${status}" -eq 0 ] || { echo "${output}"; return 1; }
  rm -rf "${CLONE}/build"
  run mk runs INFRA=aistudio WORK_ROOT="${root}"
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" =~ ${run_id}\ +aistudio\ +installed,\ not\ started\ +2x\ CPU ]]
  [[ "${output}" == *"asked: aistudio (${root}/rlaunch/launches/*/run.json)"* ]]
  run mk status INFRA=aistudio WORK_ROOT="${root}" RUN_ID="${run_id}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"not created yet (the task has not started)"* ]]
  run mk down INFRA=aistudio WORK_ROOT="${root}" RUN_ID="${run_id}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"stop the task in the AIStudio console"* ]]
  run mk down INFRA=aistudio WORK_ROOT="${root}" RUN_ID=never-launched
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing of run never-launched on the shared storage: no ${root}/rlaunch/launches/never-launched/run.json: nothing to do"* ]]
  run front down INFRA=aistudio WORK_ROOT="${BATS_TEST_TMPDIR}/not-mounted" RUN_ID="${run_id}"
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the AIStudio shared storage at ${BATS_TEST_TMPDIR}/not-mounted"* ]]
  rm -rf "${CLONE}/build"
}

# ---------------------------------------------------------------- every infrastructure at once

@test "runs: each infrastructure asked once; those that cannot answer are named on one line, exit 0" {
  stub_fail sky status 1 "Failed to connect to SkyPilot API server at http://10.0.0.5:46580."
  stub_fail kubectl config current-context 1 "error: current-context is not set"
  run mk runs
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${lines[-1]}" == "not reachable: skypilot (missing an answer from SkyPilot"*"); kuberay (missing a kubectl context); aistudio (missing the AIStudio shared storage at /mnt/"*")" ]]
  [[ "${output}" == *"asked: local (scripts/local-cluster list"* ]]
  [ "$(stub_calls sky)" = "status -u -o json" ]
  [ "$(stub_calls kubectl)" = "config current-context" ]
}

# ---------------------------------------------------------------- local: a real cluster

@test "local: a cluster named after the run, build/ removed: runs, status, down find it on the host; nothing left" {
  if [[ "${EUID}" -ne 0 ]] || ! command -v ip >/dev/null; then
    missing "needs root and ip (network namespaces)"
  fi
  local hash
  hash="$(printf '%s' "${LOCAL_RUN}" | sha1sum | cut -c1-6)"
  # Formed as `make launch` forms it (the backend's environment for local-cluster), then build/ goes.
  run env RLAUNCH_CLUSTER_NAME="${LOCAL_RUN}" RLAUNCH_NODES=2 RLAUNCH_STATE_DIR="${CLONE}/build/${LOCAL_RUN}/cluster" \
    RLAUNCH_NUM_CPUS=1 RLAUNCH_OBJECT_STORE_BYTES=80000000 RLAUNCH_STOP_GRACE_S=3 RLAUNCH_DEADLINE_S=180 \
    RLAUNCH_RAY="${REPO}/.venv/bin/ray" "${CLONE}/scripts/local-cluster" up
  [ "${status}" -eq 0 ] || { echo "${output}"; return 1; }
  local pids
  pids="$(for r in 0 1; do ip netns pids "rl-${LOCAL_RUN}-${r}"; done)"
  [ -n "${pids}" ]
  rm -rf "${CLONE}/build"

  run mk runs INFRA=local
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" =~ ${LOCAL_RUN}\ +local\ +up\ +2x\ CPU\ +[0-9]+[smhd]\ +namespaces\ rl-${LOCAL_RUN}-\* ]]
  run mk status INFRA=local RUN_ID="${LOCAL_RUN}"
  echo "${output}"
  [[ "${output}" == *"${LOCAL_RUN} (netns): head "* ]]
  [[ "${output}" =~ 1\ +rl-${LOCAL_RUN}-1\ +[0-9.]+\ +yes ]]
  [[ "${output}" == *"job ${LOCAL_RUN}: not on this cluster"* ]]

  run mk down INFRA=local RUN_ID="${LOCAL_RUN}"
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"${LOCAL_RUN}: down (stopped "*" processes, deleted 3 namespaces)"* ]]
  run ip netns list
  [[ "${output}" != *"rl-${LOCAL_RUN}-"* ]]
  local pid
  for pid in ${pids}; do
    [[ "$(cat "/proc/${pid}/stat" 2>/dev/null | awk '{print $3}')" =~ ^(Z|)$ ]] || { echo "still running: ${pid}"; return 1; }
  done
  [ ! -e "/tmp/rl${hash}" ]
  fresh

  run mk down INFRA=local RUN_ID="${LOCAL_RUN}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"${LOCAL_RUN}: nothing to remove (no namespace rl-${LOCAL_RUN}-* in \`ip netns list\`, no /tmp/rl${hash})"* ]]
  run mk status INFRA=local RUN_ID="${LOCAL_RUN}"
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"no cluster of run ${LOCAL_RUN} on this host"* ]]
}

@test "no INFRA and no cache: exit 2 asking where the run is, nothing asked" {
  run front down RUN_ID=exp-7
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"INFRA=''"*"the infrastructure run exp-7 is on"*"make runs"* ]]
  [ -z "$(stub_calls sky)$(stub_calls kubectl)" ]
}

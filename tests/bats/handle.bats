#!/usr/bin/env bats
# status, logs, down, dashboard and summary act on a run from its handle alone (issue 43): a copy of
# rlaunch's tools/ and scripts/ without configs/ (so no preset and no config layer can be read), one
# run.json per infrastructure as `make launch` leaves it in OUT, written here by hand, and each
# infrastructure's client as a PATH stub that records its calls (sky, kubectl); the local host and
# AIStudio's shared storage are real directories. Every name, namespace and port the verbs use is
# one only the handle holds.

load stub_helper

setup_file() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  export COPY="${BATS_FILE_TMPDIR}/copy"
  mkdir -p "${COPY}"
  cp -r "${REPO}/tools" "${REPO}/scripts" "${COPY}/"
  find "${COPY}" -name __pycache__ -prune -exec rm -rf {} +
}

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  PY="${REPO}/.venv/bin/python"
  [[ -x "${PY}" ]] || missing "needs the launcher venv (make setup)"
  [ ! -e "${COPY}/configs" ]
  stub_command sky
  stub_command kubectl
  unset RLAUNCH_SKY RLAUNCH_KUBECTL GITHUB_STEP_SUMMARY
  OUT="${BATS_TEST_TMPDIR}/out"
  STORAGE="${BATS_TEST_TMPDIR}/storage"
  mkdir -p "${OUT}" "${STORAGE}"
}

# rl VERB ARGS...: the copy's rlaunch, as the Makefile runs it.
rl() {
  PYTHONPATH="${COPY}/tools" "${PY}" -m rlaunch "$@"
}

# says VERB CODE TEXT: `rl VERB --OUT=$OUT` exits CODE and prints TEXT.
says() {
  run rl "$1" --OUT="${OUT}"
  echo "${output}"
  [ "${status}" -eq "$2" ] || return 1
  [[ "${output}" == *"$3"* ]] || return 1
}

# handle RUN_ID INFRA NAME KIND NAMESPACE STORAGE RUN_DIR: OUT/run.json, a 2-node CPU run of trl whose
# dashboard and GCS listen on 8266 and 6390 (not Ray's defaults) and which may take 5 s to form.
handle() {
  cat >"${OUT}/run.json" <<JSON
{"run_id": "$1", "place": {"infra": "$2", "namespace": "$5", "storage": "$6", "storage_here": ""},
 "name": "$3", "kind": "$4", "run_dir": "$7", "out": "${OUT}", "framework": "trl",
 "dashboard_port": 8266, "ray_port": 6390, "wait_s": 5, "nodes": 2, "gpus_per_node": 0, "accelerator": ""}
JSON
}

@test "the copy has no config: a run without a handle here cannot be looked up in it" {
  run rl status --INFRA=gcp --RUN_ID=not-launched-here
  [ "${status}" -ne 0 ]
  [[ "${output}" == *"configs/defaults.yaml"* ]]
  [ -z "$(stub_calls sky)" ]
}

@test "skypilot: each verb asks sky about the handle's cluster by name, the dashboard on its port" {
  handle h-sky gcp h-sky-cluster cluster "" "" /storage/runs/x/h-sky
  for verb in status logs dashboard down; do
    run rl "${verb}" --OUT="${OUT}"
    echo "${output}"
    [ "${status}" -eq 0 ]
  done
  [ "$(stub_calls sky)" = "status h-sky-cluster h-sky-cluster-inputs
logs h-sky-cluster
status --endpoint 8266 h-sky-cluster
down -y h-sky-cluster
status -u -o json h-sky-cluster-inputs" ]
}

@test "skypilot: a managed job in the handle is followed and cancelled as one" {
  handle h-job aws h-job managed-job "" "" /storage/runs/x/h-job
  for verb in status logs down; do
    run rl "${verb}" --OUT="${OUT}"
    [ "${status}" -eq 0 ]
  done
  [ "$(stub_calls sky)" = "jobs queue
jobs logs -n h-job
jobs cancel -y -n h-job" ]
}

@test "kuberay: the RayJob, its submitter, its head service and its objects in the handle's namespace" {
  handle h-kr kuberay r7-h-kr rayjob team-a "" /data/runs/x/h-kr
  stub_reply kubectl get rayjob '{"status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}}'
  stub_reply kubectl get pods '{"items": []}'
  stub_reply kubectl config current-context "ctx"
  stub_reply kubectl api-resources "rayjobs.ray.io configmaps"
  stub_reply kubectl get "rayjobs.ray.io,configmaps" "rayjob.ray.io/r7-h-kr"
  for verb in status logs dashboard; do
    run rl "${verb}" --OUT="${OUT}"
    echo "${output}"
    [ "${status}" -eq 0 ]
  done
  [[ "${output}" == *"http://localhost:8266"* ]]
  run rl down --OUT="${OUT}"
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"deleting 1 objects of run h-kr (context ctx): rayjob.ray.io/r7-h-kr"* ]]
  [ "$(stub_calls kubectl)" = "get rayjob r7-h-kr -n team-a -o json
get pods -n team-a -l rlaunch.io/run=h-kr -o json
get job r7-h-kr -n team-a -o name
logs -f job/r7-h-kr -n team-a --pod-running-timeout=10m
port-forward -n team-a service/r7-h-kr-head-svc 8266:8266
config current-context
api-resources -o name
get rayjobs.ray.io\\,configmaps -n team-a -l rlaunch.io/run=h-kr -o name
delete rayjobs.ray.io\\,configmaps -n team-a -l rlaunch.io/run=h-kr --ignore-not-found --timeout=300s" ]
}

@test "local: status, logs and down find the cluster by the handle's name and the run in its run directory" {
  local run_id="h-local-$$" run_dir="${STORAGE}/runs/x/h-local-$$"
  mkdir -p "${run_dir}/logs"
  echo "step 1/2 reward 0.5" >"${run_dir}/logs/job.log"
  handle "${run_id}" local "${run_id}" cluster "" "${STORAGE}" "${run_dir}"
  says status 0 "no cluster of run ${run_id} on this host"
  [[ "${output}" == *"run directory ${run_dir}: no verification.json"* ]]
  says logs 0 "step 1/2 reward 0.5"
  says down 0 "${run_id}: nothing to remove"
  says dashboard 3 "none is up on this host"
  says summary 0 "run dir       ${run_dir}"
  [ "${lines[0]}" = "run ${run_id} (trl on local)" ]
}

@test "aistudio: the launch and the run directory on the handle's storage" {
  local run_dir="${STORAGE}/runs/x/h-ais"
  mkdir -p "${run_dir}"
  echo '{"passed": true}' >"${run_dir}/verification.json"
  handle h-ais aistudio rlaunch/launches/h-ais launch "" "${STORAGE}" "${run_dir}"
  says status 0 "Run directory ${run_dir}: exists"
  [[ "${output}" == *"verification.json: passed"* ]]
  says down 0 "(${STORAGE}/rlaunch/launches/h-ais) and the run's outputs (${run_dir})"
  says dashboard 0 "TensorBoard (${STORAGE}/runs/x/\${RUN_ID}/tensorboard)"
  [ -z "$(stub_calls sky)$(stub_calls kubectl)" ]
}

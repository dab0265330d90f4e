#!/usr/bin/env bats
# The SkyPilot backend's lifecycle through rlaunch's CLI (what `make launch|status|logs|dashboard|
# down INFRA=gcp ...` runs), with a PATH stub for `sky` that records every call. Launch still plans
# for real first (SkyPilot's parser in an isolated HOME), so each launch test costs a few seconds.
# WANDB_API_KEY=sekret-value is in the environment of every test: it must reach `sky` by name only.

load stub_helper

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  PY="${REPO}/.venv/bin/python"
  [[ -x "${PY}" ]] || missing "needs the launcher venv (make setup)"
  stub_command sky
  export STUB_ENV_NAMES="WANDB_API_KEY HF_TOKEN"
  export WANDB_API_KEY="sekret-value"
  unset HF_TOKEN RLAUNCH_SKY
  OUT="${BATS_TEST_TMPDIR}/out"
  RUN_ID="bats-sky-$$"
  stub_reply sky check '{"default": {"GCP": ["compute", "storage"], "Kubernetes": ["compute"]}}'
  # `rlaunch launch` records the last run: in this test's own file, not the developer's build/last-run
  # (and not another test's, with bats --jobs).
  export RLAUNCH_LAST_RUN="${BATS_TEST_TMPDIR}/last-run"
}

# rl VERB ARGS...: python -m rlaunch as the Makefile runs it.
rl() {
  PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch "$@"
}

launch() {
  rl launch --INFRA="${INFRA:-gcp}" --RUN_ID="${RUN_ID}" --OUT="${OUT}" --SET="secrets=[WANDB_API_KEY]" "$@"
}

# no_secret_anywhere: the value is in no recorded argv, no stub record, no output, no rendered file.
no_secret_anywhere() {
  if grep -rlF "sekret-value" "${BATS_TEST_TMPDIR}"/sky.* "${OUT}"; then return 1; fi
  [[ "${output}" != *sekret-value* ]]
}

@test "launch: sky check, the inputs' CPU step, then sky launch by cluster name with the secret by name" {
  run launch
  [ "${status}" -eq 0 ]
  [ "$(stub_calls sky)" = "check -o json gcp
launch --down -c ${RUN_ID}-inputs ${OUT}/inputs.sky.yaml --secret WANDB_API_KEY -y
launch -c ${RUN_ID} ${OUT}/task.yaml --secret WANDB_API_KEY -y" ]
  # sky saw the variable (it reads the value itself), and the value went nowhere else.
  grep -qx "WANDB_API_KEY=set" "${BATS_TEST_TMPDIR}/sky.env"
  no_secret_anywhere
  [[ "${output}" == *"RUN_ID=${RUN_ID}"* ]]
}

@test "launch SPOT=1: one managed job, the CPU step then the GPU task (sky jobs launch of the pipeline)" {
  # A managed job restarts the run, so it needs a checkpoint before the end (the preset saves only there).
  run rl launch --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}" --SET="secrets=[WANDB_API_KEY] train.save_freq=20" --SPOT=1
  [ "${status}" -eq 0 ]
  [ "$(stub_calls sky)" = "check -o json gcp
jobs launch -n ${RUN_ID} ${OUT}/pipeline.sky.yaml --secret WANDB_API_KEY -y" ]
  no_secret_anywhere
}

@test "launch INFRA=k8s checks SkyPilot's kubernetes access" {
  INFRA=k8s run launch
  [ "${status}" -eq 0 ]
  [ "$(stub_calls sky | head -n1)" = "check -o json kubernetes" ]
}

@test "launch with the cloud not enabled: names the sky check step, exits 3, launches nothing" {
  stub_reply sky check '{"default": {"AWS": ["compute"]}}'
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing SkyPilot access to gcp"*"sky check gcp"* ]]
  [ "$(stub_calls sky)" = "check -o json gcp" ]
}

@test "launch when sky check itself fails: exits 3 with its last line" {
  stub_fail sky check 1 "No cloud access: credentials not found"
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"credentials not found"*"sky check gcp"* ]]
  [ "$(stub_calls sky)" = "check -o json gcp" ]
}

@test "launch with a named secret unset: exits 3 naming it, before calling sky" {
  unset WANDB_API_KEY
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing WANDB_API_KEY in your environment"* ]]
  [ -z "$(stub_calls sky)" ]
}

@test "launch without the sky CLI: exits 3 and says how to get it" {
  export RLAUNCH_SKY="${BATS_TEST_TMPDIR}/no-such-sky"
  run launch
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"missing the sky CLI"*"make setup"* ]]
}

@test "sky launch failing: launch exits with its code" {
  stub_fail sky launch 7 "sky: provisioning failed"
  run launch
  [ "${status}" -eq 7 ]
}

@test "status, logs, dashboard, down of a cluster run the exact sky commands" {
  rl render --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  for verb in status logs dashboard down; do
    run rl "${verb}" --OUT="${OUT}"
    [ "${status}" -eq 0 ]
  done
  [ "$(stub_calls sky)" = "status ${RUN_ID} ${RUN_ID}-inputs
logs ${RUN_ID}
status --endpoint 8265 ${RUN_ID}
down -y ${RUN_ID}
status -u -o json ${RUN_ID}-inputs" ]
}

@test "down takes down a CPU step's cluster left behind, says so, twice is fine, never a bucket" {
  rl render --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  stub_reply sky status -u -o "[{\"name\": \"${RUN_ID}-inputs\", \"status\": \"UP\", \"labels\": {\"rlaunch-run\": \"${RUN_ID}\"}}]"
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"taking down ${RUN_ID}-inputs, the run's CPU step (UP), left behind"*"the buckets stay"* ]]
  # Gone now: SkyPilot lists nothing, and down does nothing more.
  stub_reply sky status -u -o "[]"
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" != *"CPU step"* ]]
  [ "$(stub_calls sky)" = "down -y ${RUN_ID}
status -u -o json ${RUN_ID}-inputs
down -y ${RUN_ID}-inputs
down -y ${RUN_ID}
status -u -o json ${RUN_ID}-inputs" ]
}

@test "down of a run known only by its id finds its CPU step's cluster" {
  stub_reply sky status -u -o "[{\"name\": \"${RUN_ID}-inputs\", \"status\": \"INIT\", \"labels\": {\"rlaunch-run\": \"${RUN_ID}\"}}]"
  stub_fail sky jobs queue 1 "No in-progress managed jobs."
  run rl down --INFRA=gcp --RUN_ID="${RUN_ID}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"taking down sky cluster ${RUN_ID}-inputs (INIT)"* ]]
  [ "$(stub_calls sky | grep -c '^down')" -eq 1 ]
  stub_calls sky | grep -qx "down -y ${RUN_ID}-inputs"
  [[ "$(stub_calls sky)" != *storage* ]]
}

@test "ssh and ray-status go to the cluster's ssh alias; ray-status asks rlaunch's Ray, not SkyPilot's" {
  stub_command ssh
  rl render --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  run rl ssh --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  run rl ray_status --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  local port
  port="$(sed -n 's/^  ray_port: *\([0-9]*\).*/\1/p' "${REPO}/configs/defaults.yaml")"
  # One remote command (the stub records each argument %q-quoted).
  [ "$(stub_calls ssh)" = "${RUN_ID}
${RUN_ID} $(printf '%q' "ray status --address 127.0.0.1:${port} && ray summary tasks --address http://127.0.0.1:8265")" ]
  # What ssh answers is what make answers.
  stub_fail ssh "${RUN_ID}" 255 "ssh: Could not resolve hostname ${RUN_ID}"
  run rl ssh --OUT="${OUT}"
  [ "${status}" -eq 255 ]
}

@test "ssh of a managed job or a KubeRay run says why not" {
  stub_command ssh
  rl render --INFRA=aws --SPOT=1 --SET=train.save_freq=20 --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  run rl ray_status --OUT="${OUT}"
  [ "${status}" -eq 1 ]
  [[ "${output}" == *"belongs to the jobs controller"*"make logs RUN_ID=${RUN_ID}"* ]]
  rl render --INFRA=kuberay --RUN_ID="${RUN_ID}" --OUT="${OUT}-kr"
  run rl ssh --OUT="${OUT}-kr"
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"INFRA"*"kuberay"*"a SkyPilot infrastructure"* ]]
  [ -z "$(stub_calls ssh)" ]
}

@test "dashboard prints the cluster's endpoint as a URL to open" {
  rl render --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  stub_reply sky status --endpoint "34.1.2.3:8265"
  run rl dashboard --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"skypilot: Ray dashboard of run ${RUN_ID}: open http://34.1.2.3:8265"* ]]
  [ "$(stub_calls sky)" = "status --endpoint 8265 ${RUN_ID}" ]
}

@test "status, logs, dashboard, down of a managed job run the exact sky jobs commands" {
  rl render --INFRA=aws --SPOT=1 --SET=train.save_freq=20 --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  for verb in status logs dashboard down; do
    run rl "${verb}" --OUT="${OUT}"
    [ "${status}" -eq 0 ]
  done
  [ "$(stub_calls sky)" = "jobs queue
jobs logs -n ${RUN_ID}
jobs cancel -y -n ${RUN_ID}" ]
}

@test "down is idempotent: a cluster that is gone, twice" {
  rl render --INFRA=gcp --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  stub_reply sky down "Cluster(s) not found (tip: see \`sky status\`)."
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [ "$(stub_calls sky | sort -u)" = "down -y ${RUN_ID}
status -u -o json ${RUN_ID}-inputs" ]
}

@test "down is idempotent: no managed job to cancel (controller down, or job finished)" {
  rl render --INFRA=gcp --SPOT=1 --SET=train.save_freq=20 --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  stub_fail sky jobs cancel 1 "sky.exceptions.ClusterNotUpError: All managed jobs should have finished."
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing to cancel"* ]]
  rm -f "${BATS_TEST_TMPDIR}"/sky.rc.* "${BATS_TEST_TMPDIR}"/sky.stderr.*
  stub_reply sky jobs cancel "No running job found with name '${RUN_ID}'."
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 0 ]
}

@test "down fails when sky down fails for another reason" {
  rl render --INFRA=gcp --SPOT=1 --SET=train.save_freq=20 --RUN_ID="${RUN_ID}" --OUT="${OUT}"
  stub_fail sky jobs cancel 1 "RuntimeError: Please specify the job ID instead of the job name."
  run rl down --OUT="${OUT}"
  [ "${status}" -eq 1 ]
}

@test "down with nothing rendered at OUT and no RUN_ID: exit 2 asking which run, no sky call" {
  run rl down --OUT="${BATS_TEST_TMPDIR}/never-rendered"
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"RUN_ID=''"*"never-rendered has no run.json"*"make runs"* ]]
  [ -z "$(stub_calls sky)" ]
}

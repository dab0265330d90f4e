#!/usr/bin/env bats
# scripts/ray-down: stops exactly the Ray that ray-up started on its node (one head in a network
# namespace here; "only its own node" is covered in ray-up.bats on a 2-node cluster), is fine to
# run twice or with nothing started, and never takes a reused session id for its own. The last
# test stops the Ray the one before it started.

bats_require_minimum_version 1.5.0

setup_file() {
  # One fixture for the whole file, its tests in order: never two of them at once (bats --jobs).
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  load test_helper
  need_netns
  netns_up 1
  export RLAUNCH_RAY
  RLAUNCH_RAY="$(test_ray)"
}

teardown_file() {
  load test_helper
  netns_down
}

setup() {
  load test_helper
}

@test "--help prints the header" {
  run "${SCRIPTS}/ray-down" --help
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"RLAUNCH_TEMP_DIR"* && "${output}" == *"RLAUNCH_STOP_GRACE_S"* && "${output}" == *"Exit:"* ]]
}

@test "bad input exits 2 naming the variable" {
  run env RLAUNCH_STOP_GRACE_S=soon "${SCRIPTS}/ray-down"
  [ "${status}" -eq 2 ]
  [[ "${output}" == "ray-down: RLAUNCH_STOP_GRACE_S='soon' is not allowed"* ]]
  run env RLAUNCH_TEMP_DIR=relative/dir "${SCRIPTS}/ray-down"
  [ "${status}" -eq 2 ]
  [[ "${output}" == "ray-down: RLAUNCH_TEMP_DIR='relative/dir' is not allowed"* ]]
}

@test "nothing started: exit 0" {
  run env RLAUNCH_TEMP_DIR="${BATS_TEST_TMPDIR}/never" "${SCRIPTS}/ray-down"
  [ "${status}" -eq 0 ]
  [[ "${output}" == "ray-down: nothing to stop"* ]]
}

@test "a reused session id is not taken for ours: an unrelated process survives" {
  local tmp="${BATS_TEST_TMPDIR}/stale"
  mkdir -p "${tmp}"
  setsid sleep 300 &
  local stranger=$!
  printf 'role=head\nnode_ip=10.0.0.1\nhead=10.0.0.1:6379\nsid=%s\ntemp_dir=%s\n' "${stranger}" "${tmp}" \
    >"${tmp}/rlaunch-ray.state"
  run env RLAUNCH_TEMP_DIR="${tmp}" "${SCRIPTS}/ray-down"
  local alive=0
  kill -0 "${stranger}" && alive=1
  kill "${stranger}" || true
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"is not running"* ]]
  [ "${alive}" -eq 1 ]
  [ ! -e "${tmp}/rlaunch-ray.state" ]
}

@test "Ray killed behind ray-up's back: the stale state does not count, ray-up starts afresh" {
  run ray_up 0 1 RLAUNCH_DEADLINE_S=180
  [ "${status}" -eq 0 ]
  # shellcheck disable=SC2046 # one PID per word
  kill -KILL $(ns_pids 0)
  wait_for 10 ns_empty 0
  [ -e "$(ns_tmp 0)/rlaunch-ray.state" ]
  run ray_up 0 1 RLAUNCH_DEADLINE_S=180
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" != *"already running"* && "${output}" == *"starting the head"* ]]
  [ "$(ns_count 0 raylet)" -eq 1 ]
  touch "${BATS_FILE_TMPDIR}/up"
}

@test "ray-down stops every process of the node, then a second ray-down is a no-op" {
  [[ -f "${BATS_FILE_TMPDIR}/up" ]] || skip "the earlier test did not start Ray"
  [ "$(ns_count 0 raylet)" -eq 1 ]
  [ "$(ns_count 0 gcs_server)" -eq 1 ]
  local before
  before="$(ns_pids 0 | wc -l)"
  run ray_down 0
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" =~ ^"ray-down: stopped "([0-9]+)" processes of $(ns_ip 0)" ]]
  ((BASH_REMATCH[1] >= before))
  [ -z "$(ns_pids 0)" ]
  [ ! -e "$(ns_tmp 0)/rlaunch-ray.state" ]
  run ray_down 0
  [ "${status}" -eq 0 ]
  [[ "${output}" == "ray-down: nothing to stop"* ]]
}

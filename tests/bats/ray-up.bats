#!/usr/bin/env bats
# scripts/ray-up on a real cluster of network-namespace nodes (2 Ray nodes, and a third namespace
# that never runs Ray). The tests build on each other in file order: the worker that starts before
# the head forms the cluster the later tests use. Deadlines are short on purpose.

bats_require_minimum_version 1.5.0

setup_file() {
  # One fixture for the whole file, its tests in order: never two of them at once (bats --jobs).
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  load test_helper
  need_netns
  netns_up 3
  export RLAUNCH_RAY
  RLAUNCH_RAY="$(test_ray)"
  export FORMED="${BATS_FILE_TMPDIR}/formed"
}

teardown_file() {
  load test_helper
  netns_down
}

setup() {
  load test_helper
}

need_cluster() {
  [[ -f "${FORMED}" ]] || skip "the cluster of the earlier test did not form"
}

@test "--help prints the header: usage, every variable, exit codes" {
  run "${SCRIPTS}/ray-up" --help
  [ "${status}" -eq 0 ]
  for var in RLAUNCH_NODE_RANK RLAUNCH_NODE_IPS RLAUNCH_HEAD_IP RLAUNCH_NUM_NODES RLAUNCH_NODE_IP \
    RLAUNCH_GPUS_PER_NODE RLAUNCH_NUM_GPUS RLAUNCH_NUM_CPUS RLAUNCH_EXPECT_CPUS \
    RLAUNCH_OBJECT_STORE_BYTES RLAUNCH_RAY_PORT RLAUNCH_DASHBOARD_PORT RLAUNCH_TEMP_DIR \
    RLAUNCH_DEADLINE_S RLAUNCH_RAY SKYPILOT_NODE_RANK SKYPILOT_NODE_IPS Exit: Usage:; do
    [[ "${output}" == *"${var}"* ]] || { echo "missing ${var}"; return 1; }
  done
  [[ "${output}" != *"set -E"* ]]
}

@test "bad input exits 2 with one line naming the variable, before starting anything" {
  local ray
  ray="$(test_ray)"
  check() { # check VAR_IN_MESSAGE ENV...
    local want="$1"
    shift
    run env -i PATH="${PATH}" RLAUNCH_RAY="${ray}" "$@" "${SCRIPTS}/ray-up"
    [ "${status}" -eq 2 ] || { echo "$*: exit ${status}: ${output}"; return 1; }
    [[ "${output}" == "ray-up: "*"${want}"* ]] || { echo "$*: ${output}"; return 1; }
    [ "${#lines[@]}" -eq 1 ]
  }
  check "RLAUNCH_NUM_NODES='0'" RLAUNCH_NUM_NODES=0
  check "RLAUNCH_NUM_NODES='two'" RLAUNCH_NUM_NODES=two
  check "RLAUNCH_NODE_IPS lists 2 IPs but RLAUNCH_NUM_NODES=3" RLAUNCH_NUM_NODES=3 RLAUNCH_NODE_IPS=10.9.9.1,10.9.9.2
  check "SKYPILOT_NUM_NODES='0'" SKYPILOT_NUM_NODES=0
  check "RLAUNCH_NODE_RANK='2'" RLAUNCH_NODE_RANK=2 RLAUNCH_NODE_IPS=10.9.9.1,10.9.9.2
  check "SKYPILOT_NODE_RANK='-1'" SKYPILOT_NODE_RANK=-1
  check "RLAUNCH_HEAD_IP is not set" RLAUNCH_NODE_RANK=1 RLAUNCH_NUM_NODES=2
  check "RLAUNCH_NODE_IPS has '10.9.9.1;rm'" "RLAUNCH_NODE_IPS=10.9.9.1;rm"
  check "RLAUNCH_RAY_PORT='70000'" RLAUNCH_RAY_PORT=70000
  check "SKYPILOT_NUM_GPUS_PER_NODE='x'" SKYPILOT_NUM_GPUS_PER_NODE=x
  check "RLAUNCH_DEADLINE_S='0'" RLAUNCH_DEADLINE_S=0
  check "RLAUNCH_OBJECT_STORE_BYTES='1000'" RLAUNCH_OBJECT_STORE_BYTES=1000
  check "RLAUNCH_TEMP_DIR='tmp/ray'" RLAUNCH_TEMP_DIR=tmp/ray
  check "RLAUNCH_TEMP_DIR='/tmp/a-path-far-too-long-for-ray-unix-sockets'" \
    RLAUNCH_TEMP_DIR=/tmp/a-path-far-too-long-for-ray-unix-sockets
  check "RLAUNCH_RAY='/nonexistent/ray'" RLAUNCH_RAY=/nonexistent/ray
  run "${SCRIPTS}/ray-up" --head
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"unexpected argument '--head'"* ]]
}

@test "the head never comes: a worker fails by its deadline, naming the head" {
  local start=${SECONDS} head
  head="${NS_NET}.200" # on the subnet, but no node has it
  run ray_up 1 2 RLAUNCH_HEAD_IP="${head}" RLAUNCH_DEADLINE_S=3
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"the head ${head}:6379 was not reachable within 3 s"* ]]
  ((SECONDS - start < 15))
  [ -z "$(ns_pids 1)" ] # nothing left running
}

@test "a worker whose python cannot import ray fails at once (exit 4), naming RLAUNCH_RAY_PYTHON" {
  local start=${SECONDS} py="${BATS_TEST_TMPDIR}/python-without-site"
  # The test environment's python without its site-packages: no ray to import.
  printf '#!/bin/sh\nexec "%s" -I -S "$@"\n' "$(dirname "$(test_ray)")/python" >"${py}"
  chmod +x "${py}"
  run ray_up 1 2 RLAUNCH_HEAD_IP="${NS_NET}.200" RLAUNCH_RAY_PYTHON="${py}" RLAUNCH_DEADLINE_S=60
  [ "${status}" -eq 4 ]
  [[ "${output}" == *"RLAUNCH_RAY_PYTHON='${py}' cannot import Ray's CLI"* ]]
  ((SECONDS - start < 15)) # not at the 60 s deadline
  [ -z "$(ns_pids 1)" ]
}

@test "the head's port taken by something else: exit 4, no second Ray" {
  local py
  py="$(dirname "$(test_ray)")/python"
  # A plain command (not the in_ns function) so that $! is the server itself.
  ip netns exec "$(ns_name 2)" "${py}" -m http.server --bind "$(ns_ip 2)" 6379 >/dev/null 2>&1 &
  local server=$!
  # shellcheck disable=SC2016 # expanded by the inner bash
  wait_for 20 in_ns 2 bash -c 'exec 3<>"/dev/tcp/$1/6379"' _ "$(ns_ip 2)"
  run in_ns 2 env RLAUNCH_RAY="$(test_ray)" RLAUNCH_NODE_IP="$(ns_ip 2)" RLAUNCH_TEMP_DIR="$(ns_tmp 2)" \
    RLAUNCH_DEADLINE_S=10 "${SCRIPTS}/ray-up"
  kill "${server}"
  wait "${server}" || true
  [ "${status}" -eq 4 ]
  [[ "${output}" == *"$(ns_ip 2):6379 is already in use by something ray-up did not start"* ]]
  [ "$(ns_count 2 raylet)" -eq 0 ]
}

@test "a worker started before the head waits, then joins; the head reports 2/2 nodes" {
  local wlog="${BATS_FILE_TMPDIR}/worker.log"
  ray_up 1 2 RLAUNCH_DEADLINE_S=180 >"${wlog}" 2>&1 &
  local worker=$!
  wait_for 30 grep -q "the head $(ns_ip 0):6379 is not up yet" "${wlog}"
  run ray_up 0 2 RLAUNCH_DEADLINE_S=180
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"ray-up: head $(ns_ip 0):6379 ready: 2/2 nodes, 0 GPUs, 2 CPUs in "* ]]
  local wrc=0
  wait "${worker}" || wrc=$?
  cat "${wlog}"
  [ "${wrc}" -eq 0 ]
  grep -q "ray-up: worker $(ns_ip 1) joined $(ns_ip 0):6379 in" "${wlog}"
  [ "$(ns_count 0 raylet)" -eq 1 ]
  [ "$(ns_count 1 raylet)" -eq 1 ]
  touch "${FORMED}"
}

@test "ray-up again on the head exits 0, starts nothing, and still reports the cluster" {
  need_cluster
  local before
  before="$(ns_pids 0 | sort)"
  run ray_up 0 2 RLAUNCH_DEADLINE_S=60
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"Ray already running on $(ns_ip 0)"* ]]
  [[ "${output}" == *"ready: 2/2 nodes"* ]]
  [ "$(ns_count 0 raylet)" -eq 1 ]
  [ "$(ns_count 0 gcs_server)" -eq 1 ]
  # The same Ray: its daemons are the ones that ran before.
  for pid in $(ns_pids 0); do
    if [[ "$(cat "/proc/${pid}/comm")" == raylet ]]; then grep -qx "${pid}" <<<"${before}"; fi
  done
}

@test "ray-up again on a worker exits 0 at once: already joined" {
  need_cluster
  run ray_up 1 2 RLAUNCH_DEADLINE_S=60
  [ "${status}" -eq 0 ]
  [[ "${output}" == "ray-up: worker $(ns_ip 1) already joined $(ns_ip 0):6379" ]]
  [ "$(ns_count 1 raylet)" -eq 1 ]
}

@test "a worker that never arrives: the head fails by its deadline, saying how many and which IP" {
  need_cluster
  local start=${SECONDS}
  run ray_up 0 3 RLAUNCH_DEADLINE_S=4
  echo "${output}"
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"1 of 3 nodes missing (2 registered); not joined: $(ns_ip 2);"* ]]
  [[ "${output}" == *"did not form within 4 s"* ]]
  ((SECONDS - start < 20))
}

@test "the head also waits for the GPUs and CPUs it is told to expect" {
  need_cluster
  run ray_up 0 2 RLAUNCH_DEADLINE_S=3 RLAUNCH_GPUS_PER_NODE=1
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"GPUs 0/2"* ]]
  run ray_up 0 2 RLAUNCH_DEADLINE_S=3 RLAUNCH_EXPECT_CPUS=3
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"CPUs 2/3"* ]]
  run ray_up 0 2 RLAUNCH_DEADLINE_S=30 RLAUNCH_EXPECT_CPUS=2
  [ "${status}" -eq 0 ]
}

@test "ray-down on a worker stops that node only; the head keeps running" {
  need_cluster
  run ray_down 1
  [ "${status}" -eq 0 ]
  [[ "${output}" == "ray-down: stopped "*" processes of $(ns_ip 1) (head $(ns_ip 0):6379)" ]]
  [ -z "$(ns_pids 1)" ]
  [ "$(ns_count 0 raylet)" -eq 1 ]
  [ "$(ns_count 0 gcs_server)" -eq 1 ]
}

#!/usr/bin/env bats
# scripts/local-cluster: up forms a real 2-node cluster (two namespaces, two IPs, two raylets),
# status and exec work, up again changes nothing, down leaves no process, namespace, link or temp
# dir behind and is idempotent; then the same for the one-node loopback fallback. The tests build
# on each other in file order.

bats_require_minimum_version 1.5.0

setup_file() {
  # One fixture for the whole file, its tests in order: never two of them at once (bats --jobs).
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  load test_helper
  need_netns
  export RLAUNCH_CLUSTER_NAME="lct$$" RLAUNCH_NODES=2 RLAUNCH_NUM_CPUS=1 \
    RLAUNCH_OBJECT_STORE_BYTES=80000000 RLAUNCH_STOP_GRACE_S=3 RLAUNCH_DEADLINE_S=180
  export RLAUNCH_STATE_DIR="${BATS_FILE_TMPDIR}/state" RLAUNCH_RAY
  RLAUNCH_RAY="$(test_ray)"
  export HASH NET PIDS_FILE="${BATS_FILE_TMPDIR}/pids" LOOP="lcl$$" ORPHAN="lco$$"
  HASH="$(printf '%s' "${RLAUNCH_CLUSTER_NAME}" | sha1sum | cut -c1-6)"
  NET="10.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))"
  export RLAUNCH_SUBNET="${NET}.0/24"
  # A state dir the nobody user can write (the bats temp dir is root's only).
  export NOBODY_DIR
  NOBODY_DIR="$(mktemp -d /tmp/rlnr.XXXXXX)"
  chmod 777 "${NOBODY_DIR}"
}

teardown_file() {
  load test_helper
  rm -rf "${NOBODY_DIR:?}"
  # Whatever a failed test left: the same `down` the tests check, then a blunt sweep.
  "${SCRIPTS}/local-cluster" down >/dev/null 2>&1 || true
  RLAUNCH_CLUSTER_NAME="${LOOP}" RLAUNCH_STATE_DIR="${BATS_FILE_TMPDIR}/loop" \
    "${SCRIPTS}/local-cluster" down >/dev/null 2>&1 || true
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^rl-(${RLAUNCH_CLUSTER_NAME}|${ORPHAN})-" || true); do
    # shellcheck disable=SC2046 # one PID per word
    kill -KILL $(ip netns pids "${ns}") 2>/dev/null || true
    ip netns del "${ns}" || true
  done
}

setup() {
  load test_helper
}

lc() {
  "${SCRIPTS}/local-cluster" "$@"
}

# refused WANT [VAR=VALUE...] ARGS...: local-cluster exits 2 with one line containing WANT.
refused() {
  local want="$1" envs=()
  shift
  while [[ "${1:-}" == *=* ]]; do envs+=("$1"); shift; done
  run env "${envs[@]}" "${SCRIPTS}/local-cluster" "$@"
  [ "${status}" -eq 2 ] || { echo "$*: exit ${status}: ${output}"; return 1; }
  [[ "${output}" == "local-cluster: "*"${want}"* ]] || { echo "$*: ${output}"; return 1; }
  [ "${#lines[@]}" -eq 1 ]
}

# start_time PID: the process's start time in clock ticks (fields after the command name).
start_time() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }"
  read -r -a fields <<<"${stat}"
  echo "${fields[19]}"
}

# running_since PID START: that very process still runs and is not a zombie.
running_since() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  read -r -a fields <<<"${stat}"
  [[ "${fields[0]}" != Z && "${fields[19]}" == "$2" ]]
}

json() { # json FILE PYTHON_EXPR_ON_d
  "$(dirname "${RLAUNCH_RAY}")/python" -c "import json, sys; d = json.load(open(sys.argv[1])); print($2)" "$1"
}

@test "--help and bad input (exit 2, naming the variable or command)" {
  run lc --help
  [ "${status}" -eq 0 ]
  for word in up down status exec RLAUNCH_CLUSTER_NAME RLAUNCH_NODES RLAUNCH_SUBNET RLAUNCH_STATE_DIR \
    RLAUNCH_LOCAL_MODE RLAUNCH_NUM_CPUS RLAUNCH_OBJECT_STORE_BYTES Exit:; do
    [[ "${output}" == *"${word}"* ]] || { echo "missing ${word}"; return 1; }
  done
  refused "RLAUNCH_NODES='0'" RLAUNCH_NODES=0 up
  refused "RLAUNCH_NODES='many'" RLAUNCH_NODES=many up
  refused "RLAUNCH_CLUSTER_NAME='Bad_Name'" RLAUNCH_CLUSTER_NAME=Bad_Name up
  refused "RLAUNCH_SUBNET='10.1.2.0/16'" RLAUNCH_SUBNET=10.1.2.0/16 up
  refused "RLAUNCH_LOCAL_MODE='vm'" RLAUNCH_LOCAL_MODE=vm up
  refused "RLAUNCH_START_RAY='yes'" RLAUNCH_START_RAY=yes up
  refused "unknown command 'start'" start
  refused "exec RANK -- CMD" exec 0 true
  refused "missing command" ""
  # Nothing was created by any of these.
  [ ! -e "${RLAUNCH_STATE_DIR}/created.txt" ]
  run ip netns list
  [[ "${output}" != *"rl-${RLAUNCH_CLUSTER_NAME}-"* ]]
}

@test "status and down before up: not up (3), nothing to remove (0)" {
  run lc status
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"${RLAUNCH_CLUSTER_NAME} is not up"* ]]
  run lc down
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing to remove"* ]]
}

@test "up forms 2 nodes in 2 namespaces with 2 IPs, prints the head, writes cluster.json" {
  run lc up
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"ray-up: head ${NET}.1:6379 ready: 2/2 nodes, 0 GPUs, 2 CPUs in "* ]]
  [[ "${lines[-1]}" == "RLAUNCH_HEAD_IP=${NET}.1" ]]
  local info="${RLAUNCH_STATE_DIR}/cluster.json"
  [ "$(json "${info}" 'd["mode"], d["head_ip"], d["ray_port"], d["dashboard_port"], len(d["nodes"])')" == "netns ${NET}.1 6379 8265 2" ]
  [ "$(json "${info}" '" ".join(n["ns"] + "=" + n["ip"] for n in d["nodes"])')" == "rl-${RLAUNCH_CLUSTER_NAME}-0=${NET}.1 rl-${RLAUNCH_CLUSTER_NAME}-1=${NET}.2" ]
  local r pid
  for r in 0 1; do
    [ "$(ip -n "rl-${RLAUNCH_CLUSTER_NAME}-${r}" -4 -o addr show dev eth0 | awk '{print $4}')" == "${NET}.$((r + 1))/24" ]
    [ "$(ip netns pids "rl-${RLAUNCH_CLUSTER_NAME}-${r}" | xargs -I{} cat /proc/{}/comm | grep -cx raylet)" -eq 1 ]
    for pid in $(ip netns pids "rl-${RLAUNCH_CLUSTER_NAME}-${r}"); do
      echo "${pid} $(start_time "${pid}")" >>"${PIDS_FILE}"
    done
  done
}

@test "status shows both nodes alive" {
  [[ -s "${PIDS_FILE}" ]] || skip "up failed"
  run lc status
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${lines[0]}" == "${RLAUNCH_CLUSTER_NAME} (netns): head ${NET}.1:6379, dashboard http://${NET}.1:8265" ]]
  [[ "${lines[2]}" =~ ^0\ +rl-${RLAUNCH_CLUSTER_NAME}-0\ +${NET}\.1\ +yes$ ]]
  [[ "${lines[3]}" =~ ^1\ +rl-${RLAUNCH_CLUSTER_NAME}-1\ +${NET}\.2\ +yes$ ]]
}

@test "exec 0 runs inside the head's namespace: a driver sees both nodes by IP" {
  [[ -s "${PIDS_FILE}" ]] || skip "up failed"
  run lc exec 0 -- ip -4 -o addr show dev eth0
  [ "${status}" -eq 0 ]
  [[ "${output}" == *" ${NET}.1/24 "* ]]
  # shellcheck disable=SC2016 # expanded inside the node
  run lc exec 1 -- sh -c 'echo "$RLAUNCH_HEAD_IP:$RLAUNCH_RAY_PORT"'
  [ "${output}" == "${NET}.1:6379" ]
  local py
  py="$(dirname "${RLAUNCH_RAY}")/python"
  run lc exec 0 -- "${py}" -c "import ray; ray.init(address='${NET}.1:6379', log_to_driver=False); \
print(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${lines[-1]}" == "['${NET}.1', '${NET}.2']" ]]
  run lc exec 2 -- true
  [ "${status}" -eq 2 ]
}

@test "up again: no-op check, the same raylets; another shape is refused" {
  [[ -s "${PIDS_FILE}" ]] || skip "up failed"
  run lc up
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"already up"* && "${output}" == *"ready: 2/2 nodes"* ]]
  local r pid
  for r in 0 1; do
    for pid in $(ip netns pids "rl-${RLAUNCH_CLUSTER_NAME}-${r}"); do
      if [[ "$(cat "/proc/${pid}/comm")" == raylet ]]; then grep -q "^${pid} " "${PIDS_FILE}"; fi
    done
  done
  run env RLAUNCH_NODES=3 "${SCRIPTS}/local-cluster" up
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"already up as netns with 2 node(s), not netns with 3"* ]]
}

@test "down leaves no process, namespace, link or temp dir; down again is fine" {
  [[ -s "${PIDS_FILE}" ]] || skip "up failed"
  run lc down
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"down (stopped "*" processes, deleted 3 namespaces)"* ]]
  local pid start
  while read -r pid start; do
    # Gone, a zombie, or the PID reused by another process (other start time).
    ! running_since "${pid}" "${start}" || { echo "still running: ${pid}"; return 1; }
  done <"${PIDS_FILE}"
  run ip netns list
  [[ "${output}" != *"rl-${RLAUNCH_CLUSTER_NAME}-"* ]]
  run ip -o link
  [[ "${output}" != *"rl-${RLAUNCH_CLUSTER_NAME}-"* ]]
  [ ! -e "/tmp/rl${HASH}" ]
  [ ! -e "${RLAUNCH_STATE_DIR}/cluster.json" ]
  [ ! -e "${RLAUNCH_STATE_DIR}/created.txt" ]
  run lc down
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"nothing to remove"* ]]
}

@test "not root: auto mode falls back to one node on 127.0.0.1 and says so (no Ray started)" {
  command -v setpriv >/dev/null || missing "needs setpriv (util-linux) to drop root"
  local dir="${NOBODY_DIR}"
  run setpriv --reuid=nobody --regid=nogroup --clear-groups env RLAUNCH_CLUSTER_NAME="nr$$" \
    RLAUNCH_STATE_DIR="${dir}/state" RLAUNCH_START_RAY=0 "${SCRIPTS}/local-cluster" up
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"not running as root: no network namespaces; forming ONE node on 127.0.0.1 instead of 2"* ]]
  [[ "${lines[-1]}" == "RLAUNCH_HEAD_IP=127.0.0.1" ]]
  [ "$(json "${dir}/state/cluster.json" 'd["mode"], len(d["nodes"])')" == "loopback 1" ]
  run setpriv --reuid=nobody --regid=nogroup --clear-groups env RLAUNCH_CLUSTER_NAME="nr$$" \
    RLAUNCH_STATE_DIR="${dir}/state" "${SCRIPTS}/local-cluster" down
  [ "${status}" -eq 0 ]
  [ ! -e "${dir}/state/cluster.json" ]
}

@test "loopback: one node on 127.0.0.1, ports from the name; down stops it" {
  export RLAUNCH_CLUSTER_NAME="${LOOP}" RLAUNCH_STATE_DIR="${BATS_FILE_TMPDIR}/loop"
  run env RLAUNCH_LOCAL_MODE=loopback "${SCRIPTS}/local-cluster" up
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"loopback mode: forming ONE node on 127.0.0.1 instead of 2"* ]]
  [[ "${lines[-1]}" == "RLAUNCH_HEAD_IP=127.0.0.1" ]]
  local info="${RLAUNCH_STATE_DIR}/cluster.json" port
  [ "$(json "${info}" 'd["mode"], len(d["nodes"]), d["nodes"][0]["ns"]')" == "loopback 1 " ]
  port="$(json "${info}" 'd["ray_port"]')"
  ((port >= 20000 && port < 24000))
  [[ "${output}" == *"ready: 1/1 nodes"* ]]
  run lc status
  [ "${status}" -eq 0 ]
  [[ "${lines[2]}" == *"127.0.0.1"*"yes" ]]
  local tmp sid
  tmp="$(json "${info}" 'd["nodes"][0]["temp_dir"]')"
  sid="$(sed -n 's/^sid=//p' "${tmp}/rlaunch-ray.state")"
  [ -n "$(ps -eo sid= | awk -v s="${sid}" '$1 == s')" ]
  run lc down
  echo "${output}"
  [ "${status}" -eq 0 ]
  [ -z "$(ps -eo sid=,stat= | awk -v s="${sid}" '$1 == s && $2 !~ /^Z/')" ]
  [ ! -e "${tmp}" ]
}

# orphan CMD...: CMD with the orphan cluster's name and state dir.
orphan() {
  RLAUNCH_CLUSTER_NAME="${ORPHAN}" RLAUNCH_STATE_DIR="${BATS_FILE_TMPDIR}/orphan" "$@"
}

@test "list and down from the name alone: with the host dir and state dir gone, the namespaces are found" {
  local state="${BATS_FILE_TMPDIR}/orphan" hash
  hash="$(printf '%s' "${ORPHAN}" | sha1sum | cut -c1-6)"
  run orphan env RLAUNCH_START_RAY=0 "${SCRIPTS}/local-cluster" up
  [ "${status}" -eq 0 ] || { echo "${output}"; return 1; }
  run orphan lc info
  [ "${status}" -eq 0 ]
  [ "$(json <(echo "${output}") 'd["name"], d["host_dir"], d["gpus_per_node"], d["created"] > 0')" == "${ORPHAN} /tmp/rl${hash} 0 True" ]
  run orphan lc list
  [[ "${output}" == *"{\"name\": \"${ORPHAN}\", \"mode\": \"netns\", \"nodes\": 2, \"alive\": 0, \"gpus_per_node\": 0, \"created\": "*", \"record\": true}"* ]]
  rm -rf "/tmp/rl${hash}" "${state}"
  run orphan lc list
  [[ "${output}" == *"{\"name\": \"${ORPHAN}\", \"mode\": \"netns\", \"nodes\": 2, \"alive\": 0, \"gpus_per_node\": null, \"created\": null, \"record\": false}"* ]]
  run orphan lc info
  [ "${status}" -eq 3 ]
  if command -v setpriv >/dev/null; then
    run setpriv --reuid=nobody --regid=nogroup --clear-groups env RLAUNCH_CLUSTER_NAME="${ORPHAN}" \
      RLAUNCH_STATE_DIR="${NOBODY_DIR}/orphan" "${SCRIPTS}/local-cluster" down
    [ "${status}" -eq 3 ]
    [[ "${output}" == *"${ORPHAN} has network namespaces (rl-${ORPHAN}-"*"): removing them needs root"* ]]
  fi
  run orphan lc down
  echo "${output}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"${ORPHAN}: down (stopped 0 processes, deleted 3 namespaces)"* ]]
  run ip netns list
  [[ "${output}" != *"rl-${ORPHAN}-"* ]]
}

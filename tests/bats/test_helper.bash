# shellcheck shell=bash
# Shared fixtures for the bats tests of scripts/ray-up, scripts/ray-down and scripts/local-cluster.
#
# Network-namespace fixture (independent of scripts/local-cluster, so a bug there does not hide
# ray-up's behaviour): one namespace per node on a random 10.x.y.0/24 with lo up, veth pairs to a
# bridge without an address in a switch namespace. Names carry the test file's PID, so files (and
# other engineers' runs) can run side by side. Needs root and `ip`; tests skip otherwise (fail under
# CI=true: needs.bash).
#
# Env: RLAUNCH_RAY  ray executable for the tests (default: <repo>/.venv/bin/ray, else `ray`)

REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
SCRIPTS="${REPO}/scripts"
# shellcheck source-path=SCRIPTDIR source=needs.bash
source "${BATS_TEST_DIRNAME}/needs.bash"

# The ray of the repo's venv unless told otherwise; exported so ray-up and local-cluster use it.
test_ray() {
  local ray="${RLAUNCH_RAY:-}"
  [[ -n "${ray}" ]] || ray="${REPO}/.venv/bin/ray"
  [[ -x "${ray}" ]] || ray="$(command -v ray || true)"
  printf '%s\n' "${ray}"
}

need_netns() {
  [[ "${EUID}" -eq 0 ]] || missing "needs root (network namespaces)"
  command -v ip >/dev/null || missing "needs iproute2's ip"
  [[ -n "$(test_ray)" ]] || missing "needs ray (run make setup)"
}

# netns_up N: create the fixture (call from setup_file). Exports NS_PREFIX and NS_NET.
netns_up() {
  local n="$1" i sw
  export NS_PREFIX="rlt$$"
  export NS_NET="10.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))"
  sw="${NS_PREFIX}-sw"
  ip netns add "${sw}"
  ip -n "${sw}" link add br0 type bridge
  ip -n "${sw}" link set br0 up
  for ((i = 0; i < n; i++)); do
    ip netns add "$(ns_name "${i}")"
    ip -n "${sw}" link add "v${i}" type veth peer name eth0 netns "$(ns_name "${i}")"
    ip -n "${sw}" link set "v${i}" master br0
    ip -n "${sw}" link set "v${i}" up
    ip -n "$(ns_name "${i}")" addr add "$(ns_ip "${i}")/24" dev eth0
    ip -n "$(ns_name "${i}")" link set eth0 up
    ip -n "$(ns_name "${i}")" link set lo up
  done
}

ns_name() { printf '%s-%s\n' "${NS_PREFIX}" "$1"; }
ns_ip() { printf '%s.%s\n' "${NS_NET}" "$(($1 + 1))"; }
# A short per-node Ray temp dir (Ray's socket paths must stay short).
ns_tmp() { printf '/tmp/%s-%s\n' "${NS_PREFIX}" "$1"; }

# in_ns I CMD...: run CMD in node I's namespace.
in_ns() {
  local i="$1"
  shift
  ip netns exec "$(ns_name "${i}")" "$@"
}

# ns_pids I: the processes living in node I's namespace.
ns_pids() {
  ip netns pids "$(ns_name "$1")" 2>/dev/null || true
}

# ns_empty I: no process lives in node I's namespace.
ns_empty() {
  [[ -z "$(ns_pids "$1")" ]]
}

# ns_count I NAME: how many processes in node I's namespace have the executable name NAME.
ns_count() {
  local pid n=0
  for pid in $(ns_pids "$1"); do
    [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == "$2" ]] && n=$((n + 1))
  done
  printf '%s\n' "${n}"
}

# node_env I [NUM_NODES]: ray-up's environment for node I of the fixture, as env(1) arguments.
node_env() {
  local i="$1" nodes="${2:-2}" ips=() j
  for ((j = 0; j < nodes; j++)); do ips+=("$(ns_ip "${j}")"); done
  printf '%s\n' "RLAUNCH_NODE_RANK=${i}" "RLAUNCH_NODE_IPS=$(IFS=,; echo "${ips[*]}")" \
    "RLAUNCH_NUM_NODES=${nodes}" "RLAUNCH_TEMP_DIR=$(ns_tmp "${i}")" "RLAUNCH_NUM_CPUS=1" \
    "RLAUNCH_OBJECT_STORE_BYTES=80000000" "RLAUNCH_RAY=$(test_ray)"
}

# ray_up I [NUM_NODES] [VAR=VALUE...]: scripts/ray-up as node I, in its namespace.
ray_up() {
  local i="$1" nodes="${2:-2}" envs=()
  shift $(($# < 2 ? $# : 2))
  mapfile -t envs < <(node_env "${i}" "${nodes}")
  in_ns "${i}" env "${envs[@]}" "$@" "${SCRIPTS}/ray-up"
}

ray_down() {
  in_ns "$1" env "RLAUNCH_TEMP_DIR=$(ns_tmp "$1")" RLAUNCH_STOP_GRACE_S=3 "${SCRIPTS}/ray-down"
}

# wait_for DEADLINE_S CMD...: poll CMD every 0.2 s until it succeeds, or fail after DEADLINE_S.
wait_for() {
  local limit="$1" end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || { echo "timed out after ${limit} s waiting for: $*" >&2; return 1; }
    sleep 0.2
  done
}

# netns_down: stop every process in the fixture's namespaces (in `ray stop`'s order, TERM then
# KILL), delete the namespaces and the nodes' temp dirs. Idempotent (call from teardown_file).
netns_down() {
  [[ -n "${NS_PREFIX:-}" ]] || return 0
  local ns pids=()
  for ns in $(ip netns list | awk '{print $1}' | grep "^${NS_PREFIX}-" || true); do
    mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "${ns}")
  done
  # shellcheck disable=SC2016 # expanded by the inner bash
  bash -c 'source "$1/lib.sh"; shift; stop_ray_pids 3 "$@"' _ "${SCRIPTS}" "${pids[@]}" || true
  for ns in $(ip netns list | awk '{print $1}' | grep "^${NS_PREFIX}-" || true); do
    ip netns del "${ns}"
  done
  rm -rf "/tmp/${NS_PREFIX}-"*
}

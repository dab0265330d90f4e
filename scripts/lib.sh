# shellcheck shell=bash
# lib.sh: shared helpers for rlaunch's bash scripts (sourced, never run).
#
# Usage: source "$(dirname "$(readlink -f "$0")")/lib.sh"
# Provides: die, log, usage, now, epoch_in, since, wait_until, require_uint, split_list, pid_alive,
#   session_pids, stop_pids, stop_ray_pids, cpu_torch. Reads no environment variables of its own.
# Exit codes used by the scripts: 0 ok, 1 unexpected error, 2 bad input, 3 a deadline passed,
#   4 a command the script depends on failed.

PROG="$(basename "$0")"

# die [CODE] MESSAGE...: the one way out on error; CODE defaults to 1.
die() {
  local code=1
  if [[ $# -gt 1 && "$1" =~ ^[0-9]+$ ]]; then
    code="$1"
    shift
  fi
  printf '%s: %s\n' "${PROG}" "$*" >&2
  exit "${code}"
}

# log MESSAGE...: progress on stderr, so stdout carries only results.
log() {
  printf '%s: %s\n' "${PROG}" "$*" >&2
}

# usage: print the calling script's header (line 2 up to `set -E...`) without the comment marks.
usage() {
  sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

# now: seconds since the epoch, with microseconds (bash builtin, no fork).
now() {
  printf '%s\n' "${EPOCHREALTIME}"
}

# epoch_in SECONDS: the integer epoch time SECONDS from now (a deadline for wait_until).
epoch_in() {
  printf '%s\n' "$((${EPOCHREALTIME%%[.,]*} + $1))"
}

# since START: seconds elapsed since START (from `now`), one decimal.
since() {
  local start="$1" end="${EPOCHREALTIME}"
  local us=$(((${end//[.,]/} - ${start//[.,]/}) / 100000))
  printf '%d.%d\n' "$((us / 10))" "$((us % 10))"
}

# wait_until DEADLINE INTERVAL CMD...: run CMD every INTERVAL seconds until it succeeds (0) or the
# epoch time DEADLINE passes (1). The caller names what it waited for in its error message.
wait_until() {
  local deadline="$1" interval="$2"
  shift 2
  while :; do
    "$@" && return 0
    _before "${deadline}" || return 1
    sleep "${interval}"
  done
}

# _before DEADLINE: true while the epoch time DEADLINE (integer or decimal) is in the future.
_before() {
  local d="${1%%[.,]*}" t="${EPOCHREALTIME%%[.,]*}"
  ((t < d))
}

# require_uint NAME VALUE MIN MAX: VALUE must be a decimal integer in MIN..MAX (exit 2 otherwise).
require_uint() {
  local name="$1" value="$2" min="$3" max="$4"
  if [[ ! "${value}" =~ ^[0-9]+$ ]] || ((10#${value} < min || 10#${value} > max)); then
    die 2 "${name}='${value}' is not allowed: need an integer from ${min} to ${max}"
  fi
}

# split_list STRING: the items of a newline-, comma- or space-separated list, one per line.
split_list() {
  local item
  for item in ${1//,/ }; do
    printf '%s\n' "${item}"
  done
}

# pid_alive PID: the process exists and is not a zombie (a killed child of PID 1 may stay <defunct>
# for a while, and `kill -0` would still call it alive).
pid_alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# session_pids SID: live processes of session SID, one per line.
session_pids() {
  local pid sid
  while read -r pid sid; do
    [[ "${sid}" == "$1" ]] && pid_alive "${pid}" && printf '%s\n' "${pid}"
  done < <(ps -eo pid=,sid=)
  return 0
}

# _any_alive PID...: true if one of them still runs.
_any_alive() {
  local pid
  for pid in "$@"; do
    pid_alive "${pid}" && return 0
  done
  return 1
}

# stop_pids GRACE PID...: TERM, wait up to GRACE s, then KILL and wait up to 10 s more.
# Returns 1 (naming the survivors) if any is still alive after that.
stop_pids() {
  local grace="$1"
  shift
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null || true
  wait_until "$(epoch_in "${grace}")" 0.2 _none_alive "$@" && return 0
  log "still running after TERM and ${grace} s, sending KILL: $*"
  kill -KILL "$@" 2>/dev/null || true
  wait_until "$(epoch_in 10)" 0.2 _none_alive "$@" && return 0
  log "still running after KILL: $(for p in "$@"; do pid_alive "${p}" && printf '%s ' "${p}"; done)"
  return 1
}

# stop_ray_pids GRACE PID...: stop Ray's processes in the order `ray stop` uses: raylets first
# (their workers exit with them), then the rest, the GCS last. All at once, the GCS and raylets
# block each other's graceful shutdown for many seconds.
stop_ray_pids() {
  local grace="$1" pid comm first=() middle=() last=() rc=0
  shift
  for pid in "$@"; do
    comm="$(cat "/proc/${pid}/comm" 2>/dev/null)" || continue
    case "${comm}" in
      raylet) first+=("${pid}") ;;
      gcs_server) last+=("${pid}") ;;
      *) middle+=("${pid}") ;;
    esac
  done
  stop_pids "${grace}" "${first[@]}" || rc=1
  stop_pids "${grace}" "${middle[@]}" || rc=1
  stop_pids "${grace}" "${last[@]}" || rc=1
  return "${rc}"
}

_none_alive() {
  ! _any_alive "$@"
}

# cpu_torch PYTHON VERSION INDEX: install torch==VERSION into PYTHON's environment, the CPU build on
# Linux. PyPI's Linux torch is the CUDA build (several GB of nvidia-* wheels); INDEX (PyTorch's CPU
# wheel index) has VERSION+cpu. Only torch comes from INDEX, without its dependencies (they come
# from PyPI with everything else), and with a short timeout: where INDEX cannot be reached pip gives
# up in seconds instead of waiting on it for every package, and still takes a local +cpu wheel
# (find-links) if there is one. Failing that, PyPI's torch, with a warning that names its size.
cpu_torch() {
  local py="$1" version="$2" index="$3" got
  local -a pip=("${py}" -m pip install --quiet --disable-pip-version-check)
  if [[ "$(uname -s)" != Linux ]]; then
    "${pip[@]}" "torch==${version}" # macOS and Windows wheels on PyPI are CPU builds
    return
  fi
  if ! "${pip[@]}" --no-deps --index-url "${index}" --timeout 10 --retries 1 "torch==${version}"; then
    log "warning: torch==${version} not found at ${index} (unreachable?); installing PyPI's torch," \
      "which on Linux is the CUDA build (several GB)"
    "${pip[@]}" "torch==${version}" || return
  fi
  got="$("${py}" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null)" || got="?"
  [[ "${got}" == *+cpu ]] || log "warning: torch ${got} is not the CPU build (${index} has ${version}+cpu)"
  return 0
}

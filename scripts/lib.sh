# shellcheck shell=bash
# lib.sh: shared helpers for rlaunch's bash scripts (sourced, never run).
#
# Usage: source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
# Provides: ROOT, PROG, die, log, usage, find_python, rlaunch_py, pin, now, epoch_in, since,
#   wait_until, require_uint, split_list, pid_alive, session_pids, stop_pids, stop_ray_pids,
#   cpu_torch, and ray-up's state: ray_state_file, state_get, ray_pids, ray_lock.
# Reads: PY (rlaunch_py and pin: the python that reads the pins; default: find_python's),
#   RLAUNCH_VERSIONS (through rlaunch.config.pins).
# Exit codes used by the scripts: 0 ok, 1 unexpected error, 2 bad input, 3 a deadline passed or a
#   prerequisite is missing, 4 a command the script depends on failed.

PROG="$(basename "$0")"
# The repository (or /opt/rlaunch in an image): lib.sh lives in its scripts/.
ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"

# die CODE MESSAGE...: the one way out on error: "PROG: MESSAGE" on stderr, exit CODE.
die() {
  local code="${1:-}"
  [[ $# -gt 0 ]] && shift
  if [[ ! "${code}" =~ ^[0-9]+$ ]]; then
    # A call without a code is a bug in the script: still stop, with the message and exit 1.
    set -- "${code}" "$@" "(die called without an exit code)"
    code=1
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

# find_python [VAR]: the python that runs rlaunch's own tools (rlaunch.config.pins needs only pyyaml):
# $VAR when the script documents one and it is set, else the repository's .venv, else python3.
find_python() {
  local var="${1:-}"
  if [[ -n "${var}" && -n "${!var:-}" ]]; then
    printf '%s\n' "${!var}"
  elif [[ -x "${ROOT}/.venv/bin/python" ]]; then
    printf '%s\n' "${ROOT}/.venv/bin/python"
  else
    printf '%s\n' python3
  fi
}

# rlaunch_py ARGS...: run python ARGS with rlaunch importable from this repository's tools/
# (python: $PY, else find_python's).
rlaunch_py() {
  PYTHONPATH="${ROOT}/tools" "${PY:-$(find_python)}" "$@"
}

# pin KEY VAR: the pin KEY of configs/versions.yaml (RLAUNCH_VERSIONS) into the variable named VAR.
# A missing, empty or non-scalar pin exits 2 with the reader's message, which names the key and the
# keys that do exist. (Assigned, never expanded inline, so a failure stops the script.)
pin() {
  local _pin_value
  _pin_value="$(rlaunch_py -m rlaunch.config.pins get "$1")" || exit 2
  printf -v "$2" '%s' "${_pin_value}"
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

# --- ray-up's state: what runs under a node's Ray temp dir, for idempotence and for ray-down ----

# ray_state_file TEMP_DIR: where ray-up records the Ray it started under TEMP_DIR.
ray_state_file() {
  printf '%s/rlaunch-ray.state\n' "$1"
}

# state_get FILE KEY: the value of KEY=... in a state file (empty when absent).
state_get() {
  sed -n "s/^$2=//p" "$1" 2>/dev/null | head -n1
}

# ray_pids TEMP_DIR: the live processes of the Ray that ray-up started under TEMP_DIR, one per
# line; nothing when none runs. A session id can be reused once all its processes are gone, so
# the recorded session counts only while one of its processes has TEMP_DIR on its command line.
ray_pids() {
  local sid pid pids=() ours=""
  sid="$(state_get "$(ray_state_file "$1")" sid)"
  [[ "${sid}" =~ ^[0-9]+$ ]] || return 0
  mapfile -t pids < <(session_pids "${sid}")
  for pid in "${pids[@]}"; do
    grep -qF -- "$1/" "/proc/${pid}/cmdline" 2>/dev/null && ours=1
  done
  [[ -n "${ours}" ]] && printf '%s\n' "${pids[@]}"
  return 0
}

# ray_lock TEMP_DIR WAIT_S: take the lock that ray-up and ray-down share per temp dir (one start or
# stop at a time), waiting up to WAIT_S; its descriptor is in lock_fd. False when it stayed taken.
ray_lock() {
  exec {lock_fd}>"$1/rlaunch-ray.lock"
  flock -w "$2" "${lock_fd}"
}

# --- locks: every package of an environment at one exact version (uv pip compile, uv pip sync) --

# find_uv [VENV]: uv from VENV (default: the repository's .venv, where scripts/setup installs it),
# else from PATH; false when there is none.
find_uv() {
  local venv="${1:-${ROOT}/.venv}"
  if [[ -x "${venv}/bin/uv" ]]; then
    printf '%s\n' "${venv}/bin/uv"
  else
    command -v uv
  fi
}

# lock_digest: the digest of stdin, the text of a lock's inputs (its "# inputs:" line).
lock_digest() {
  sha256sum | cut -c1-16
}

# lock_fresh LOCK DIGEST: LOCK exists and was made from inputs of DIGEST; else false, saying why.
lock_fresh() {
  local have
  have="$(sed -n 's/^# inputs: //p' "$1" 2>/dev/null | head -n1)"
  [[ -n "${have}" && "${have}" == "$2" ]] && return 0
  if [[ -f "$1" ]]; then
    log "${1#"${ROOT}/"} was made from other inputs than the repository's now (requirements, pins): run \`make lock\`"
  else
    log "${1#"${ROOT}/"} is missing: run \`make lock\`"
  fi
  return 1
}

# py_target PYTHON: "VERSION SYSTEM MACHINE" of that interpreter, e.g. "3.11 linux x86_64".
py_target() {
  "$1" -c 'import platform, sys; print("%d.%d %s %s" % (*sys.version_info[:2], sys.platform, platform.machine()))'
}

# lock_target PYTHON LOCK_PYTHON LOCK_PLATFORM: into the array TARGET, uv pip compile's flags for
# the lock files' target (CPython LOCK_PYTHON on LOCK_PLATFORM, e.g. x86_64-manylinux_2_28) when
# PYTHON is LOCK_PYTHON on x86_64 Linux, else for PYTHON itself (then false: not the committed lock).
lock_target() {
  if [[ -z "$1" || "$(py_target "$1")" == "$2 linux x86_64" ]]; then
    TARGET=(--python-version "$2" --python-platform "$3")
    return 0
  fi
  TARGET=(--python "$1")
  return 1
}

# torch_local: the local version part of the CPU torch, on Linux (+cpu; elsewhere PyPI's is CPU).
torch_local() {
  [[ "$(uname -s)" == Linux ]] && printf '+cpu'
  return 0
}

# torch_wheel DIR VERSION INDEX: the CPU torch wheel into DIR for uv's --find-links, taken as
# cpu_torch takes it: by pip, from INDEX alone with a short timeout (and pip's own find-links).
# uv cannot fall back from an unreachable index. Nothing to do off Linux.
torch_wheel() {
  mkdir -p "$1"
  [[ "$(uname -s)" == Linux ]] || return 0
  "${PY}" -m pip download --quiet --disable-pip-version-check --no-deps --dest "$1" --index-url "$3" \
    --timeout 10 --retries 1 "torch==$2$(torch_local)" || die 1 "pip could not get torch==$2$(torch_local) from $3"
}

# lock_compile UV OUT DIGEST WHAT WHEELS [HEAD] -- ARGS...: `uv pip compile ARGS` (paths relative to
# the repository) for the array TARGET, with WHEELS as find-links, into OUT under a header naming
# WHAT the lock is for, how it is remade and the DIGEST of its inputs; HEAD (lines) goes first.
# The lock there is uv's starting point (an existing output file is its preferences): a new
# package moves no other one that still fits, so a relock's diff is what its inputs changed.
lock_compile() {
  local uv="$1" out="$2" digest="$3" what="$4" wheels="$5" head="" body prefer
  shift 5
  if [[ "$1" != -- ]]; then
    head="$1"
    shift
  fi
  shift
  prefer="$(mktemp)"
  [[ -f "${out}" ]] && cp "${out}" "${prefer}"
  body="$(cd "${ROOT}" && "${uv}" pip compile --quiet --no-header --find-links "${wheels}" "${TARGET[@]}" \
    --output-file "${prefer}" "$@" >/dev/null && cat "${prefer}")" || {
    rm -f "${prefer}"
    die 1 "uv pip compile for ${out#"${ROOT}/"} failed"
  }
  rm -f "${prefer}"
  mkdir -p "$(dirname "${out}")"
  {
    printf '# %s: every package of %s, at one version each.\n' "${out#"${ROOT}/"}" "${what}"
    printf '# Made by "make lock" (uv pip compile %s); do not edit. Installed with uv pip sync.\n' "${TARGET[*]}"
    printf '# inputs: %s\n' "${digest}"
    [[ -n "${head}" ]] && printf '%s\n' "${head}"
    printf '%s\n' "${body}"
  } >"${out}.tmp"
  mv -f "${out}.tmp" "${out}"
  log "wrote ${out#"${ROOT}/"} ($(grep -c '^[A-Za-z0-9]' "${out}") packages)"
}

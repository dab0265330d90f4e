# shellcheck shell=bash
# PATH stubs for external CLIs (sky, kubectl, helm, docker) that record every call and answer with
# canned replies. Generic: any test file may stub any command.
#
# Usage (in setup):   load stub_helper; stub_command sky
# Then, per command NAME (files under $BATS_TEST_TMPDIR):
#   NAME.calls                one line per call: its arguments, shell-quoted (printf %q), so a
#                             test can compare exact command lines
#   NAME.reply.<a1>.<a2>.<a3> canned stdout for a call whose first three arguments are a1 a2 a3
#   NAME.reply.<a1>.<a2>      canned stdout for a call whose first two arguments are a1 a2
#   NAME.reply.<a1>           canned stdout for a call whose first argument is a1 (used when no
#                             two-argument reply exists); no reply file: no output
#   NAME.rc.<a1>[.<a2>[.<a3>]]  exit code for such a call (default 0)
#   NAME.stderr.<a1>[.<a2>[.<a3>]]  canned stderr
#   NAME.stdin                what calls with a '-' argument (read from stdin, e.g. kubectl apply
#                             -f -) read from stdin, appended per call
# Env read by the stubs: STUB_ENV_NAMES  space-separated variable names; for each, a call appends
#   "VAR=set" or "VAR=unset" to NAME.env (never the value: secrets pass through stubs too).
# shellcheck source-path=SCRIPTDIR source=needs.bash
source "${BATS_TEST_DIRNAME}/needs.bash"
# SkyPilot's user hash names the inputs bucket a SkyPilot render mounts: one fixed user, so a fresh
# machine without ~/.sky/user_hash does not import sky to compute one on each render.
export SKYPILOT_USER_ID="bats-user"

# stub_command NAME: an executable NAME in $BATS_TEST_TMPDIR/bin, first on PATH.
stub_command() {
  local name="$1" bin="${BATS_TEST_TMPDIR}/bin"
  mkdir -p "${bin}"
  cat >"${bin}/${name}" <<STUB
#!/usr/bin/env bash
set -Eeuo pipefail
dir='${BATS_TEST_TMPDIR}'
name='${name}'
STUB
  cat >>"${bin}/${name}" <<'STUB'
line="$(printf '%q ' "$@")"
printf '%s\n' "${line% }" >>"${dir}/${name}.calls"
for var in ${STUB_ENV_NAMES:-}; do
  if [[ -n "${!var+x}" ]]; then echo "${var}=set"; else echo "${var}=unset"; fi >>"${dir}/${name}.env"
done
pick() { # pick KIND: the most specific canned file for this call, if any
  local f
  for f in "${dir}/${name}.$1.${a1}.${a2}.${a3}" "${dir}/${name}.$1.${a1}.${a2}" "${dir}/${name}.$1.${a1}"; do
    [[ -n "${a1}" && -f "${f}" ]] && { printf '%s\n' "${f}"; return 0; }
  done
  return 1
}
a1="${1:-}"
a2="${2:-}"
a3="${3:-}"
for arg in "$@"; do
  if [[ "${arg}" == - ]]; then cat >>"${dir}/${name}.stdin"; break; fi
done
if f="$(pick reply)"; then cat "${f}"; fi
if f="$(pick stderr)"; then cat "${f}" >&2; fi
rc=0
if f="$(pick rc)"; then rc="$(cat "${f}")"; fi
exit "${rc}"
STUB
  chmod +x "${bin}/${name}"
  case ":${PATH}:" in
    *":${bin}:"*) ;;
    *) export PATH="${bin}:${PATH}" ;;
  esac
}

# stub_calls NAME: the recorded calls of NAME, one per line (empty if none).
stub_calls() {
  cat "${BATS_TEST_TMPDIR}/$1.calls" 2>/dev/null || true
}

# stub_reply NAME A1 [A2 [A3]] TEXT: canned stdout for NAME A1 [A2 [A3]] ...
stub_reply() {
  local name="$1" key="$2"
  if [[ $# -eq 4 ]]; then key="$2.$3"; fi
  if [[ $# -eq 5 ]]; then key="$2.$3.$4"; fi
  printf '%s\n' "${@: -1}" >"${BATS_TEST_TMPDIR}/${name}.reply.${key}"
}

# stub_fail NAME A1 [A2 [A3]] CODE STDERR: NAME A1 [A2 [A3]] ... exits CODE after printing STDERR.
stub_fail() {
  local name="$1" key="$2" args=("$@")
  if [[ $# -eq 5 ]]; then key="$2.$3"; fi
  if [[ $# -eq 6 ]]; then key="$2.$3.$4"; fi
  local code="${args[-2]}" stderr="${args[-1]}"
  printf '%s\n' "${code}" >"${BATS_TEST_TMPDIR}/${name}.rc.${key}"
  printf '%s\n' "${stderr}" >"${BATS_TEST_TMPDIR}/${name}.stderr.${key}"
}

#!/usr/bin/env bats
# scripts/setup's parts that a test can run without rebuilding a venv: the CPU torch (lib.sh's
# cpu_torch, with a stub python that records its pip calls: PyTorch's CPU index cannot be reached
# from here) and scripts/system-tools (apt-get and apt-cache are PATH stubs; PATH holds only the
# basic tools, so socat, nc and kubectl are missing whatever this machine has).

load stub_helper

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  PY="${REPO}/.venv/bin/python"
  [[ -x "${PY}" ]] || missing "needs the launcher venv (make setup)"
  INDEX="$(PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch.config.pins get torch_cpu_index)"
  TORCH="$(PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch.config.pins get python.torch)"
}

# cpu_torch_with VERSION_AFTER: run lib.sh's cpu_torch with the stub python; VERSION_AFTER is what
# the stub reports as the installed torch.
cpu_torch_with() {
  stub_command python
  stub_reply python -c "$1"
  run bash -c 'source "$1/scripts/lib.sh"; cpu_torch python "$2" "$3"' _ "${REPO}" "${TORCH}" "${INDEX}"
}

@test "cpu_torch: torch alone from the pinned CPU index, no deps, short timeout; nothing from PyPI" {
  [[ "$(uname -s)" == Linux ]] || skip "the CPU index is for Linux"
  cpu_torch_with "${TORCH}+cpu"
  [ "${status}" -eq 0 ]
  [ "$(stub_calls python | head -1)" = "-m pip install --quiet --disable-pip-version-check --no-deps --index-url ${INDEX} --timeout 10 --retries 1 torch==${TORCH}" ]
  [ "$(stub_calls python | grep -c 'pip install')" -eq 1 ]
  [[ "${output}" != *warning* ]]
}

@test "cpu_torch: the CPU index unreachable: PyPI's torch, with warnings naming the CUDA build" {
  [[ "$(uname -s)" == Linux ]] || skip "the CPU index is for Linux"
  stub_command python
  # pip fails against the CPU index only; PyPI's torch reports no +cpu.
  cat >"${BATS_TEST_TMPDIR}/bin/python" <<EOF
#!/usr/bin/env bash
printf '%s\n' "\$*" >>"${BATS_TEST_TMPDIR}/python.calls"
[[ "\$*" != *--index-url* ]] || exit 1
[[ "\$1" != -c ]] || echo "${TORCH}"
EOF
  run bash -c 'source "$1/scripts/lib.sh"; cpu_torch python "$2" "$3"' _ "${REPO}" "${TORCH}" "${INDEX}"
  [ "${status}" -eq 0 ]
  [ "$(stub_calls python | sed -n 2p)" = "-m pip install --quiet --disable-pip-version-check torch==${TORCH}" ]
  [[ "${output}" == *"not found at ${INDEX}"*"the CUDA build (several GB)"* ]]
  [[ "${output}" == *"torch ${TORCH} is not the CPU build"* ]]
}

@test "cpu_torch: pip failing everywhere fails the call" {
  [[ "$(uname -s)" == Linux ]] || skip "the CPU index is for Linux"
  stub_command python
  stub_fail python -m 1 "ERROR: No matching distribution found for torch==${TORCH}"
  run bash -c 'source "$1/scripts/lib.sh"; cpu_torch python "$2" "$3"' _ "${REPO}" "${TORCH}" "${INDEX}"
  [ "${status}" -ne 0 ]
  [ "$(stub_calls python | grep -c 'pip install')" -eq 2 ]
}

@test "cpu_torch: a torch that is not +cpu is reported" {
  [[ "$(uname -s)" == Linux ]] || skip "the CPU index is for Linux"
  cpu_torch_with "${TORCH}"
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"torch ${TORCH} is not the CPU build"* ]]
}

# A PATH with the basic tools only (no socat, nc, kubectl, apt-get), plus the stubs' directory.
bare_path() {
  local bin="${BATS_TEST_TMPDIR}/sysbin" tool
  mkdir -p "${bin}"
  for tool in bash env uname tr awk readlink dirname basename cat sed; do
    ln -sf "$(command -v "${tool}")" "${bin}/${tool}"
  done
  printf '%s\n' "${BATS_TEST_TMPDIR}/bin:${bin}"
}

system_tools() {
  run env PATH="$(bare_path)" RLAUNCH_PY="${PY}" "$@" "${REPO}/scripts/system-tools"
}

@test "system-tools: no apt: names each missing tool with its install command and exits 0" {
  system_tools
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"missing socat (INFRA=k8s needs it)"* ]]
  [[ "${output}" == *"missing nc (INFRA=k8s needs it)"* ]]
  minor="$(PYTHONPATH="${REPO}/tools" "${PY}" -m rlaunch.config.pins get kubernetes)"
  [[ "${output}" == *"missing kubectl (INFRA=kuberay needs it): curl -fLO "*"stable-${minor}.txt"*"install -m 0755 kubectl"* ]]
}

@test "system-tools: as root with apt: installs socat and netcat-openbsd, names kubectl when apt lacks it" {
  [[ "${EUID}" -eq 0 ]] || skip "the apt path is for root"
  stub_command apt-get
  stub_command apt-cache
  cat >"${BATS_TEST_TMPDIR}/bin/apt-cache" <<'EOF'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"${BATS_TEST_TMPDIR}/apt-cache.calls"
case "$2" in kubectl) echo "  Candidate: (none)" ;; *) echo "  Candidate: 1.0-1" ;; esac
EOF
  system_tools BATS_TEST_TMPDIR="${BATS_TEST_TMPDIR}"
  [ "${status}" -eq 0 ]
  # The lists lack kubectl: one update first, then only what apt has.
  [ "$(stub_calls apt-get)" = "update -qq
install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=120 socat netcat-openbsd" ]
  [[ "${output}" == *"missing kubectl (INFRA=kuberay needs it): curl -fLO "* ]]
}

@test "system-tools: RLAUNCH_APT=0 never runs apt-get, even as root" {
  stub_command apt-get
  system_tools RLAUNCH_APT=0
  [ "${status}" -eq 0 ]
  [ -z "$(stub_calls apt-get)" ]
  [[ "${output}" == *"missing socat (INFRA=k8s needs it): sudo apt-get install -y socat"* ]]
  [[ "${output}" == *"missing nc (INFRA=k8s needs it): sudo apt-get install -y netcat-openbsd"* ]]
}

@test "system-tools: everything present: one line, no apt" {
  stub_command apt-get
  for tool in socat nc kubectl; do stub_command "${tool}"; done
  system_tools
  [ "${status}" -eq 0 ]
  [ "${output}" = "system-tools: socat, nc, kubectl: present" ]
  [ -z "$(stub_calls apt-get)" ]
}

@test "system-tools: --help prints the header; a stray argument is exit 2" {
  run "${REPO}/scripts/system-tools" --help
  [ "${status}" -eq 0 ] && [[ "${output}" == *"RLAUNCH_APT"* ]]
  run "${REPO}/scripts/system-tools" --frob
  [ "${status}" -eq 2 ]
}

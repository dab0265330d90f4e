#!/usr/bin/env bats
# scripts/image with a PATH stub for `docker` that records every call (one line per call, and the
# arguments one per line per call) and answers `info` / `image inspect` as each test sets it up.
# Pins come from tests/fixtures/versions.yaml, whose values appear nowhere else.

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  export RLAUNCH_VERSIONS="${REPO}/tests/fixtures/versions.yaml"
  export STUB_LOG="${BATS_TEST_TMPDIR}/docker.log"
  export STUB_DIR="${BATS_TEST_TMPDIR}/calls"
  export STUB_IMAGES=""       # references `docker image inspect` finds
  export STUB_INFO_FAIL=""    # non-empty: `docker info` fails like a client without an engine
  unset REGISTRY TAG FRAMEWORK PLATFORM DOCKER
  mkdir -p "${BATS_TEST_TMPDIR}/bin" "${STUB_DIR}"
  cat >"${BATS_TEST_TMPDIR}/bin/docker" <<'STUB'
#!/usr/bin/env bash
set -Eeuo pipefail
n=$(($(find "${STUB_DIR}" -type f | wc -l) + 1))
printf '%s\n' "$@" >"${STUB_DIR}/$(printf '%03d' "${n}")"
printf '%s\n' "$*" >>"${STUB_LOG}"
case "${1:-}" in
  info)
    if [[ -n "${STUB_INFO_FAIL}" ]]; then
      echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2
      exit 1
    fi
    ;;
  image)
    for ref in ${STUB_IMAGES}; do [[ "${ref}" == "${3:-}" ]] && exit 0; done
    exit 1
    ;;
  build)
    ctx="${*: -1}"
    # What the daemon would receive: the context's top level and the Dockerfile's presence.
    ls -A "${ctx}" >"${STUB_DIR}/context"
    cp "${ctx}/constraints.txt" "${STUB_DIR}/constraints"
    grep -q '^ARG BASE_IMAGE' "${ctx}/docker/verl/Dockerfile" && echo ok >"${STUB_DIR}/dockerfile"
    ;;
esac
STUB
  chmod +x "${BATS_TEST_TMPDIR}/bin/docker"
  export PATH="${BATS_TEST_TMPDIR}/bin:${PATH}"
}

# The arguments of the first recorded call whose first argument is $1, one per line.
call_args() {
  local f
  for f in "${STUB_DIR}"/[0-9]*; do
    [[ "$(head -n1 "${f}")" == "$1" ]] && { cat "${f}"; return 0; }
  done
  return 1
}

# True when no recorded call matches the regex $1 (a function, so `set -e` sees its status).
not_called() {
  ! grep -q -- "$1" "${STUB_LOG}" 2>/dev/null
}

# True when the recorded call $1 has the adjacent arguments $2 $3.
has_pair() {
  call_args "$1" | grep -qxF -- "$2" || return 1
  call_args "$1" | grep -A1 -xF -- "$2" | grep -qxF -- "$3"
}

@test "--help prints the header with every environment variable" {
  run "${REPO}/scripts/image" --help
  [ "${status}" -eq 0 ]
  for var in FRAMEWORK REGISTRY TAG DOCKER PYTHON RLAUNCH_VERSIONS PLATFORM; do
    [[ "${output}" == *"${var}"* ]] || { echo "header lacks ${var}"; return 1; }
  done
  [[ "${output}" != *"set -Eeuo"* ]]
}

@test "build passes the pinned base image as BASE_IMAGE and tags the pinned rlaunch name" {
  run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 0 ]
  has_pair build --build-arg BASE_IMAGE=example.org/base/verl:fixture-verl
  has_pair build --tag ghcr.io/fixture/rlaunch-verl:t-verl
  has_pair build --label org.opencontainers.image.base.name=example.org/base/verl:fixture-verl
  call_args build | grep -q '/docker/verl/Dockerfile$'
  # verl's Dockerfile also installs the pinned verl: FRAMEWORK_VERSION from frameworks.verl.version.
  has_pair build --build-arg FRAMEWORK_VERSION=8.8.8
  # Exactly the ARGs the Dockerfile declares: no unused build args.
  [ "$(call_args build | grep -c -- '--build-arg')" -eq 2 ]
  [ "$(head -n1 "${STUB_DIR}/001")" = info ]
}

@test "build sends only rlaunch's folders as context, and removes it afterwards" {
  run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 0 ]
  [ "$(sort "${STUB_DIR}/context" | tr '\n' ' ')" = "configs constraints.txt docker scripts templates tools " ]
  [ "$(cat "${STUB_DIR}/dockerfile")" = ok ]
  ctx="$(call_args build | tail -n1)"
  [ ! -e "${ctx}" ]
}

@test "the context's constraints.txt pins ray and python.* from the versions file" {
  FRAMEWORK=trl run "${REPO}/scripts/image" build
  [ "${status}" -eq 0 ]
  [ "$(cat "${STUB_DIR}/constraints")" = $'ray==9.9.1\npyyaml==6.0.99\njinja2==3.1.99\nfire==0.7.99' ]
  has_pair build --build-arg BASE_IMAGE=example.org/base/ray:fixture-cpu
  # the pinned name has a registry port: the tag is only what follows the last ':'.
  has_pair build --tag registry.example:5000/fixture/rlaunch-trl:t-trl
}

@test "REGISTRY and TAG replace the registry part and the tag" {
  REGISTRY=reg.example/team/ TAG=v9 run "${REPO}/scripts/image" build rlinf
  [ "${status}" -eq 0 ]
  has_pair build --tag reg.example/team/rlaunch-rlinf:v9
}

@test "REGISTRY or TAG outside Docker's reference grammar: one line naming it, exit 2, no docker call" {
  # shellcheck disable=SC2016 # the $(...) is the data under test, never to expand
  REGISTRY='reg.example/Team $(touch x)' run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 2 ]
  [ "${output}" = "image: REGISTRY 'reg.example/Team \$(touch x)' not allowed: a registry and namespace as Docker names them, e.g. ghcr.io/acme or registry.example.com:5000/team (path parts lower-case letters, digits, '.', '_', '-')" ]
  TAG='v1;touch x' run "${REPO}/scripts/image" push verl
  [ "${status}" -eq 2 ]
  [[ "${output}" == "image: TAG 'v1;touch x' not allowed: an image tag:"* ]]
  [ ! -e "${STUB_LOG}" ] && [ ! -e x ]
}

@test "FRAMEWORK=all builds every framework, each FROM its own pin" {
  FRAMEWORK=all run "${REPO}/scripts/image" build
  [ "${status}" -eq 0 ]
  [ "$(grep -c '^build ' "${STUB_LOG}")" -eq 4 ]
  for fw in verl areal rlinf trl; do
    grep -q "^build .*--tag [^ ]*/rlaunch-${fw}:" "${STUB_LOG}"
  done
  grep -q "BASE_IMAGE=example.org/base/areal:fixture-areal .*rlaunch-areal:t-areal" "${STUB_LOG}"
}

@test "no Docker engine: build and push fail naming it, before any other docker call" {
  for cmd in build push; do
    rm -f "${STUB_LOG}"
    STUB_INFO_FAIL=1 run "${REPO}/scripts/image" "${cmd}" verl
    [ "${status}" -eq 3 ]
    [[ "${output}" == "image: no Docker engine reachable: 'docker info' failed: Cannot connect"* ]]
    [ "$(cat "${STUB_LOG}")" = info ]
  done
}

@test "no Docker client on PATH: a clear error, exit 3" {
  DOCKER=docker-not-installed run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"no Docker client: 'docker-not-installed' is not on PATH"* ]]
}

@test "push re-tags the pinned build under REGISTRY and pushes that" {
  STUB_IMAGES="ghcr.io/fixture/rlaunch-verl:t-verl" REGISTRY=reg.example/team \
    run "${REPO}/scripts/image" push verl
  [ "${status}" -eq 0 ]
  grep -qx "tag ghcr.io/fixture/rlaunch-verl:t-verl reg.example/team/rlaunch-verl:t-verl" "${STUB_LOG}"
  grep -qx "push reg.example/team/rlaunch-verl:t-verl" "${STUB_LOG}"
  [ "$(tail -n1 "${STUB_LOG}")" = "push reg.example/team/rlaunch-verl:t-verl" ]
}

@test "push of an image built under REGISTRY pushes it without re-tagging" {
  STUB_IMAGES="reg.example/team/rlaunch-areal:v2" REGISTRY=reg.example/team TAG=v2 \
    run "${REPO}/scripts/image" push areal
  [ "${status}" -eq 0 ]
  not_called '^tag '
  grep -qx "push reg.example/team/rlaunch-areal:v2" "${STUB_LOG}"
}

@test "push of an image never built fails naming the build command, pushes nothing" {
  REGISTRY=reg.example/team run "${REPO}/scripts/image" push verl
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"is not built"*"make image-build FRAMEWORK=verl"* ]]
  not_called '^push '
}

@test "bad input: unknown framework, missing FRAMEWORK, unknown command, exit 2, no build" {
  run "${REPO}/scripts/image" build verl bogus
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"FRAMEWORK='bogus' is not allowed; allowed: verl areal rlinf trl all"* ]]
  run "${REPO}/scripts/image" build ""   # what `make image-build` passes with FRAMEWORK unset
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"FRAMEWORK is required"* ]]
  run "${REPO}/scripts/image" deploy verl
  [ "${status}" -eq 2 ]
  not_called '^build '
}

@test "a missing pin stops the build with the pin reader's message" {
  grep -v 'official: example.org/base/rlinf' "${RLAUNCH_VERSIONS}" >"${BATS_TEST_TMPDIR}/v.yaml"
  RLAUNCH_VERSIONS="${BATS_TEST_TMPDIR}/v.yaml" run "${REPO}/scripts/image" build rlinf
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"no key 'official' under images.rlinf"* ]]
  not_called '^build '
}

@test "ref prints what build and push use" {
  REGISTRY=r.example/x TAG=1 run "${REPO}/scripts/image" ref verl areal
  [ "${status}" -eq 0 ]
  [ "${output}" = $'r.example/x/rlaunch-verl:1\nr.example/x/rlaunch-areal:1' ]
}

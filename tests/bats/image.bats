#!/usr/bin/env bats
# scripts/image with PATH stubs for `docker`, `podman` and `buildah` (one script: the subcommands
# they share answer alike) that record every call (one line per call, and the arguments one per
# line per call) and answer `info` / `inspect` as each test sets it up. Pins come from
# tests/fixtures/versions.yaml, whose values appear nowhere else. tests/e2e/test_image_build.py
# builds and runs the trl image for real with buildah.

setup() {
  REPO="$(cd "${BATS_TEST_DIRNAME}/../.." && pwd)"
  export RLAUNCH_VERSIONS="${REPO}/tests/fixtures/versions.yaml"
  export STUB_LOG="${BATS_TEST_TMPDIR}/docker.log"
  export STUB_DIR="${BATS_TEST_TMPDIR}/calls"
  export STUB_IMAGES=""       # references `image inspect` / `inspect --type image` finds
  export STUB_LABELS=""       # REF|LABEL|VALUE entries those inspections answer
  export STUB_INFO_FAIL=""    # non-empty: `docker info` fails like a client without an engine
  export STUB_PULL_FAIL=""    # non-empty: `pull` fails like a registry out of reach
  export RLAUNCH_CACHE="${BATS_TEST_TMPDIR}/cache"
  unset REGISTRY TAG FRAMEWORK PLATFORM DOCKER BUILDER BASE BUILD_PIP_CONF ISOLATION BUILDAH_ISOLATION
  # This machine's own podman and buildah stay out of these tests unless a test stubs them.
  export PODMAN=podman-not-installed BUILDAH=buildah-not-installed
  mkdir -p "${BATS_TEST_TMPDIR}/bin" "${STUB_DIR}"
  cat >"${BATS_TEST_TMPDIR}/bin/docker" <<'STUB'
#!/usr/bin/env bash
set -Eeuo pipefail
n=$(($(find "${STUB_DIR}" -type f -name '[0-9]*' | wc -l) + 1))
printf '%s\n' "$@" >"${STUB_DIR}/$(printf '%03d' "${n}")"
printf '%s\n' "$*" >>"${STUB_LOG}"
last="${*: -1}"
known() {
  local ref
  for ref in ${STUB_IMAGES}; do [[ "${ref}" == "$1" ]] && return 0; done
  return 1
}
case "${1:-}" in
  info)
    if [[ -n "${STUB_INFO_FAIL}" ]]; then
      echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2
      exit 1
    fi
    ;;
  image | inspect)
    known "${last}" || exit 1
    format=""
    prev=""
    for arg in "$@"; do [[ "${prev}" == --format ]] && format="${arg}"; prev="${arg}"; done
    if [[ "${format}" =~ Labels\ \"([^\"]+)\" ]]; then
      for entry in ${STUB_LABELS}; do
        IFS='|' read -r ref key value <<<"${entry}"
        [[ "${ref}" == "${last}" && "${key}" == "${BASH_REMATCH[1]}" ]] && echo "${value}"
      done
    fi
    [[ "${format}" == *Size* ]] && echo 2100000000
    [[ "${format}" == *Id* ]] && echo sha256:stub-id
    ;;
  images) echo "2.1 GB" ;;
  pull) [[ -z "${STUB_PULL_FAIL}" ]] || { echo "Error: initializing source docker://${last}: no route" >&2; exit 125; } ;;
  from) echo stub-working-container ;;
  build | bud)
    ctx="${last}"
    # What the builder would receive: the context's top level and the Dockerfile's presence.
    ls -A "${ctx}" >"${STUB_DIR}/context"
    [[ -f "${ctx}/constraints.txt" ]] && cp "${ctx}/constraints.txt" "${STUB_DIR}/constraints"
    if [[ -f "${ctx}/docker/verl/Dockerfile" ]] && grep -q '^ARG BASE_IMAGE' "${ctx}/docker/verl/Dockerfile"; then
      echo ok >"${STUB_DIR}/dockerfile"
    fi
    [[ -f "${ctx}/Containerfile" ]] && cp "${ctx}/Containerfile" "${STUB_DIR}/standin-Containerfile"
    [[ -f "${ctx}/rootfs.tar" ]] && cp "${ctx}/rootfs.tar" "${STUB_DIR}/standin-rootfs"
    ;;
esac
exit 0
STUB
  chmod +x "${BATS_TEST_TMPDIR}/bin/docker"
  export PATH="${BATS_TEST_TMPDIR}/bin:${PATH}"
}

# Install the same stub as podman or buildah and point scripts/image at it.
stub_builder() {
  cp "${BATS_TEST_TMPDIR}/bin/docker" "${BATS_TEST_TMPDIR}/bin/$1"
  [[ "$1" == podman ]] && export PODMAN=podman
  [[ "$1" == buildah ]] && export BUILDAH=buildah
  return 0
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
  for var in FRAMEWORK REGISTRY TAG DOCKER PYTHON RLAUNCH_VERSIONS PLATFORM BASE BUILDER PODMAN BUILDAH \
    ISOLATION BUILD_PIP_CONF RLAUNCH_CACHE; do
    [[ "${output}" == *"${var}"* ]] || { echo "header lacks ${var}"; return 1; }
  done
  [[ "${output}" != *"set -Eeuo"* ]]
}

@test "build passes the pinned base image as BASE_IMAGE and tags the rlaunch name made from the pins" {
  run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 0 ]
  has_pair build --build-arg BASE_IMAGE=example.org/base/verl:fixture-verl
  has_pair build --tag registry.example:5000/fixture/rlaunch-verl:8.8.8
  has_pair build --label org.opencontainers.image.base.name=example.org/base/verl:fixture-verl
  call_args build | grep -q '/docker/verl/Dockerfile$'
  # verl's Dockerfile also installs the pinned verl (frameworks.verl.version) and Ray's pin: what
  # the plan's image check resolves (rlaunch.plan.imagecheck.image_installs; no facts here: no engine extra).
  has_pair build --build-arg "FRAMEWORK_INSTALL=verl[verl-core]==8.8.8 ray[default]==9.9.1"
  # Exactly the ARGs the Dockerfile declares: no unused build args.
  [ "$(call_args build | grep -c -- '--build-arg')" -eq 2 ]
  # an amd64 base: no --platform (ACCELERATOR's arm64 base gets one)
  if call_args build | grep -qxF -- --platform; then return 1; fi
  [ "$(head -n1 "${STUB_DIR}/001")" = info ]
}

@test "ACCELERATOR with an image of its own builds on that base, for its arch, tagged <version>-<arch>" {
  ACCELERATOR=FIXTURE-GPU run "${REPO}/scripts/image" build areal
  [ "${status}" -eq 0 ]
  has_pair build --build-arg BASE_IMAGE=example.org/base/areal:fixture-areal-arm64
  has_pair build --tag registry.example:5000/fixture/rlaunch-areal:6.6.6-arm64
  has_pair build --platform linux/arm64
  has_pair build --build-arg "FRAMEWORK_INSTALL=ray[default]==9.9.1"  # that base's facts give no Ray
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
  # rlaunch_registry has a port; the tag is frameworks.trl.version.
  has_pair build --tag registry.example:5000/fixture/rlaunch-trl:7.7.7
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
  grep -q "BASE_IMAGE=example.org/base/areal:fixture-areal .*rlaunch-areal:6.6.6" "${STUB_LOG}"
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
  STUB_IMAGES="registry.example:5000/fixture/rlaunch-verl:8.8.8" REGISTRY=reg.example/team \
    run "${REPO}/scripts/image" push verl
  [ "${status}" -eq 0 ]
  grep -qx "tag registry.example:5000/fixture/rlaunch-verl:8.8.8 reg.example/team/rlaunch-verl:8.8.8" "${STUB_LOG}"
  grep -qx "push reg.example/team/rlaunch-verl:8.8.8" "${STUB_LOG}"
  [ "$(tail -n1 "${STUB_LOG}")" = "push reg.example/team/rlaunch-verl:8.8.8" ]
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
  [[ "${output}" == *"FRAMEWORK='bogus' is not allowed; allowed: trl verl areal rlinf all"* ]]
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

# ---------------------------------------------------------------- builders other than docker

@test "no Docker engine: podman builds, with chroot isolation and docker's flags, and says why" {
  stub_builder podman
  STUB_INFO_FAIL=1 run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"builder: podman (no Docker engine reachable: 'docker info' failed: Cannot connect"* ]]
  [ "$(grep -c '^build ' "${STUB_LOG}")" -eq 1 ]
  has_pair build --isolation chroot
  has_pair build --format docker
  has_pair build --build-arg BASE_IMAGE=example.org/base/verl:fixture-verl
  has_pair build --tag registry.example:5000/fixture/rlaunch-verl:8.8.8
  # The base was not here, so podman pulled it first (docker leaves that to its build).
  grep -qx "pull example.org/base/verl:fixture-verl" "${STUB_LOG}"
}

@test "neither docker nor podman: buildah bud; BUILDAH_ISOLATION and ISOLATION pick the isolation" {
  stub_builder buildah
  DOCKER=docker-not-installed run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"builder: buildah (no Docker client: 'docker-not-installed' is not on PATH)"* ]]
  has_pair bud --isolation chroot
  has_pair bud --tag registry.example:5000/fixture/rlaunch-trl:7.7.7
  rm -rf "${STUB_DIR:?}"/* "${STUB_LOG}"
  BUILDAH_ISOLATION=oci BUILDER=buildah run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 0 ]
  has_pair bud --isolation oci
  rm -rf "${STUB_DIR:?}"/* "${STUB_LOG}"
  BUILDAH_ISOLATION=oci ISOLATION=rootless BUILDER=buildah run "${REPO}/scripts/image" build trl
  has_pair bud --isolation rootless
}

@test "BUILDER: an unknown one is exit 2, a missing one exit 3, each before any build" {
  BUILDER=kaniko run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 2 ]
  [ "${output}" = "image: BUILDER 'kaniko' not allowed: one of docker, podman, buildah" ]
  BUILDER=podman run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"BUILDER=podman, but 'podman-not-installed' is not on PATH"* ]]
  not_called '^build '
}

@test "no builder at all: exit 3 naming docker's problem and the two others" {
  DOCKER=docker-not-installed run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"neither 'podman-not-installed' nor 'buildah-not-installed' is on PATH: install one"* ]]
}

@test "build prints the builder, the build time and the image size" {
  STUB_IMAGES=registry.example:5000/fixture/rlaunch-verl:8.8.8 run "${REPO}/scripts/image" build verl
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"image: builder: docker"* ]]
  [[ "${output}" =~ "built registry.example:5000/fixture/rlaunch-verl:8.8.8 with docker in "[0-9]+s", size 2.10 GB" ]]
}

@test "BASE=official with podman: a base that cannot be pulled is exit 3 naming BASE=standin" {
  stub_builder podman
  STUB_INFO_FAIL=1 STUB_PULL_FAIL=1 run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 3 ]
  [[ "${output}" == *"cannot pull the base example.org/base/ray:fixture-cpu with podman"*"make image-build FRAMEWORK=trl BASE=standin"* ]]
  not_called '^build '
}

@test "bad BASE and BUILD_PIP_CONF with docker are exit 2, before any build" {
  BASE=borrowed run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 2 ]
  [ "${output}" = "image: BASE 'borrowed' not allowed: one of official, standin" ]
  BUILD_PIP_CONF=host run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"docker builds cannot mount into RUN steps"* ]]
  not_called '^build '
}

# ---------------------------------------------------------------- the stand-in

# The stand-in recipe id the pins give (what scripts/image labels the stand-in with).
recipe_id() {
  mkdir -p "${BATS_TEST_TMPDIR}/recipe"
  PYTHONPATH="${REPO}/tools" python3 -m rlaunch.plan.imagebuild standin trl "${BATS_TEST_TMPDIR}/recipe" | sed -n 's/^id=//p'
}

@test "BASE=standin: mmdebstrap from the pins, the stand-in built and labelled under the base's name" {
  stub_builder buildah
  # mmdebstrap really runs in tests/e2e/test_image_build.py; here it records and writes a file.
  cat >"${BATS_TEST_TMPDIR}/bin/mmdebstrap" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$@" >"${STUB_DIR}/mmdebstrap"
echo rootfs >"${*: -1}"
STUB
  chmod +x "${BATS_TEST_TMPDIR}/bin/mmdebstrap"
  printf '[global]\nfind-links = %s\n' "${BATS_TEST_TMPDIR}" >"${BATS_TEST_TMPDIR}/pip.conf"
  BUILDER=buildah BASE=standin BUILD_PIP_CONF="${BATS_TEST_TMPDIR}/pip.conf" run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 0 ]
  grep -qx -- --include=python3,fixture-pkg "${STUB_DIR}/mmdebstrap"
  grep -qx fixture-suite "${STUB_DIR}/mmdebstrap"
  # Two builds: the stand-in, tagged with the pinned base's name (docker.io/ for a short name), ...
  [ "$(grep -c '^bud ' "${STUB_LOG}")" -eq 2 ]
  grep -q "^bud .*--label io.rlaunch.standin.recipe=$(recipe_id) .*--tag example.org/base/ray:fixture-cpu " "${STUB_LOG}"
  grep -qx 'FROM scratch' "${STUB_DIR}/standin-Containerfile"
  grep -qx 'USER 4242' "${STUB_DIR}/standin-Containerfile"
  grep -q "'ray\[default\]==9.9.1'" "${STUB_DIR}/standin-Containerfile"
  [ "$(cat "${STUB_DIR}/standin-rootfs")" = rootfs ]
  # ... then the image on it: pulling off, labelled as built on a stand-in, the pip settings mounted.
  last="$(grep '^bud ' "${STUB_LOG}" | tail -n1)"
  [[ "${last}" == *"--pull-never"* ]]
  [[ "${last}" == *"--label io.rlaunch.standin=example.org/base/ray:fixture-cpu"* ]]
  [[ "${last}" == *"--volume "*"/pip.conf:/etc/pip.conf:ro --volume ${BATS_TEST_TMPDIR}:${BATS_TEST_TMPDIR}:ro "* ]]
  [[ "${last}" == *"--tag registry.example:5000/fixture/rlaunch-trl:7.7.7 "* ]]
  # The root file system is cached for the next stand-in.
  ls "${RLAUNCH_CACHE}"/standin/rootfs-fixture-suite-*.tar
}

@test "BASE=standin: a stand-in of the pins' recipe is reused, nothing rebuilt" {
  stub_builder buildah
  base=example.org/base/ray:fixture-cpu
  STUB_IMAGES="${base}" STUB_LABELS="${base}|io.rlaunch.standin|${base} ${base}|io.rlaunch.standin.recipe|$(recipe_id)" \
    BUILDER=buildah BASE=standin BUILD_PIP_CONF=none run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"stand-in for ${base}: up to date"* ]]
  [ "$(grep -c '^bud ' "${STUB_LOG}")" -eq 1 ]
  [ ! -e "${STUB_DIR}/mmdebstrap" ]
}

@test "BASE=standin never replaces an official image that is already here" {
  stub_builder buildah
  STUB_IMAGES=example.org/base/ray:fixture-cpu BUILDER=buildah BASE=standin run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"example.org/base/ray:fixture-cpu here is the official image, not a stand-in"* ]]
  not_called '^bud '
}

@test "a stand-in found under the base's name: the build warns and labels the image" {
  base=example.org/base/ray:fixture-cpu
  STUB_IMAGES="${base}" STUB_LABELS="${base}|io.rlaunch.standin|${base}" run "${REPO}/scripts/image" build trl
  [ "${status}" -eq 0 ]
  [[ "${output}" == *"warning: ${base} here is a local stand-in"*"cannot be pushed"* ]]
  has_pair build --label "io.rlaunch.standin=${base}"
}

@test "push refuses an image built on a stand-in, naming why, and tags or pushes nothing" {
  ref=registry.example:5000/fixture/rlaunch-trl:7.7.7
  for target in "${ref}" reg.example/team/rlaunch-trl:7.7.7; do
    rm -f "${STUB_LOG}"
    STUB_IMAGES="${ref}" STUB_LABELS="${ref}|io.rlaunch.standin|example.org/base/ray:fixture-cpu" \
      REGISTRY="${target%/rlaunch-trl:7.7.7}" run "${REPO}/scripts/image" push trl
    [ "${status}" -eq 2 ]
    [[ "${output}" == *"refusing to push ${target}: it is built on a local stand-in for example.org/base/ray:fixture-cpu (label io.rlaunch.standin)"* ]]
    not_called '^tag '
    not_called '^push '
  done
}

# ---------------------------------------------------------------- check

@test "check runs the image's own first steps in it, with the pinned versions" {
  STUB_IMAGES=registry.example:5000/fixture/rlaunch-trl:7.7.7 run "${REPO}/scripts/image" check trl
  [ "${status}" -eq 0 ]
  grep -qx "run --rm registry.example:5000/fixture/rlaunch-trl:7.7.7 python3 -m rlaunch.verify.image trl --ray 9.9.1 --framework-version 7.7.7" "${STUB_LOG}"
}

@test "check with buildah: a working container in chroot isolation, removed afterwards" {
  stub_builder buildah
  STUB_IMAGES=registry.example:5000/fixture/rlaunch-trl:7.7.7 BUILDER=buildah run "${REPO}/scripts/image" check trl
  [ "${status}" -eq 0 ]
  grep -qx "from --pull-never --quiet registry.example:5000/fixture/rlaunch-trl:7.7.7" "${STUB_LOG}"
  grep -qx "run --isolation chroot stub-working-container -- python3 -m rlaunch.verify.image trl --ray 9.9.1 --framework-version 7.7.7" "${STUB_LOG}"
  [ "$(tail -n1 "${STUB_LOG}")" = "rm stub-working-container" ]
}

@test "check of an image never built: exit 2 naming the build command" {
  run "${REPO}/scripts/image" check trl
  [ "${status}" -eq 2 ]
  [[ "${output}" == *"is not built: run make image-build FRAMEWORK=trl first"* ]]
  not_called '^run '
}

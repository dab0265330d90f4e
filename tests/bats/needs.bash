# shellcheck shell=bash
# missing WHAT: a test's prerequisite (a tool, the venv, root) is not there. Under CI=true (CI
# installs everything) the test fails saying what and how to get it; elsewhere it skips saying so.
missing() {
  if [[ "${CI:-}" == true ]]; then
    echo "CI=true and a prerequisite is missing: $1" >&2
    return 1
  fi
  skip "$1"
}

# need_crds [KIND...]: the pinned CRDs this test validates against (`make crds`, or RLAUNCH_CRDS_DIR;
# default: KubeRay's and PodMonitor's). Without one: missing, unless the last `make crds` recorded
# that this machine cannot reach that CRD's upstream (then it skips everywhere, saying so).
need_crds() {
  local py="${BATS_TEST_DIRNAME}/../../.venv/bin/python" absent offline
  local -a crd_kinds=("$@")
  ((${#crd_kinds[@]})) || crd_kinds=(RayCluster RayJob PodMonitor)
  [[ -x "${py}" ]] || return 0 # setup already reported the missing venv
  absent="$("${py}" -m rlaunch.validate.crds where "${crd_kinds[@]}" 2>&1 >/dev/null)" && return 0
  if offline="$("${py}" -m rlaunch.validate.crds unreachable "${crd_kinds[@]}")"; then
    skip "${absent}; this machine cannot reach it: ${offline}"
  fi
  missing "${absent}"
}

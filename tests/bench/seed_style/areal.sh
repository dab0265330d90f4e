#!/usr/bin/env bash
# areal.sh: the cluster formation of seed 000 (AReaL's ray_cluster.sky.yaml, `run` section), kept
# as the formation benchmark's baseline. Same control flow and timings: rank 0 starts the head,
# then, while `ray status` shows fewer `node_` lines than nodes, prints the count (a second
# `ray status`, as the seed does) and sleeps 5 s; every other rank sleeps 10 s, then runs a single
# `ray start --address`.
# Changes, each needed to run it as network-namespace nodes of one shared host:
#   - SEED_RAY_ARGS (node IP, temp dir, CPUs, object store) is added to every `ray start`;
#   - `ray status` gets --address: without it Ray looks the cluster up under /tmp/ray, which all
#     nodes (and other people's clusters) share here;
#   - the head exits when all nodes are counted instead of training (the seed waits forever; the
#     benchmark bounds it); a worker exits after its `ray start` instead of sleeping 5 s more.
#
# Usage: SKYPILOT_NODE_RANK=0 SKYPILOT_NODE_IPS=... SKYPILOT_NUM_NODES=3 tests/bench/seed_style/areal.sh
# Env: SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS (newline-separated), SKYPILOT_NUM_NODES (all required),
#   SEED_RAY (default ray), SEED_RAY_ARGS (extra `ray start` arguments, split on spaces; default none)
set -Eeuo pipefail

if [[ "${1:-}" == --help ]]; then sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
ray="${SEED_RAY:-ray}"
read -r -a node_args <<<"${SEED_RAY_ARGS:-}"
head_ip="$(echo "${SKYPILOT_NODE_IPS}" | head -n1)"

count_nodes() {
  "${ray}" status --address="${head_ip}:6379" 2>/dev/null | grep -c node_ || true
}

if [[ "${SKYPILOT_NODE_RANK}" == 0 ]]; then
  echo "Starting Ray head node..."
  "${ray}" start --head --port=6379 "${node_args[@]}"
  while [[ "$(count_nodes)" -lt "${SKYPILOT_NUM_NODES}" ]]; do
    echo "Waiting for all nodes to join... Current nodes: $(count_nodes) / ${SKYPILOT_NUM_NODES}"
    sleep 5
  done
  echo "Executing training script on head node..."
else
  sleep 10
  echo "Starting Ray worker node..."
  "${ray}" start --address "${head_ip}:6379" "${node_args[@]}"
fi

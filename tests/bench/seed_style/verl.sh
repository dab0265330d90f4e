#!/usr/bin/env bash
# verl.sh: the cluster formation of seed 001 (verl's SkyPilot task, `run` section), kept as the
# formation benchmark's baseline. Same control flow and timings: rank 0 starts the head, then
# counts the `node_` lines of `ray status` every 10 s, at most 30 times; every other rank sleeps
# 15 s, then runs a single `ray start --address`.
# Changes, each needed to run it as network-namespace nodes of one shared host:
#   - SEED_RAY_ARGS (node IP, temp dir, CPUs, object store) is added to every `ray start`;
#   - `ray status` gets --address: without it Ray looks the cluster up under /tmp/ray, which all
#     nodes (and other people's clusters) share here;
#   - the `ps aux | grep ray | grep 6379` guard before `ray start --head` is dropped: the PID
#     namespace is shared, so it would see other nodes' (and other people's) Rays and skip the head;
#   - the head exits when its wait ends (0: all nodes counted, 1: it gave up) instead of training;
#     a worker exits after its `ray start` instead of sleeping 10 s more.
#
# Usage: SKYPILOT_NODE_RANK=0 SKYPILOT_NODE_IPS=... SKYPILOT_NUM_NODES=3 tests/bench/seed_style/verl.sh
# Env: SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS (newline-separated), SKYPILOT_NUM_NODES (all required),
#   SEED_RAY (default ray), SEED_RAY_ARGS (extra `ray start` arguments, split on spaces; default none)
set -Eeuo pipefail

if [[ "${1:-}" == --help ]]; then sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
ray="${SEED_RAY:-ray}"
read -r -a node_args <<<"${SEED_RAY_ARGS:-}"
HEAD_IP="$(echo "${SKYPILOT_NODE_IPS}" | head -n1)"
NUM_NODES="${SKYPILOT_NUM_NODES}"

if [[ "${SKYPILOT_NODE_RANK}" == 0 ]]; then
  echo "Starting Ray head node..."
  "${ray}" start --head --disable-usage-stats --port=6379 --dashboard-host=0.0.0.0 \
    --dashboard-port=8265 "${node_args[@]}"
  retry_count=0
  max_retries=30
  while [[ "${retry_count}" -lt "${max_retries}" ]]; do
    connected_nodes="$("${ray}" status --address="${HEAD_IP}:6379" 2>/dev/null | grep -c node_ || true)"
    echo "Connected nodes: ${connected_nodes:-0}/${NUM_NODES} (attempt $((retry_count + 1))/${max_retries})"
    if [[ "${connected_nodes:-0}" -ge "${NUM_NODES}" ]]; then
      echo "All nodes connected to Ray cluster"
      exit 0
    fi
    retry_count=$((retry_count + 1))
    sleep 10
  done
  exit 1
else
  sleep 15
  echo "Starting Ray worker node..."
  "${ray}" start --address "${HEAD_IP}:6379" --disable-usage-stats "${node_args[@]}"
fi

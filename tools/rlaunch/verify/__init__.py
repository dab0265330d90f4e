"""Verification: a platform's "succeeded" proves nothing, so every launch checks for itself.

- preflight: Ray tasks pinned to every node check the cluster before the expensive part starts
  (node count, GPUs, NCCL env, Python and framework versions, inputs, shared storage, Ray CPUs);
  writes preflight.json.
- postflight: reads what the framework wrote (logs, metrics, TensorBoard, checkpoints, resolved
  config) and checks the run really trained; writes verification.json.
- layouts: where each framework writes its outputs; report: check records, tables, JSON reports.

Both run standalone (`python -m rlaunch.verify.preflight --help`) and through `rlaunch verify`.
"""

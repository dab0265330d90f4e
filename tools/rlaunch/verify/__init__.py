"""Verification: a platform's "succeeded" proves nothing, so every launch checks for itself.

- preflight: Ray tasks pinned to every node check the cluster before the expensive part starts
  (node count, GPUs, NCCL env, Python and framework versions, inputs, shared storage, Ray CPUs);
  writes preflight.json.
- postflight: reads what the framework wrote (logs, metrics, TensorBoard, checkpoints, resolved
  config) and checks the run really trained; writes verification.json.
- accel: applies the framework/accelerator rules' workarounds on every node, before preflight.
- layouts: where each framework writes its outputs; report: check records, tables, JSON reports.

Both run standalone (`python -m rlaunch.verify.preflight --help`) and through `rlaunch verify`.
"""

from __future__ import annotations

# What the job's own steps (accel, preflight, postflight) import beyond the standard library and
# rlaunch, by framework: a run script that cannot count on rlaunch's image (AIStudio's) refuses an
# image whose Python lacks one of these, and asks for nothing else. tests/unit/test_job_modules.py
# runs the steps with every other import blocked and checks each of these is imported.
STEP_MODULES = {
    "trl": ("ray", "tensorboard"),
    "verl": ("ray", "yaml"),
    "areal": ("ray", "yaml"),
    "rlinf": ("ray", "yaml", "tensorboard"),
}


def job_modules(framework: str) -> list[str]:
    return list(STEP_MODULES.get(framework, ("ray",)))

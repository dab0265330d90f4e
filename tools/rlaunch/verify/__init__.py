"""Verification: a platform's "succeeded" proves nothing, so every launch checks for itself.

- preflight: Ray tasks pinned to every node check the cluster before the expensive part starts
  (node count, GPUs, NCCL env, Python and framework versions, inputs, shared storage, Ray CPUs);
  writes preflight.json.
- postflight: reads what the framework wrote (logs, metrics, TensorBoard, checkpoints, resolved
  config) and checks the run really trained; writes verification.json.
- cluster: the round on every node that accel, preflight and collective share (Ray, pinned tasks).
- accel: applies the framework/accelerator rules' workarounds on every node, before preflight.
- summary: the closing summary of a run (what `make launch` prints last, and `make summary`), from
  its reports and records.
- report: check records, tables, JSON reports. Where a run's outputs are, and the readers of them,
  are job/'s (layouts, files): the job writes them, every check reads them.

Each runs as `python -m rlaunch.verify.<stage>` (job.sh, `make verify`); `--help` says how.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.plan import jobenv
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def job_modules(framework: str) -> list[str]:
    """What the job's own steps import for this framework (its descriptor's step_modules)."""
    return list(frameworks.descriptor(framework).step_modules)


def task_env(spec: Spec) -> dict[str, str]:
    """The job's non-secret env (the framework's, then the run's NCCL settings): what the Ray tasks of
    accel, preflight and the collective get as their runtime_env, so they see what the job will see."""
    return jobenv.job_env(spec, tracker=False)

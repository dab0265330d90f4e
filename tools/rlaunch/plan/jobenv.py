"""The job's non-secret environment, for the driver and every Ray process: one builder and one
precedence for every infrastructure.

From lowest to highest: the infrastructure's own settings (what its nodes need to find rlaunch, its
ports, its defaults), the framework's env (its adapter's), the tracker's (one W&B run per run, where
the infrastructure does not set the id itself), then the run's NCCL settings, which nothing below may
undo (without RDMA NCCL must not probe InfiniBand). Secrets are never here: they travel by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rlaunch.plan import tracking
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def job_env(spec: Spec, infra: Mapping[str, str] | None = None, *, tracker: bool = True) -> dict[str, str]:
    """The env in that precedence. tracker=False where the infrastructure sets W&B's run id itself
    (SkyPilot's run.sh, from SKYPILOT_TASK_ID) or where only the driver reads this (job.sh)."""
    env = {k: str(v) for k, v in (infra or {}).items()}
    env.update({k: str(v) for k, v in frameworks.get(spec.framework.name).env(spec).items()})
    if tracker:
        env.update(tracking.wandb_env(spec))
    env.update(spec.derived.nccl_env)
    return env

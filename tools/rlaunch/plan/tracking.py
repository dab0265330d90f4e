"""One tracker run per rlaunch run, across its attempts (a managed-job recovery, a RayJob retry,
RESUME=1): W&B continues the same run id instead of starting a new one.

verl and RLinf call wandb.init without an id (their descriptors' wandb_id_from_env), so W&B takes WANDB_RUN_ID and WANDB_RESUME from the
environment of the process that logs (a Ray actor: the job's runtime env must carry them). AReaL
passes its own, already stable, id (<experiment>_<trial>_train, resume="allow"); the rehearsal logs
to TensorBoard only. On SkyPilot, run.sh sets the id from SKYPILOT_TASK_ID before the raylets start
(templates/skypilot/run.sh.j2); everywhere else it is the run id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def wandb_env(spec: Spec) -> dict[str, str]:
    """The env that makes every attempt of the run log into one W&B run ({} without W&B)."""
    if not spec.logging.wandb or not frameworks.descriptor(spec.framework.name).wandb_id_from_env:
        return {}
    return {"WANDB_RUN_ID": spec.run.id, "WANDB_RESUME": "allow"}

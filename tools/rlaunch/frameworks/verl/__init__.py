"""verl (0.9): `python3 -m verl.trainer.main_ppo` with Hydra overrides rendered from the spec."""

from rlaunch.registry.frameworks import CpuRule, Descriptor, Images, Validator

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
)

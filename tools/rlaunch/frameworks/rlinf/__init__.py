"""RLinf (0.3, pinned commit): examples/reasoning/main_grpo.py with a YAML rlaunch renders."""

from rlaunch.registry.frameworks import Descriptor, Images, Saves, StepSource, Validator

FRAMEWORK = Descriptor(
    name="rlinf",
    summary="RLinf GRPO pipeline from its pinned checkout",
    order=3,
    step_modules=("ray", "yaml", "tensorboard"),
    # `import rlinf` (its resolvers) and its reasoning-config validation.
    validator=Validator(needs=("torch", "hydra-core", "ray", "numpy")),
    images=Images(dockerfile="docker/rlinf/Dockerfile",
                  why_none="rlinf {version} runs from the pinned checkout (no published wheel)"),
    wandb_id_from_env=True,  # wandb.init without an id
    steps=StepSource("tfevents", "{tensorboard}"),  # its metrics are TensorBoard scalars, per step
    # global_step_N/actor/dcp_checkpoint: the actor's fp32 weights and Adam states (DCP), every one kept.
    saves=Saves(weights_bytes=4, how="DCP: fp32 weights + Adam"),
)

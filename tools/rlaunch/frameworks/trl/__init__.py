"""TRL: GRPOTrainer inside Ray Train's TorchTrainer, one worker per Ray node (rlaunch.rehearsal.train).
On CPU this is the rehearsal: a tiny model learns a toy task in minutes."""

from rlaunch.registry.frameworks import CpuRule, Descriptor, Images, Saves, StepSource

FRAMEWORK = Descriptor(
    name="trl",
    summary="TRL GRPOTrainer under Ray Train (the CPU rehearsal)",
    order=0,
    cpu_rule=CpuRule("every", 1, "one Ray Train worker per node"),
    step_modules=("ray", "tensorboard"),
    # docker/trl installs TRL and the CPU torch (python.torch) into Ray's CPU image
    images=Images(dockerfile="docker/trl/Dockerfile", entrypoint_help=("-m", "rlaunch.rehearsal.train", "--help"),
                  requirement="trl=={version}", installs=True, adds=("torch",)),
    steps=StepSource("jsonl", "{metrics}"),  # rank 0's metrics.jsonl, a line per optimizer step
    # HF Trainer's checkpoint-N: model.safetensors (fp32) + optimizer.pt (Adam, fp32), the last 2 kept
    # (rehearsal.worker KEEP_CHECKPOINTS); checkpoint/final/ the fp32 weights once more.
    saves=Saves(weights_bytes=4, keep=2, once_bytes=4, how="HF Trainer: fp32 weights + Adam, the last 2 kept"),
)

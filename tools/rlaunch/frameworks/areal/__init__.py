"""AReaL (1.0.4): examples/math/gsm8k_rl.py with an experiment YAML rlaunch renders."""

from rlaunch.registry.frameworks import Descriptor, Images, Saves, StepSource, Validator

FRAMEWORK = Descriptor(
    name="areal",
    summary="AReaL GRPO (gsm8k_rl.py), local or Ray scheduler",
    order=2,
    step_modules=("ray", "yaml"),
    # What load_expr_config imports beyond AReaL itself (versions from AReaL's own metadata), and what
    # the plan's row probe does: its gsm8k loader (datasets) and reward (areal.reward: math-verify).
    validator=Validator(needs=("torch", "hydra-core", "omegaconf", "transformers", "uvloop", "pyyaml", "aiohttp",
                               "colorlog", "tenacity", "flask", "torchdata", "lark", "pillow", "ray", "numba",
                               "orjson", "einops", "aiofiles", "openai", "swanlab", "trackio", "wandb",
                               "tensorboardX", "tabulate", "datasets", "math-verify")),
    # In the image, installed there without its dependencies (AReaL's Dockerfile: uv pip install
    # --no-deps -e /AReaL, under uv's resolution): pip does not resolve its wheel's requirements
    # with the image's sglang (openai pins), so the check resolves what the run adds, not areal.
    images=Images(dockerfile="docker/areal/Dockerfile", why_none="areal {version} is in the image"),
    # main.log: "Train step g/G done." per step (g from 1).
    steps=StepSource("log", "{fileroot}/logs/*/{experiment}/{trial}/main.log", r"Train step (\d+)/\d+ done"),
    # The saver's HF weights (bf16) at every save, kept; recover_info/ (weights + Adam, fp32) as often,
    # overwritten in place: counted once more at its size.
    saves=Saves(weights_bytes=2, optimizer_states=0, once_bytes=16,
                how="HF weights (bf16) per save + one recover checkpoint (fp32 weights + Adam)"),
)

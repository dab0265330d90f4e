"""Golden cases of the AIStudio (managed Ray) backend: the seed-003 preset, the same with its inputs in
seed 003's own layout (model.path and data.path), and the rehearsal (no checkout, no pinned inputs)
for the run script's other branch; with CODE, staged under WORK_ROOT by launch and checked by run.sh;
a verl run with DATA= a directory of this machine, staged the same way and checked by its manifest."""

from pathlib import Path

CODE = str(Path(__file__).resolve().parents[1] / "fixtures" / "code" / "rehearsal")
DATA = str(Path(__file__).resolve().parents[1] / "fixtures" / "data" / "gsm8k-parquet")

MOUNT = "/mnt/rlinf-reproduction"
SEED_LAYOUT = (f"model.path={MOUNT}/models/modelscope/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B/"
               "6fc93244f442ee2b5ab5c8000687ef5f7ffe1d03 "
               f"data.path={MOUNT}/datasets/inclusionAI/AReaL-boba-Data/1799c00be3f1216ab55a5cae3562d654dbfd7d82")

CASES = [
    ("aistudio-rlinf-grpo-pipeline-1.5b", "rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio"}),
    ("aistudio-rlinf-grpo-pipeline-1.5b-seed-layout", "rlinf-grpo-pipeline-1.5b",
     {"INFRA": "aistudio", "SET": SEED_LAYOUT}),
    ("aistudio-rehearsal", "rehearsal", {"INFRA": "aistudio"}),
    ("aistudio-rehearsal-code", "rehearsal", {"INFRA": "aistudio", "CODE": CODE,
                                              "SET": 'framework.overrides=["reward=rehearsal_reward:copy_reward"]'}),
    ("aistudio-verl-ppo-gsm8k-0.5b-data", "verl-ppo-gsm8k-0.5b", {"INFRA": "aistudio", "DATA": DATA}),
]

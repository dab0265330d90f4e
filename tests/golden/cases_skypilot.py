"""Golden cases of the SkyPilot backend: each SkyPilot preset on gcp, aws and k8s, plus the
variants that change the task's shape: AReaL on 2 nodes (Ray scheduler), a managed spot job, RDMA
on Kubernetes, INFRA=sky with a region, the CPU rehearsal on a cloud, DATA= a directory of this
machine (a file_mounts entry, then the inputs step's upload), and a verl run with CODE (its pack in a
file mount at paths.code_dir, the reward file relative to it)."""

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "gsm8k-parquet"
CODE = str(Path(__file__).resolve().parents[1] / "fixtures" / "code" / "rehearsal")

PRESETS = ["verl-ppo-gsm8k-0.5b", "verl-grpo-math-7b", "areal-grpo-gsm8k"]

CASES = [(f"sky-{preset}-{infra}", preset, {"INFRA": infra}) for preset in PRESETS
         for infra in ("gcp", "aws", "k8s")]
CASES += [
    ("sky-areal-grpo-gsm8k-gcp-2nodes", "areal-grpo-gsm8k", {"INFRA": "gcp", "NODES": "2", "GPUS_PER_NODE": "8"}),
    ("sky-verl-ppo-gsm8k-0.5b-gcp-spot", "verl-ppo-gsm8k-0.5b", {"INFRA": "gcp", "SPOT": "1"}),
    ("sky-verl-grpo-math-7b-k8s-rdma", "verl-grpo-math-7b", {"INFRA": "k8s", "RDMA": "1"}),
    ("sky-verl-ppo-gsm8k-0.5b-sky-region", "verl-ppo-gsm8k-0.5b", {"INFRA": "sky", "INFRA_SPEC": "aws/us-east-1"}),
    ("sky-rehearsal-gcp", "rehearsal", {"INFRA": "gcp"}),
    ("sky-verl-grpo-math-7b-gcp-data", "verl-grpo-math-7b", {"INFRA": "gcp", "DATA": str(DATA)}),
    ("sky-verl-grpo-math-7b-gcp-code", "verl-grpo-math-7b", {
        "INFRA": "gcp", "CODE": CODE,
        "SET": 'framework.overrides=["reward.custom_reward_function.path=rehearsal_reward/verl_reward.py"]'}),
]

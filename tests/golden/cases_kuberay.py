"""Golden cases of the KubeRay backend (INFRA=kuberay): the RayJob, storage and monitoring manifests
next to the common artifacts. Flavors and buckets come from the presets' @kuberay overlays. With CODE:
the inputs Job extracts the pack from its ConfigMap onto the run's volume (setup.sh), and the RayJob's
runtime env puts it first on PYTHONPATH. With DATA= a directory of this machine too: its files travel in
the same ConfigMap, and the inputs Job extracts and uploads them to their content-named directory. A
CODE=<url>@<commit> over the ConfigMap's limit: the inputs Job fetches that commit and checks its hash
(tests/gitcode.py makes it under build/, the same commit everywhere, and checks it out in the plan's cache)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gitcode  # noqa: E402 - tests/, beside this folder

CODE = str(Path(__file__).resolve().parents[1] / "fixtures" / "code" / "rehearsal")
DATA = str(Path(__file__).resolve().parents[1] / "fixtures" / "data" / "gsm8k-parquet")
BIG_REPO = Path(__file__).resolve().parents[2] / "build" / "golden-code" / "big.git"
# Where `make plan` keeps fetched commits (rlaunch.config.code.resolve): filled here, nothing fetched.
GIT_CODE = gitcode.cache_checkout(Path(os.environ.get("RLAUNCH_CODE_CACHE") or BIG_REPO.parents[1] / "code-cache"),
                                  BIG_REPO, gitcode.bare_repo(BIG_REPO))

CASES = [
    ("kuberay-rehearsal", "rehearsal", {"INFRA": "kuberay"}),
    ("kuberay-rehearsal-code", "rehearsal", {"INFRA": "kuberay", "CODE": CODE,
                                             "SET": 'framework.overrides=["reward=rehearsal_reward:copy_reward"]'}),
    ("kuberay-rehearsal-gitcode-fetched", "rehearsal", {"INFRA": "kuberay", "CODE": GIT_CODE}),
    ("kuberay-verl-ppo-gsm8k-0.5b-data-code", "verl-ppo-gsm8k-0.5b", {"INFRA": "kuberay", "DATA": DATA, "CODE": CODE}),
    ("kuberay-rehearsal-3nodes-rdma", "rehearsal", {"INFRA": "kuberay", "NODES": "3", "RDMA": "1"}),
    ("kuberay-verl-ppo-gsm8k-0.5b-vke", "verl-ppo-gsm8k-0.5b", {"INFRA": "kuberay"}),  # PodMonitors, Grafana
    # seed 002's dashboard Ingress (an ALB) and APMPlus tracing, both asked for
    ("kuberay-verl-ppo-gsm8k-0.5b-vke-ingress-apmplus", "verl-ppo-gsm8k-0.5b",
     {"INFRA": "kuberay", "IMAGE": "cr.volces.com/my-team/rlaunch-verl-apmplus:0.9.1",
      "SET": "monitoring.dashboard_ingress=true monitoring.ingress_class=alb monitoring.apmplus=true "
             "framework.image_facts.modules=[tracing.setup_tracing]"}),  # an rlaunch image built with the hook
    ("kuberay-verl-grpo-gsm8k-32b-gke", "verl-grpo-gsm8k-32b", {"INFRA": "kuberay"}),  # A4X: GB200, IMEX
    # seed 004's A3 Ultra pool: H200 x 8, the gIB plugin with A3 Ultra's NCCL config files, no IMEX
    ("kuberay-verl-grpo-gsm8k-32b-gke-a3u", "verl-grpo-gsm8k-32b",
     {"INFRA": "kuberay", "ACCELERATOR": "H200", "GPUS_PER_NODE": "8"}),
    # the same pool on GKE Standard: seed 004's network mapping (gvnic-1, rdma-0..7) and the GPU pods'
    # multi-network annotations instead of DRANET claims
    ("kuberay-verl-grpo-gsm8k-32b-gke-a3u-standard", "verl-grpo-gsm8k-32b",
     {"INFRA": "kuberay", "ACCELERATOR": "H200", "GPUS_PER_NODE": "8",
      "SET": "infra.kuberay.gke_networking=network-mapping"}),
]

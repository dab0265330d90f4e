"""REHEARSE=1: a preset's own experiment, rehearsed on this machine's CPUs before any GPU is rented.

Everything of the preset's that is not a size stays: the algorithm, the reward (verl's own for the
dataset's data_source, or the user's custom_reward_function), the data pipeline and its layout, the
framework overrides, checkpoint and resume, the metrics and logger wiring. The sizes become CPU ones,
and each change is a Rewrite the plan lists with its reason (`make plan ... REHEARSE=1`):
- here, the config's keys (the infrastructure, the cluster, the model and data, the batch sizes);
- in the framework's CPU module, what the framework itself needs on CPU (verl: rlaunch.frameworks.verl.cpu).

The model is a tiny Qwen2 with a ChatML tokenizer, and the data is a few dozen rows in the dataset's
own format, converted by the code that converts the real one (rlaunch.job.data), or with DATA= the
first rows of the user's data. Both are made on the shared storage by the job itself
(rlaunch.frameworks.verl.cpu.prepare).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from rlaunch import ROOT
from rlaunch.config import dotted
from rlaunch.errors import ConfigError

FRAMEWORKS = ("verl",)
SOURCE = "REHEARSE"
NODES = 2
BATCH = 4  # prompts per step
# Where the rehearsal's model and data live, under storage.mount. The job keeps what it finds there
# and checks it against its manifest: bump the number when the tiny model or the rows change.
HOME = "rehearsal/verl-cpu-1"


@dataclass(frozen=True)
class Rewrite:
    key: str          # a config key, or a framework override (framework.overrides[<its key>])
    value: Any        # what the rehearsal runs
    was: Any          # what the launch would have run (None: not set)
    why: str

    def line(self) -> str:
        was = "unset" if self.was is None else repr(self.was)
        return f"{self.key}: {was} -> {self.value!r}: {self.why}"


def mount_of(cfg: dict[str, Any]) -> str:
    """storage.mount as derive() will make it for INFRA=local: a relative one is under the repository."""
    mount = str(dotted.get(cfg, "storage.mount", "build/storage"))
    return (mount if mount.startswith("/") else str(ROOT / mount)).rstrip("/")


def sizes(cfg: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(key, value, why) for every config key the rehearsal sets."""
    mount = mount_of(cfg)
    dataset = dotted.get(cfg, "data.dataset", "")
    model = dotted.get(cfg, "model.name", "") or dotted.get(cfg, "model.path", "")
    # Micro-batches divide each GPU's share of a mini-batch: BATCH prompts x n responses over NODES.
    n = dotted.get(cfg, "algo.group_size", 1)
    micro = max(1, min(BATCH, BATCH * (n if isinstance(n, int) and n > 0 else 1) // NODES))
    return [
        ("cluster.nodes", NODES, "two local nodes: verl's placement, its workers and the node watch "
                                 "across a real multi-node Ray cluster"),
        ("cluster.gpus_per_node", 0, "CPU in place of GPUs (each node declares one Ray GPU for verl's "
                                     "placement; the tensors stay on CPU)"),
        ("cluster.accelerator", "", "no GPU type: CPU"),
        ("cluster.cpus_per_node", 12, "Ray CPUs each node declares: verl's TransferQueue asks for about "
                                      "10 where it schedules (declared, not cores)"),
        ("model.path", f"{mount}/{HOME}/model",
         f"a tiny Qwen2 (~300k parameters, ChatML tokenizer) in place of {model or 'the model'}"),
        data_path(mount, dataset, str(dotted.get(cfg, "data.source", "") or "")),
        ("data.max_prompt_length", 128, "the tiny task's prompts with the dataset's instruction"),
        ("data.max_response_length", 8, "a few tokens: the rollout, reward and update run, not a solution"),
        ("train.batch_size", BATCH, f"{BATCH} prompts per step"),
        ("train.mini_batch_size", BATCH, "one policy update per step"),
        ("train.micro_batch_size_per_gpu", micro, "CPU-sized micro-batches"),
        ("train.log_prob_micro_batch_size_per_gpu", micro, "CPU-sized micro-batches"),
        ("train.ref_log_prob_micro_batch_size_per_gpu", micro, "CPU-sized micro-batches"),
        ("train.steps", 3, "three steps: rollout, reward and update each time"),
        ("train.epochs", 1, "the steps decide the length"),
        ("train.save_freq", 1, "a checkpoint every step: a run stopped mid-way resumes from the last"),
        ("train.test_freq", -1, "no validation pass (the checkpoint and resume are what is rehearsed)"),
        ("train.offload", False, "parameter offload and gradient checkpointing save GPU memory: on CPU "
                                 "there is none to save"),
        ("train.smoke", False, "a rehearsal is its own short run"),
        ("rollout.tp", 1, "one rollout server per node"),
        ("rollout.backend", "vllm", "vLLM's CPU build is the rollout server on CPU"),
    ]


def data_path(mount: str, dataset: str, source: str) -> tuple[str, str, str]:
    """The rehearsal's data directory: the tiny task's rows, or with DATA= (data.source) the user's
    first rows, in a directory named by the DATA value (the job's prepare step writes them there)."""
    if source:
        name = hashlib.sha256(source.encode()).hexdigest()[:12]
        return ("data.path", f"{mount}/{HOME}/data-{name}",
                "the first 40 rows of DATA (32 train, 8 test), checked for verl's columns and written there by the "
                "job's prepare step: verl reads the user's rows, the reward scores them")
    return ("data.path", f"{mount}/{HOME}/{dataset}",
            f"40 rows in {dataset}'s own format, converted by the code that converts the real {dataset} "
            "(its data_source, so the same reward function scores them)")


def infra(asked: str, source: str) -> str:
    """The infrastructure a rehearsal loads (before any layer): local. One the user asked for by
    name (INFRA, SET) is refused rather than silently replaced."""
    if asked != "local" and source in ("INFRA", "SET"):
        raise ConfigError("INFRA" if source == "INFRA" else "infra.name", asked,
                          "local, or none (REHEARSE=1 runs on this machine's CPUs; launch "
                          f"INFRA={asked} without REHEARSE for the real run)", source)
    return "local"


def apply(cfg: dict[str, Any], sources: dict[str, str]) -> list[Rewrite]:
    """Rewrite cfg in place for the rehearsal; the rewrites, in order. A launch the rehearsal cannot
    stand in for is refused here, before anything is written."""
    framework = dotted.get(cfg, "framework.name", "")
    if framework not in FRAMEWORKS:
        why = {"trl": "the trl presets are CPU rehearsals already: launch them without REHEARSE",
               "areal": "AReaL's CPU rehearsal is not built yet (docs/VERL-ON-CPU.md)"}.get(
                   framework, f"{framework}'s CPU rehearsal is not built yet")
        raise ConfigError(SOURCE, "1", f"with a {' or '.join(FRAMEWORKS)} preset (`make presets` lists "
                          f"them); this one's framework.name is {framework!r}: {why}")
    out = []
    for key, value, why in sizes(cfg):
        was = dotted.get(cfg, key, None)
        if was != value:
            out.append(Rewrite(key, value, was, why))
        dotted.put(cfg, key, value)
        sources[key] = SOURCE
    dotted.put(cfg, "train.rehearse", True)
    return out

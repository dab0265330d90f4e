"""TRL: GRPOTrainer inside Ray Train's TorchTrainer, one worker per Ray node.

On CPU this is the rehearsal (a tiny model learns a toy task in minutes); on GPUs the same job uses
NCCL and the GPUs Ray Train hands it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rlaunch.errors import CheckError, ConfigError
from rlaunch.frameworks.base import ARTIFACTS, Framework
from rlaunch.rehearsal.settings import ConfigError as TrainConfigError
from rlaunch.rehearsal.settings import parse_config  # validates exactly as the job will

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

ENTRY = "rlaunch.rehearsal.train"


class Trl(Framework):
    name = "trl"

    def train_config(self, spec: Spec) -> dict[str, Any]:
        train, algo = spec.train, spec.algo
        return {
            "run_dir": spec.paths.run_dir,
            "num_workers": spec.cluster.nodes,
            "use_gpu": spec.cluster.gpus_per_node > 0,
            "steps": train.smoke_steps if train.smoke else train.steps,
            "group_size": algo.group_size,
            "learning_rate": algo.lr,
            "per_device_batch": train.micro_batch_size_per_gpu,
            "max_completion_length": spec.data.max_response_length,
            "seed": 0,
            "save_freq": max(train.save_freq, 0),  # -1 (only at the end): no checkpoint to resume from
            **({"smoke": True} if train.smoke else {}),
        }

    def command(self, spec: Spec) -> list[str]:
        return ["${RLAUNCH_PYTHON}", "-m", ENTRY, "--config", f"{ARTIFACTS}/trl.json"]

    def files(self, spec: Spec) -> dict[str, str]:
        return {"trl.json": json.dumps(self.train_config(spec), indent=2) + "\n"}

    def check(self, spec: Spec) -> None:
        if spec.algo.name != "grpo":
            raise ConfigError("algo.name", spec.algo.name, "grpo (the TRL adapter runs GRPOTrainer)")
        if spec.algo.group_size < 2:
            raise ConfigError("algo.group_size", spec.algo.group_size,
                              ">= 2 (GRPO compares responses within a group)")
        if spec.train.steps < 1:
            raise ConfigError("train.steps", spec.train.steps, ">= 1 for the TRL adapter")
        if spec.pins.source:  # refused, not dropped: the trainer would never read it
            raise ConfigError("data.source", spec.data.source, "empty for the TRL adapter, not yet: it trains on its "
                              "own synthetic digits task; DATA= is read by verl, AReaL (GSM8K) and RLinf (.jsonl)")
        if spec.data.dataset != "digits":
            raise ConfigError("data.dataset", spec.data.dataset,
                              "digits (the TRL adapter's task is made at run time)")

    def loader_check(self, spec: Spec, files: dict[str, str]) -> str:
        try:
            parse_config(json.loads(files["trl.json"]))
        except TrainConfigError as err:
            raise CheckError("trl.json", str(err)) from None
        return "trl.json accepted by rlaunch.rehearsal.train"


ADAPTER = Trl()

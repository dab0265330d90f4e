"""TRL: GRPOTrainer inside Ray Train's TorchTrainer, one worker per Ray node.

On CPU this is the rehearsal (a tiny model learns a toy task in minutes); on GPUs the same job uses
NCCL and the GPUs Ray Train hands it."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import TYPE_CHECKING, Any

from rlaunch.config import code, datasource
from rlaunch.config.datarows import rows_here
from rlaunch.errors import CheckError, ConfigError
from rlaunch.frameworks.base import ARTIFACTS, Framework
from rlaunch.rehearsal import tiny
from rlaunch.rehearsal.settings import ConfigError as TrainConfigError
from rlaunch.rehearsal.settings import REWARD_RE, parse_config  # validates exactly as the job will

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

ENTRY = "rlaunch.rehearsal.train"


# The framework.overrides the TRL adapter takes: `reward=<module>:<function>`, a reward the workers
# import (from CODE, first on their PYTHONPATH) instead of rlaunch.rehearsal.tiny.copy_reward.
OVERRIDES = ("reward",)


def _overrides(spec: Spec) -> dict[str, str]:
    """The overrides the TRL adapter takes (OVERRIDES); it reads no others, as before CODE."""
    out = {}
    for item in spec.framework.overrides:
        key, sep, value = item.partition("=")
        if sep and key in OVERRIDES:
            out[key] = value
    return out


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
            # DATA= (data.source): the user's rows, where every node reads them once staged
            **({"data": ",".join(datasource.files(spec.pins.source, "train"))} if spec.pins.source else {}),
            **_overrides(spec),
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
        reward = _overrides(spec).get("reward", "")
        if reward and not re.fullmatch(REWARD_RE, reward):
            raise ConfigError("framework.overrides[reward]", reward, "<module>:<function>, e.g. my_pkg.rewards:copy")
        if reward and spec.paths.code_dir and importlib.util.find_spec(reward.split(".")[0].split(":")[0]) is None:
            module = reward.split(":")[0].replace(".", "/")  # not importable here: it must be CODE's
            code.require(spec, [f"{module}.py", f"{module}/__init__.py"], "framework.overrides[reward]", reward)
        if spec.data.dataset != "digits":
            raise ConfigError("data.dataset", spec.data.dataset,
                              "digits (the TRL adapter's task is made at run time)")

    def inputs(self, spec: Spec) -> list[str]:
        return [f"{datasource.read_dir(spec.pins.source)}/SHA256SUMS"] if spec.pins.source else []

    def data_check(self, spec: Spec) -> list[str]:
        """DATA='s rows read here as every worker will read them (rlaunch.rehearsal.tiny.read_rows): the
        columns, the words inside the tiny model's vocabulary, answers that are digits."""
        if not spec.pins.source:
            return []
        found = rows_here(spec)
        if isinstance(found, str):
            return [f"WARNING data: rows not checked here: {found}"]
        try:
            rows = tiny.read_rows([str(p) for p in found[0]])
        except (OSError, ValueError) as err:  # with data.prepare the rows are its output: it is what to fix
            key, value = ("data.prepare", spec.data.prepare) if spec.data.prepare else ("data.source", spec.data.source)
            raise ConfigError(key, value, str(err)) from None
        answers = sorted({str(r["answer"]) for r in rows})
        per_step = spec.train.micro_batch_size_per_gpu * spec.cluster.nodes // spec.algo.group_size
        reward = _overrides(spec).get("reward") or "rlaunch's copy reward"
        return [f"data: {len(rows)} rows read ({', '.join(p.name for p in found[0])}): prompt and answer in the "
                f"rehearsal's vocabulary, answers {''.join(answers)}; {per_step} prompts a step are drawn from "
                f"them; scored by {reward} on the nodes"]

    def loader_check(self, spec: Spec, files: dict[str, str]) -> str:
        try:
            parse_config(json.loads(files["trl.json"]))
        except TrainConfigError as err:
            raise CheckError("trl.json", str(err)) from None
        return "trl.json accepted by rlaunch.rehearsal.train"


ADAPTER = Trl()

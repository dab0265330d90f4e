"""What the user's own config says that rlaunch's checks read (CMD= of AReaL or RLinf, issue 47): the
model it trains, and every path in it that the framework opens as a file.

The model: the first of MODEL_KEYS[framework] the config (and the command's key=value on top) gives,
`${...}` references followed. A hub id or an absolute directory becomes the spec's model.path at load
(rlaunch.config.load), so the model facts, the memory bound, the checkpoint size and the plan's model
line read the model that runs, not the preset's; a config that names none keeps the preset's, said so.

The paths (FILE_KEYS), checked before any GPU by the adapters' check_command: in CODE (a file or a
directory of the pack), under storage.mount, or a hub id where the framework takes one; `~` and paths
of this machine outside CODE refused naming the YAML file and the key (rlaunch.config.code's rules,
as for the command's key=value). RLinf's config is checked again as Hydra composes it (the files
its defaults list include), from its loader's compose_only answer (Rlinf.loader_check).

How the keys were chosen, from the frameworks' own config classes, not guessed by name:
  - AReaL 1.0.4: areal/api/cli_args.py's dataclasses walked field by field from GRPOConfig (it holds
    PPO's critic and the distillation teacher) in .venv-areal; the str fields its help calls a
    HuggingFace checkpoint, a tokenizer or a dataset path (TrainEngineConfig.path, tokenizer_path,
    SGLangConfig.model_path, vLLMConfig.model, DatasetConfig.path: "a local path or a HuggingFace
    dataset name"). The roots it writes (fileroot, tensorboard.path) are rlaunch's own keys (cmd_keys).
  - RLinf at its pin 7d07a42: every YAML of examples/reasoning/config/** and tests/e2e_tests/reasoning/
    flattened; the keys holding a model or data path (model_path, tokenizer_model, hf_model_path,
    *_data_paths). runner.output_dir and logger.log_path are rlaunch's own keys (cmd_keys).
The config's other values (values(): allocation, engine fraction, tensor parallel, save interval)
are what plan.memory's effective keys, topology's heads rule and ckptsize's count read with CMD=.
Standard library; PyYAML only once a config is read (rlaunch.config.command.read_config imports it then).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import code, dotted, hub
from rlaunch.config import command as user_command
from rlaunch.errors import ConfigError

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

MODEL, DATA, FILE = "model", "dataset", "file"  # a hub id allowed: a model; a dataset (AReaL's); never
_AREAL_MODELS = ("actor.path", "ref.path", "critic.path", "teacher.path", "teacher.train.path", "tokenizer_path",
                 "rollout.tokenizer_path", "teacher.rollout.tokenizer_path", "sglang.model_path", "vllm.model",
                 "scheduler.reward_model_path")
_RLINF_MODELS = ("actor.model.model_path", "rollout.model.model_path", "inference.model.model_path",
                 "actor.tokenizer.tokenizer_model", "critic.tokenizer.tokenizer_model",
                 "inference.tokenizer.tokenizer_model", "reward.tokenizer.tokenizer_model",
                 "actor.megatron.ckpt_convertor.hf_model_path", "critic.megatron.ckpt_convertor.hf_model_path")
FILE_KEYS: dict[str, dict[str, str]] = {
    "areal": {**dict.fromkeys(_AREAL_MODELS, MODEL), "train_dataset.path": DATA, "valid_dataset.path": DATA},
    # RLinf's math dataset reads local .json/.jsonl files only (rlinf/data/datasets): no hub id.
    "rlinf": {**dict.fromkeys(_RLINF_MODELS, MODEL), "data.train_data_paths": FILE, "data.val_data_paths": FILE},
}
# The model the actor trains (what the memory bound and the checkpoints count), first given wins.
MODEL_KEYS = {"areal": ("actor.path",), "rlinf": ("actor.model.model_path", "rollout.model.model_path")}
_REF = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


@dataclass(frozen=True)
class Named:
    key: str     # the config's key, e.g. actor.path
    where: str   # "CMD's actor.path" or "examples/math/gsm8k_grpo.yaml's actor.path"
    error_key: str  # the key a refusal names: code.command[actor.path] / code.command[<yaml>: actor.path]
    value: str


def _resolved(tree: dict[str, Any], key: str) -> tuple[Any, str]:
    """(the value at key, the key that holds it): a plain `${other.key}` followed (a few hops: the
    frameworks' own chains, tokenizer_path: ${actor.path})."""
    value = dotted.get(tree, key, None)
    for _ in range(5):
        ref = _REF.match(value) if isinstance(value, str) else None
        if ref is None:
            break
        key, value = ref[1], dotted.get(tree, ref[1], None)
    return value, key


def named(framework: str, text: str, root: Path, source: str = "") -> list[Named]:
    """Each path FILE_KEYS lists that the command's config gives (a list's items each), in that order."""
    cmd = user_command.parse(text, source)
    if framework not in FILE_KEYS or not user_command.config_file(cmd):
        return []
    tree = user_command.read_config(text, cmd, root, source)
    return in_tree(framework, tree, cmd.overrides(), user_command.config_file(cmd))


def in_tree(framework: str, tree: dict[str, Any], given: dict[str, str], label: str) -> list[Named]:
    """named() of a config `tree` (`given`: the command's key=value; `label`: what the tree is)."""
    keys = FILE_KEYS.get(framework, {})
    out = []
    for key in keys:
        value, holder = _resolved(tree, key)
        if holder != key and holder in keys:
            continue  # a reference to another listed key: that key's value, said once
        items = value if isinstance(value, list) else [value]
        in_cmd = key in given
        for item in items:
            if isinstance(item, str) and item.strip() and item not in ("null", "None"):
                out.append(Named(key, f"CMD's {key}" if in_cmd else f"{label}'s {key}",
                                 f"code.command[{key}]" if in_cmd else f"code.command[{label}: {key}]", item))
    return out


def model(framework: str, text: str, root: Path, source: str = "") -> Named | None:
    """The model the command's config trains (MODEL_KEYS, first given), or None."""
    given = named(framework, text, root, source)
    return next((n for k in MODEL_KEYS.get(framework, ()) for n in given if n.key == k), None)


def taken(value: str) -> bool:
    """A model value the spec's model.path can hold: a hub id or an absolute directory (the rest is
    refused by check, or an interpolation whose value is the run's)."""
    return value.startswith("/") or (hub.parse(value) is not None and "${" not in value)


def of(spec: Spec) -> Named | None:
    """The command's model for this spec (None: no CMD= of AReaL or RLinf, or its config names none)."""
    root = code.here(spec) if spec.code.command and spec.framework.name in MODEL_KEYS else None
    return model(spec.framework.name, spec.code.command, root) if root is not None else None


def error_key(spec: Spec, key: str) -> str:
    """The key a refusal of the command's config names: code.command[key] (CMD's key=value) or
    code.command[<yaml>: key]."""
    cmd = user_command.parse(spec.code.command)
    return f"code.command[{key}]" if key in cmd.overrides() else f"code.command[{user_command.config_file(cmd)}: {key}]"


def values(spec: Spec) -> dict[str, str]:
    """Every scalar of the command's config (YAML, then its key=value), `${key}` references followed,
    as the strings an override would give: what the memory bound reads where rlaunch renders nothing."""
    staged = Path(spec.paths.code_dir) if spec.paths.code_dir else None
    try:  # on a node (preflight's storage check): CODE as staged there; here: code.dir
        root = staged if staged is not None and staged.is_dir() else code.here(spec)
    except ConfigError:
        return {}
    if root is None or not spec.code.command:
        return {}
    cmd = user_command.parse(spec.code.command)
    if not user_command.config_file(cmd):
        return {}
    try:
        tree = user_command.read_config(spec.code.command, cmd, root)
    except ImportError:  # a job step's image without PyYAML: no values, as before this module read any
        return {}
    out = {}
    for key in dotted.flat(tree):
        value = _resolved(tree, key)[0]
        if value is not None and not isinstance(value, (dict, list)):
            out[key] = str(value)
    return out


def line(spec: Spec) -> str:
    """The plan's line: which model the run's checks read, and from which key ("" without CMD=)."""
    if not spec.code.command or spec.framework.name not in MODEL_KEYS:
        return ""
    found = of(spec)
    keys = " or ".join(MODEL_KEYS[spec.framework.name])
    if found is None:
        return (f"model: CMD's config names none ({keys}): the memory bound and checkpoint size count the "
                f"preset's, {spec.model.path or spec.model.name}")
    if not taken(found.value):
        return (f"model: {found.value}, from {found.where}: not read here (an interpolation the run resolves), "
                "so the memory bound and the checkpoint size do not count it")
    how = ("on the shared storage, checked by the inputs step" if found.value.startswith("/") else
           f"downloaded by the inputs step to {spec.paths.model}, which the command's {found.key} becomes")
    return f"model: {found.value}, from {found.where}: {how}; the memory bound and checkpoint size read it"


def model_keys(spec: Spec) -> list[str]:
    """`++key=<directory>` for each key of the command's config that names the hub model rlaunch's
    inputs step downloads (rlaunch.config.inputs): the framework loads that copy, at the pinned
    revision, instead of downloading it again on every node. [] for a directory, or no model."""
    root = code.here(spec) if spec.code.command and spec.framework.name in MODEL_KEYS else None
    if root is None or not spec.paths.model.startswith("/"):
        return []
    given = named(spec.framework.name, spec.code.command, root)
    found = next((n for k in MODEL_KEYS[spec.framework.name] for n in given if n.key == k), None)
    if found is None or found.value.startswith("/") or not taken(found.value):
        return []
    return [f"++{n.key}={spec.paths.model}" for n in given if n.value == found.value]


def check(spec: Spec, composed: dict[str, Any] | None = None) -> None:
    """Every path FILE_KEYS names in the command's config (or in `composed`, the config as the
    framework composed it, its includes too): in CODE, under storage.mount, or a hub id where the
    framework takes one; one ConfigError naming the YAML file (or CMD) and the key."""
    root = code.here(spec)
    if root is None:
        return
    held: set[str] | None = None  # the pack's files, listed once a relative path asks (packing reads CODE)
    kinds = FILE_KEYS.get(spec.framework.name, {})
    label = f"{user_command.config_file(user_command.parse(spec.code.command))} with its defaults"
    items = (named(spec.framework.name, spec.code.command, root) if composed is None else
             in_tree(spec.framework.name, composed, {}, label))
    for item in items:
        value = item.value.strip("'\"")
        if "${" in value:
            continue  # an interpolation (an env var): its value is the run's
        if value.startswith(("/", "~")):
            code.check_paths(spec, item.error_key, value)
            continue
        kind = kinds[item.key]
        rel = os.path.normpath(re.sub(r"^(\$PWD|\$\{PWD\}|\.)/", "", value))
        if held is None:
            packed = code.of(spec)
            held = {e.path for e in packed.entries} if packed is not None else set()
        in_code = rel in held or any(p.startswith(rel + "/") for p in held)
        if in_code and kind != MODEL:
            continue
        if kind == MODEL and in_code:
            raise ConfigError(item.error_key, value, f"a hub id or a directory under storage.mount="
                              f"{spec.storage.mount}: {rel} is in CODE, and the model is read by rlaunch's inputs "
                              "step and memory bound from the shared storage; put it there and name that path")
        if kind != FILE and hub.parse(value) is not None and not rel.startswith(".."):
            continue  # a hub id: the framework downloads it (a model: like model.path)
        allowed = "a path in CODE or under storage.mount" + (" or a hub id" if kind != FILE else "")
        raise ConfigError(item.error_key, value, f"{allowed}: {rel} is not in {spec.code.dir}; "
                          f"{code.fix(spec, item.error_key)}")

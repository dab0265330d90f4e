"""rlaunch's own topology rules, shared by the framework adapters: what verl, AReaL and RLinf only find
out an hour into a GPU run. A framework's own shapes (RLinf's placement, AReaL's allocations) are in its
package.

Each rule reads the merged spec (plus the framework overrides the adapter will pass) and raises one
ConfigError naming the key to change, the value and what would be allowed. Pure: no framework import.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from rlaunch.config import cmdfacts
from rlaunch.errors import ConfigError

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec
    from rlaunch.registry.frameworks import CpuRule

# Advantage estimators that compare responses within a group: a group of 1 has no baseline.
GROUP_ESTIMATORS = {"grpo", "rloo", "grpo_passk", "rloo_vectorized", "grpo_vectorized", "opo", "gpg",
                    "reinforce_plus_plus_baseline"}
ROLLOUT_ENGINES = ("vllm", "sglang")


# --- framework overrides ("key=value" words) ---------------------------------------------------

def parse_overrides(items: list[str]) -> dict[str, str]:
    """framework.overrides -> {dotted key: raw value}; Hydra's +/++ prefixes are dropped."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.lstrip("+~")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.\-]*", key):
            raise ConfigError("framework.overrides", item, "each override is key=value, e.g. "
                              "actor_rollout_ref.rollout.n=8")
        out[key] = value
    return out


def effective(spec: Spec, key: str, default: Any) -> Any:
    """The value a framework will see for `key`: an override in framework.overrides wins."""
    return parse_overrides(spec.framework.overrides).get(key, default)


def as_int(key: str, value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ConfigError(key, value, "an integer") from None


def hydra_list(value: str) -> list[str]:
    """'[console,file]' / 'console' -> ['console', 'file']."""
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [w.strip().strip("'\"") for w in text.split(",") if w.strip()]


# --- the rules ---------------------------------------------------------------------------------

# REHEARSE=1 (rlaunch.config.rehearse): each CPU node declares this many Ray GPUs, which the
# framework schedules its workers on; the tensors stay on CPU.
REHEARSAL_GPUS_PER_NODE = 1


def gpus_per_node(spec: Spec) -> int:
    """The GPUs per node the framework schedules on: the declared ones on a rehearsal."""
    return REHEARSAL_GPUS_PER_NODE if spec.train.rehearse else spec.cluster.gpus_per_node


def total_gpus(spec: Spec) -> int:
    return spec.cluster.nodes * gpus_per_node(spec)


def require_gpus(spec: Spec, framework: str) -> None:
    if gpus_per_node(spec) < 1:
        raise ConfigError("cluster.gpus_per_node", spec.cluster.gpus_per_node,
                          f">= 1: {framework} trains on GPUs only (on CPU: REHEARSE=1 for a verl preset, "
                          "or a framework.name=trl preset such as PRESET=rehearsal)")


def group_size(spec: Spec, key: str = "algo.group_size", value: Any = None) -> None:
    """GRPO and the other group estimators need >= 2 responses per prompt."""
    n = as_int(key, spec.algo.group_size if value is None else value)
    estimator = spec.algo.adv_estimator
    if (spec.algo.name == "grpo" or estimator in GROUP_ESTIMATORS) and n < 2:
        raise ConfigError(key, n, f">= 2 for {spec.algo.name} with adv_estimator={estimator}: "
                          "advantages compare responses within a group (n=1 is not GRPO)")


def batch_sizes(spec: Spec, n: int, dp: int, keys: dict[str, str] | None = None, step: int | None = None) -> None:
    """train batch x n divisible by the data-parallel GPUs; mini <= batch; per-GPU mini % micro == 0.

    verl's rules (checked at run time only): it multiplies the prompt batch and the mini-batch by
    rollout.n, then splits both over every GPU. `step`: the prompts a step trains on where the
    framework says no batch (verl's fully-async trainer: its mini-batches)."""
    keys = keys or {}
    k_batch = keys.get("batch", "train.batch_size")
    k_mini = keys.get("mini", "train.mini_batch_size")
    k_micro = keys.get("micro", "train.micro_batch_size_per_gpu")
    mini = as_int(k_mini, effective(spec, keys.get("mini_override", ""), spec.train.mini_batch_size))
    batch = step * mini if step is not None else \
        as_int(k_batch, effective(spec, keys.get("batch_override", ""), spec.train.batch_size))
    micro = as_int(k_micro, effective(spec, keys.get("micro_override", ""),
                                      spec.train.micro_batch_size_per_gpu))
    if dp < 1:
        return
    if (batch * n) % dp:
        raise ConfigError(k_batch, batch, f"batch x group size ({batch} x {n} = {batch * n}) must divide "
                          f"evenly over the {dp} data-parallel GPUs (nodes x gpus_per_node)")
    if mini > batch:
        raise ConfigError(k_mini, mini, f"<= the train batch ({k_batch}={batch})")
    if (mini * n) % dp:
        raise ConfigError(k_mini, mini, f"mini-batch x group size ({mini} x {n}) must divide evenly over "
                          f"the {dp} data-parallel GPUs")
    per_gpu = mini * n // dp
    if per_gpu % micro:
        raise ConfigError(k_micro, micro, f"a divisor of the per-GPU mini-batch {per_gpu} "
                          f"(({k_mini}={mini} x n={n}) / {dp} GPUs)")


def rollout_tp(spec: Spec, key: str = "rollout.tp", value: Any = None) -> None:
    tp = as_int(key, spec.rollout.tp if value is None else value)
    gpn = spec.cluster.gpus_per_node
    if tp < 1 or (gpn and gpn % tp):
        raise ConfigError(key, tp, f"a divisor of cluster.gpus_per_node={gpn} (a rollout engine's "
                          "tensor-parallel group stays inside one node)")


def rollout_backend(spec: Spec, key: str = "rollout.backend", value: Any = None) -> str:
    name = str(spec.rollout.backend if value is None else value)
    if name not in ROLLOUT_ENGINES:
        raise ConfigError(key, name, f"a rollout engine the framework runs: {', '.join(ROLLOUT_ENGINES)}")
    return name


def ray_cpus(spec: Spec, rule: CpuRule, framework: str) -> None:
    """cluster.cpus_per_node (0: the infrastructure decides) against the framework's CPU rule."""
    cpus = spec.cluster.cpus_per_node
    if cpus and cpus < rule.count:
        where = "each worker (the head is CPU-only)" if spec.derived.cpu_only_head else rule.place
        raise ConfigError("cluster.cpus_per_node", cpus, f">= {rule.count} Ray CPUs on {where} for "
                          f"{framework}: {rule.why}")


def under_mount(spec: Spec, key: str, path: str, what: str) -> None:
    """Absolute and on the shared mount: node-local paths lose other nodes' shards (verl 625, 1535)."""
    mount = spec.storage.mount.rstrip("/")
    if not str(path).startswith("/"):
        raise ConfigError(key, path, f"an absolute path under storage.mount={mount} ({what}; a relative "
                          "path lands in Ray's per-job working dir)")
    if not os.path.normpath(str(path)).startswith(mount + "/"):
        raise ConfigError(key, path, f"a path under storage.mount={mount} ({what} must be on the storage "
                          "every node shares)")


def metrics_logger(key: str, loggers: list[str], required: str) -> None:
    if required not in loggers:
        raise ConfigError(key, "[" + ",".join(loggers) + "]", f"a list including '{required}': rlaunch's "
                          "postflight reads its machine-readable metrics")


def rollout_tp_of(spec: Spec) -> tuple[str, int]:
    """(the key that sets it, the rollout engine's tensor-parallel size) as the framework will see it:
    with CMD= of AReaL or RLinf, as the user's config and command say it."""
    own = bool(spec.code.command) and spec.framework.name in cmdfacts.MODEL_KEYS
    eff = cmdfacts.values(spec) if own else parse_overrides(spec.framework.overrides)

    def named(key: str) -> str:
        return cmdfacts.error_key(spec, key) if own else f"framework.overrides[{key}]"

    for key in ("actor_rollout_ref.rollout.tensor_model_parallel_size", "rollout.tensor_parallel_size"):
        if key in eff:
            return named(key), as_int(key, eff[key])
    if spec.framework.name == "areal" and "rollout.backend" in eff:  # "sglang:d4t2": t is the TP size
        found = re.search(r"t(\d+)", str(eff["rollout.backend"]).partition(":")[2])
        if found:
            return named("rollout.backend"), int(found.group(1))
    return "rollout.tp", as_int("rollout.tp", spec.rollout.tp)


def attention_heads(spec: Spec, heads: int, kv_heads: int) -> None:
    """The model's heads against the ways they are split (the model's config.json, rlaunch.config.modelfacts).

    vLLM and SGLang split the attention heads over the rollout's tensor-parallel group (vLLM: "Total
    number of attention heads must be divisible by tensor parallel size") and the KV heads too, or
    replicate them when the group is larger (then it must be a multiple of them); verl's Ulysses
    sequence parallelism splits the heads likewise."""
    key, tp = rollout_tp_of(spec)
    if heads % tp:
        raise ConfigError(key, tp, f"a divisor of the model's {heads} attention heads (the rollout engine "
                          "splits them over its tensor-parallel GPUs)")
    if (tp > kv_heads and tp % kv_heads) or (tp <= kv_heads and kv_heads % tp):
        raise ConfigError(key, tp, f"a divisor or a multiple of the model's {kv_heads} KV heads (the rollout "
                          "engine splits them over its tensor-parallel GPUs, or copies them when there are more GPUs)")
    sp_key = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
    sp = as_int(sp_key, effective(spec, sp_key, 1))
    if spec.framework.name == "verl" and sp > 1 and heads % sp:
        raise ConfigError(f"framework.overrides[{sp_key}]", sp, f"a divisor of the model's {heads} attention heads "
                          "(Ulysses splits them over the sequence-parallel GPUs)")

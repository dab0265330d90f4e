"""AReaL's phases for plan's memory bound (rlaunch.plan.memory).

AReaL (decoupled: rollout.backend and actor.backend on separate GPUs): per actor GPU, the actor's
parameters + gradients + Adam states at actor.dtype sharded over its data-parallel GPUs, plus the
colocated reference; per rollout GPU, the engine's weights within its static fraction (SGLang
mem_fraction_static, vLLM gpu_memory_utilization).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlaunch.frameworks.areal.adapter import ADAPTER as adapter
from rlaunch.frameworks.areal.allocation import allocation_gpus
from rlaunch.plan.memory import Phase, dtype_bytes, effective, gb, gpu_memory

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def phases(spec: Spec, n: dict[str, int]) -> tuple[list[Phase], list[str]]:
    exp, eff = adapter.experiment(spec), effective(spec)
    rollout_default, actor_default = adapter.backends(spec)
    actor_alloc = str(eff.get("actor.backend", actor_default))
    rollout_alloc = str(eff.get("rollout.backend", rollout_default))
    dp = allocation_gpus("actor.backend", actor_alloc)
    rollout_gpus = allocation_gpus("rollout.backend", rollout_alloc)
    tp = 1
    for letter, size in re.findall(r"([dptce])(\d+)", rollout_alloc.partition(":")[2]):
        if letter == "t":
            tp = int(size)
    replicas = max(rollout_gpus // tp, 1)
    p = n["total"]
    nbytes, dtype = dtype_bytes(eff, "actor.dtype", str(exp["actor"]["dtype"]))
    mem = gpu_memory(spec)[0]
    has_ref = float(eff.get("actor.kl_ctl", exp["actor"]["kl_ctl"]) or 0) > 0
    how = f"{p / 1e9:.2f} B params x {nbytes} B ({dtype}) / {dp} actor GPUs"
    update = Phase("actor update", "gpu")
    update.add("actor parameters", p * nbytes / dp, how)
    update.add("actor gradients", p * nbytes / dp, f"one per parameter, {nbytes} B ({dtype}) / {dp} actor GPUs")
    update.add("actor optimizer", 2 * p * nbytes / dp, f"Adam: 2 states x {nbytes} B x {p / 1e9:.2f} B / {dp} actor GPUs")
    if has_ref:
        update.add("reference parameters", p * nbytes / dp, f"colocated with the actor: {how}")
    engine = str(eff.get("rollout.backend", rollout_default)).split(":", 1)[0]
    if engine == "sglang":
        frac, key = float(eff.get("sglang.mem_fraction_static", exp["sglang"]["mem_fraction_static"])), "sglang.mem_fraction_static"
    else:
        frac, key = float(eff.get("vllm.gpu_memory_utilization", exp["vllm"]["gpu_memory_utilization"])), "vllm.gpu_memory_utilization"
    roll = Phase("rollout engine", "gpu")
    roll.add("rollout weights", 2 * p / tp, f"{p / 1e9:.2f} B params x 2 B (bf16) / tensor parallel {tp}")
    # The engine keeps its weights and KV cache inside its static fraction: the rest is not its to use.
    roll.add("outside the engine's fraction", (1 - frac) * mem, f"(1 - {key} {frac:g}) x {gb(mem)}")
    notes = [f"{replicas} rollout replica(s) on {rollout_gpus} GPU(s), the actor on {dp}",
             "activations not counted (AReaL packs sequences: no bound on them)"]
    return [update, roll], notes

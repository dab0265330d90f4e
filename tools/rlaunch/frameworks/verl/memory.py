"""verl's phases for plan's memory bound (rlaunch.plan.memory).

verl (hybrid engine: actor, reference, critic and the rollout engine share every GPU; FSDP shards over
all of them, or over fsdp_size): per GPU, the largest of
  rollout engine start  vLLM/SGLang refuses to start unless its reserved fraction
                        (gpu_memory_utilization x GPU memory) is free beside the FSDP parameters
                        already loaded (verl creates the rollout last, after the actor, reference and
                        critic);
  actor update          actor parameters + gradients + optimizer states (verl loads them back onto the
                        GPU for the update even with param/optimizer offload), plus the reference's and
                        the critic's resident parameters (and the critic's optimizer states);
  critic update         the same for the critic (PPO);
  rollout after update  what stays resident (parameters, optimizer states) plus the engine's own weights.
Precisions are the config's: verl's actor and critic default to fp32 master weights (fsdp_config.
model_dtype), so Adam holds 2 x 4 bytes per parameter; the reference counts at bf16 (2 bytes).
With offload on, what leaves the GPU is counted on the host, per node (cluster.memory_gb).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.plan.memory import Phase, dtype_bytes, effective, flag, gb, gpu_memory

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# The bound counts train.offload: plan suggests it as a lever.
OFFLOAD = True


def phases(spec: Spec, n: dict[str, int]) -> tuple[list[Phase], list[str]]:
    eff, cluster, gpu_note = effective(spec), spec.cluster, []
    p = n["total"]
    world = cluster.nodes * cluster.gpus_per_node
    fsdp = int(str(eff.get("actor_rollout_ref.actor.fsdp_config.fsdp_size", -1)) or -1)
    shard = fsdp if 0 < fsdp < world else world
    actor = "actor_rollout_ref.actor.fsdp_config."
    a_bytes, a_dtype = dtype_bytes(eff, actor + "model_dtype", "fp32")
    a_param_off = flag(eff, actor + "param_offload", spec.train.offload)
    a_optim_off = flag(eff, actor + "optimizer_offload", spec.train.offload)
    a_policy_off = flag(eff, actor + "offload_policy", False)  # FSDP2 CPUOffloadPolicy: on the host throughout
    estimator = str(eff.get("algorithm.adv_estimator", spec.algo.adv_estimator))
    ppo = estimator == "gae"
    kl_loss = flag(eff, "actor_rollout_ref.actor.use_kl_loss", spec.algo.use_kl_loss)
    kl_reward = flag(eff, "algorithm.use_kl_in_reward", ppo and not spec.algo.use_kl_loss)
    has_ref = kl_loss or kl_reward
    ref_off = flag(eff, "actor_rollout_ref.ref.fsdp_config.param_offload", spec.train.offload)
    critic = "critic.model.fsdp_config."
    c_bytes, c_dtype = dtype_bytes(eff, critic + "model_dtype", "fp32")
    c_param_off = flag(eff, critic + "param_offload", False)
    c_optim_off = flag(eff, critic + "optimizer_offload", False)
    # The critic is the same network with a value head (hidden -> 1) in place of the LM head.
    pc = p - n["lm_head"] + n["final_norm"] if ppo else 0  # final_norm: one weight per hidden unit
    util = float(eff.get("actor_rollout_ref.rollout.gpu_memory_utilization", spec.rollout.gpu_memory_utilization))
    tp = int(str(eff.get("actor_rollout_ref.rollout.tensor_model_parallel_size", spec.rollout.tp)))
    mem = gpu_memory(spec)[0]

    def of(count: int, nbytes: int) -> float:
        return count * nbytes / shard

    a_params = f"{p / 1e9:.2f} B params x {a_bytes} B ({a_dtype}) / {shard} GPUs"
    a_optim = f"Adam: 2 states x {a_bytes} B x {p / 1e9:.2f} B / {shard} GPUs"
    ref_how = f"{p / 1e9:.2f} B params x 2 B (bf16, at least) / {shard} GPUs"
    c_params = f"{pc / 1e9:.2f} B params x {c_bytes} B ({c_dtype}) / {shard} GPUs"
    c_optim = f"Adam: 2 states x {c_bytes} B x {pc / 1e9:.2f} B / {shard} GPUs"
    actor_on_gpu = not a_policy_off

    start = Phase("rollout engine start", "gpu")
    if actor_on_gpu and not a_param_off:
        start.add("actor parameters", of(p, a_bytes), a_params)
    if has_ref and not ref_off:
        start.add("reference parameters", of(p, 2), ref_how)
    if ppo and not c_param_off:
        start.add("critic parameters", of(pc, c_bytes), c_params)
    if str(eff.get("actor_rollout_ref.rollout.name", spec.rollout.backend)) == "sglang":
        # SGLang keeps its weights and KV cache inside mem_fraction_static (verl passes it
        # gpu_memory_utilization) and leaves the rest to others: what others hold must fit in the rest.
        start.add("rollout weights", 2 * p / tp, f"{p / 1e9:.2f} B params x 2 B (bf16) / tensor parallel {tp}")
        start.add("outside the engine's fraction", (1 - util) * mem,
                  f"(1 - gpu_memory_utilization {util:g}) x {gb(mem)}, SGLang's mem_fraction_static")
    else:  # vLLM refuses to start unless gpu_memory_utilization x memory is free at that moment
        start.add("rollout reserved", util * mem, f"gpu_memory_utilization {util:g} x {gb(mem)}")

    update = Phase("actor update", "gpu")
    if actor_on_gpu:
        update.add("actor parameters", of(p, a_bytes), a_params + (" (loaded back for the update)" if a_param_off else ""))
        update.add("actor gradients", of(p, a_bytes), f"one per parameter, {a_bytes} B ({a_dtype}) / {shard} GPUs")
        update.add("actor optimizer", of(2 * p, a_bytes), a_optim + (" (loaded back for the update)" if a_optim_off else ""))
    if has_ref and not ref_off:
        update.add("reference parameters", of(p, 2), ref_how)
    if ppo:
        if not c_param_off:
            update.add("critic parameters", of(pc, c_bytes), c_params)
        if not c_optim_off:
            update.add("critic optimizer", of(2 * pc, c_bytes), c_optim)
    phases = [start, update]

    def resident(phase: Phase) -> Phase:
        """What stays on the GPU outside its own phase: the actor's (unless offloaded) and the reference."""
        if actor_on_gpu and not a_param_off:
            phase.add("actor parameters", of(p, a_bytes), a_params)
        if actor_on_gpu and not a_optim_off:
            phase.add("actor optimizer", of(2 * p, a_bytes), a_optim)
        if has_ref and not ref_off:
            phase.add("reference parameters", of(p, 2), ref_how)
        return phase

    if ppo:
        cup = Phase("critic update", "gpu")
        cup.add("critic parameters", of(pc, c_bytes), c_params)
        cup.add("critic gradients", of(pc, c_bytes), f"one per parameter, {c_bytes} B ({c_dtype}) / {shard} GPUs")
        cup.add("critic optimizer", of(2 * pc, c_bytes), c_optim)
        phases.append(resident(cup))

    roll = resident(Phase("rollout after an update", "gpu"))
    if ppo and not c_param_off:
        roll.add("critic parameters", of(pc, c_bytes), c_params)
    if ppo and not c_optim_off:
        roll.add("critic optimizer", of(2 * pc, c_bytes), c_optim)
    roll.add("rollout weights", 2 * p / tp, f"{p / 1e9:.2f} B params x 2 B (bf16) / tensor parallel {tp}")
    phases.append(roll)

    # What offload puts on the host, per node: every GPU's share, while the GPU does something else.
    gpn = cluster.gpus_per_node
    host = Phase("offloaded state (per node)", "host")
    if a_param_off or a_policy_off:
        host.add("actor parameters", gpn * of(p, a_bytes), f"{gpn} GPUs x ({a_params})")
    if a_optim_off or a_policy_off:
        host.add("actor optimizer", gpn * of(2 * p, a_bytes), f"{gpn} GPUs x ({a_optim})")
    if has_ref and ref_off:
        host.add("reference parameters", gpn * of(p, 2), f"{gpn} GPUs x ({ref_how})")
    if ppo and c_param_off:
        host.add("critic parameters", gpn * of(pc, c_bytes), f"{gpn} GPUs x ({c_params})")
    if ppo and c_optim_off:
        host.add("critic optimizer", gpn * of(2 * pc, c_bytes), f"{gpn} GPUs x ({c_optim})")
    if host.terms:
        # A sleeping vLLM (verl's free_cache_engine) keeps its weights in host memory meanwhile.
        host.add("rollout weights asleep", gpn * 2 * p / tp, f"{gpn} GPUs x {p / 1e9:.2f} B x 2 B / tp {tp}")
        phases.append(host)
    if flag(eff, "actor_rollout_ref.model.use_remove_padding", True):
        gpu_note.append("activations not counted (remove padding packs real lengths: no bound on them)")
    return phases, gpu_note

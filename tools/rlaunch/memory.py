"""A lower bound on the memory a run needs, checked at `make plan` against the accelerators' memory.

It is a bound, not an estimate: every term is memory the framework certainly holds at the same time
in one phase of a step, so a run whose bound exceeds a GPU's memory cannot fit, and a run that could
fit is never failed. What the bound leaves out (activations of packed sequences, the KV cache beyond
the engine's reservation, CUDA context, fragmentation) only makes the real need larger.

Inputs, all offline: the spec; the model's config.json facts pinned beside it in configs/versions.yaml
(`models.<name>.config`: layers, hidden size, vocabulary, ... -> the parameter count); the memory of
the accelerator (`accelerators.<family>.memory_gb`, the makers' figures).

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

AReaL (decoupled: rollout.backend and actor.backend on separate GPUs): per actor GPU, the actor's
parameters + gradients + Adam states at actor.dtype sharded over its data-parallel GPUs, plus the
colocated reference; per rollout GPU, the engine's weights within its static fraction (SGLang
mem_fraction_static, vLLM gpu_memory_utilization).

TRL (the rehearsal) and RLinf: no bound yet (`bound` returns None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import pins
from .errors import CheckError

GB = 10**9
DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}


# ---------------------------------------------------------------- facts


def param_count(cfg: dict) -> dict[str, int]:
    """Parameters of a Qwen2/Llama-style decoder from its config.json facts, by part.

    Qwen2: q/k/v projections with bias, o without; gated MLP (gate, up, down); two RMSNorms per layer
    and one final; the LM head shares the embedding when tie_word_embeddings."""
    h, inter = int(cfg["hidden_size"]), int(cfg["intermediate_size"])
    layers, vocab = int(cfg["num_hidden_layers"]), int(cfg["vocab_size"])
    heads, kv_heads = int(cfg["num_attention_heads"]), int(cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
    head_dim = int(cfg.get("head_dim") or h // heads)
    bias = cfg.get("attention_bias", cfg.get("model_type") == "qwen2")
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if bias else 0)
    per_layer = attention + 3 * h * inter + 2 * h
    embed = vocab * h
    head = 0 if cfg.get("tie_word_embeddings", False) else vocab * h
    parts = {"embedding": embed, "layers": layers * per_layer, "final_norm": h, "lm_head": head}
    parts["total"] = sum(parts.values())
    return parts


def model_facts(spec: dict, versions: dict | None = None) -> tuple[dict, str] | None:
    """(config facts, source) pinned beside spec.model.name; None when none are pinned."""
    versions = versions or pins.load_versions()
    entry = versions.get("models", {}).get(spec["model"]["name"]) or {}
    if not entry.get("config"):
        return None
    return entry["config"], f"https://huggingface.co/{entry['hf_id']}/blob/{entry['revision']}/config.json"


def accelerator_memory(name: str, versions: dict | None = None) -> tuple[int, str] | None:
    """Bytes of one accelerator, and how it was read; None for a name with no pinned size.

    "A100-80GB", "A100-SXM4-80GB": the size in the name; "A100": the family's largest size (so the
    check errs towards passing)."""
    versions = versions or pins.load_versions()
    table = versions.get("accelerators", {})
    parts = [p for p in re.split(r"[-_ ]", name.upper()) if p]
    if not parts or parts[0] not in table:
        return None
    sizes = [float(s) for s in table[parts[0]]["memory_gb"]]
    named = [float(m.group(1)) for p in parts[1:] if (m := re.fullmatch(r"(\d+)GB", p))]
    if named:
        return int(named[0] * GB), f"{parts[0]} {named[0]:g} GB (named)"
    if len(sizes) > 1:
        return int(max(sizes) * GB), (f"{parts[0]} {max(sizes):g} GB (the largest {parts[0]}; name the size, "
                                      f"e.g. {parts[0]}-{min(sizes):g}GB, for a stricter check)")
    return int(sizes[0] * GB), f"{parts[0]} {sizes[0]:g} GB"


# ---------------------------------------------------------------- the bound


@dataclass(frozen=True)
class Term:
    name: str
    bytes: float
    how: str


@dataclass
class Phase:
    """Memory held at once on one GPU (or one node's host memory) in one part of a step."""

    name: str
    where: str  # "gpu" (per GPU) or "host" (per node)
    terms: list[Term] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)

    def add(self, name: str, nbytes: float, how: str) -> None:
        if nbytes > 0:
            self.terms.append(Term(name, nbytes, how))


@dataclass
class Bound:
    framework: str
    params: int
    facts_source: str
    gpu_bytes: int
    gpu_how: str
    host_bytes: int | None  # cluster.memory_gb, None when not set
    phases: list[Phase]
    levers: list[str]
    notes: list[str] = field(default_factory=list)

    def worst(self, where: str) -> Phase | None:
        cands = [p for p in self.phases if p.where == where]
        return max(cands, key=lambda p: p.total) if cands else None

    def over(self) -> list[Phase]:
        """Phases whose bound exceeds the memory there."""
        out = []
        for p in self.phases:
            cap = self.gpu_bytes if p.where == "gpu" else self.host_bytes
            if cap is not None and p.total > cap:
                out.append(p)
        return out


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB"


def _eff(spec: dict) -> dict[str, str]:
    from .frameworks import topology

    return topology.parse_overrides(spec["framework"]["overrides"])


def _flag(eff: dict, key: str, default: bool) -> bool:
    value = eff.get(key)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def _dtype(eff: dict, key: str, default: str) -> tuple[int, str]:
    name = str(eff.get(key, default)).strip().lower()
    return DTYPE_BYTES.get(name, DTYPE_BYTES[default]), name if name in DTYPE_BYTES else default


def verl_phases(spec: dict, n: dict[str, int]) -> tuple[list[Phase], list[str]]:
    eff, cluster, gpu_note = _eff(spec), spec["cluster"], []
    p = n["total"]
    world = cluster["nodes"] * cluster["gpus_per_node"]
    fsdp = int(str(eff.get("actor_rollout_ref.actor.fsdp_config.fsdp_size", -1)) or -1)
    shard = fsdp if 0 < fsdp < world else world
    actor = "actor_rollout_ref.actor.fsdp_config."
    a_bytes, a_dtype = _dtype(eff, actor + "model_dtype", "fp32")
    a_param_off = _flag(eff, actor + "param_offload", spec["train"]["offload"])
    a_optim_off = _flag(eff, actor + "optimizer_offload", spec["train"]["offload"])
    a_policy_off = _flag(eff, actor + "offload_policy", False)  # FSDP2 CPUOffloadPolicy: on the host throughout
    estimator = str(eff.get("algorithm.adv_estimator", spec["algo"]["adv_estimator"]))
    ppo = estimator == "gae"
    kl_loss = _flag(eff, "actor_rollout_ref.actor.use_kl_loss", spec["algo"]["use_kl_loss"])
    kl_reward = _flag(eff, "algorithm.use_kl_in_reward", ppo and not spec["algo"]["use_kl_loss"])
    has_ref = kl_loss or kl_reward
    ref_off = _flag(eff, "actor_rollout_ref.ref.fsdp_config.param_offload", spec["train"]["offload"])
    critic = "critic.model.fsdp_config."
    c_bytes, c_dtype = _dtype(eff, critic + "model_dtype", "fp32")
    c_param_off = _flag(eff, critic + "param_offload", False)
    c_optim_off = _flag(eff, critic + "optimizer_offload", False)
    # The critic is the same network with a value head (hidden -> 1) in place of the LM head.
    pc = p - n["lm_head"] + n["final_norm"] if ppo else 0  # final_norm: one weight per hidden unit
    util = float(eff.get("actor_rollout_ref.rollout.gpu_memory_utilization", spec["rollout"]["gpu_memory_utilization"]))
    tp = int(str(eff.get("actor_rollout_ref.rollout.tensor_model_parallel_size", spec["rollout"]["tp"])))
    mem = _gpu_memory(spec)[0]

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
    if str(eff.get("actor_rollout_ref.rollout.name", spec["rollout"]["backend"])) == "sglang":
        # SGLang keeps its weights and KV cache inside mem_fraction_static (verl passes it
        # gpu_memory_utilization) and leaves the rest to others: what others hold must fit in the rest.
        start.add("rollout weights", 2 * p / tp, f"{p / 1e9:.2f} B params x 2 B (bf16) / tensor parallel {tp}")
        start.add("outside the engine's fraction", (1 - util) * mem,
                  f"(1 - gpu_memory_utilization {util:g}) x {_gb(mem)}, SGLang's mem_fraction_static")
    else:  # vLLM refuses to start unless gpu_memory_utilization x memory is free at that moment
        start.add("rollout reserved", util * mem, f"gpu_memory_utilization {util:g} x {_gb(mem)}")

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

    if ppo:
        cup = Phase("critic update", "gpu")
        cup.add("critic parameters", of(pc, c_bytes), c_params)
        cup.add("critic gradients", of(pc, c_bytes), f"one per parameter, {c_bytes} B ({c_dtype}) / {shard} GPUs")
        cup.add("critic optimizer", of(2 * pc, c_bytes), c_optim)
        if actor_on_gpu and not a_param_off:
            cup.add("actor parameters", of(p, a_bytes), a_params)
        if actor_on_gpu and not a_optim_off:
            cup.add("actor optimizer", of(2 * p, a_bytes), a_optim)
        if has_ref and not ref_off:
            cup.add("reference parameters", of(p, 2), ref_how)
        phases.append(cup)

    roll = Phase("rollout after an update", "gpu")
    if actor_on_gpu and not a_param_off:
        roll.add("actor parameters", of(p, a_bytes), a_params)
    if actor_on_gpu and not a_optim_off:
        roll.add("actor optimizer", of(2 * p, a_bytes), a_optim)
    if has_ref and not ref_off:
        roll.add("reference parameters", of(p, 2), ref_how)
    if ppo and not c_param_off:
        roll.add("critic parameters", of(pc, c_bytes), c_params)
    if ppo and not c_optim_off:
        roll.add("critic optimizer", of(2 * pc, c_bytes), c_optim)
    roll.add("rollout weights", 2 * p / tp, f"{p / 1e9:.2f} B params x 2 B (bf16) / tensor parallel {tp}")
    phases.append(roll)

    # What offload puts on the host, per node: every GPU's share, while the GPU does something else.
    gpn = cluster["gpus_per_node"]
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
    if _flag(eff, "actor_rollout_ref.model.use_remove_padding", True):
        gpu_note.append("activations not counted (remove padding packs real lengths: no bound on them)")
    return phases, gpu_note


def areal_phases(spec: dict, n: dict[str, int]) -> tuple[list[Phase], list[str]]:
    from .frameworks.areal.adapter import ADAPTER as adapter
    from .frameworks.areal.allocation import allocation_gpus
    exp, eff = adapter.experiment(spec), _eff(spec)
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
    nbytes, dtype = _dtype(eff, "actor.dtype", str(exp["actor"]["dtype"]))
    mem = _gpu_memory(spec)[0]
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
    roll.add("outside the engine's fraction", (1 - frac) * mem, f"(1 - {key} {frac:g}) x {_gb(mem)}")
    notes = [f"{replicas} rollout replica(s) on {rollout_gpus} GPU(s), the actor on {dp}",
             "activations not counted (AReaL packs sequences: no bound on them)"]
    return [update, roll], notes


FRAMEWORKS = {"verl": verl_phases, "areal": areal_phases}


def _gpu_memory(spec: dict) -> tuple[int, str]:
    found = accelerator_memory(spec["cluster"]["accelerator"])
    return found if found else (0, "")


def bound(spec: dict) -> Bound | None:
    """The lower bound for this run, or None where rlaunch has none (framework, facts or
    accelerator size not known: then the plan says so and checks nothing)."""
    name = spec["framework"]["name"]
    if name not in FRAMEWORKS or spec["cluster"]["gpus_per_node"] < 1:
        return None
    facts = model_facts(spec)
    gpu = accelerator_memory(spec["cluster"]["accelerator"])
    if facts is None or gpu is None:
        return None
    counts = param_count(facts[0])
    phases, notes = FRAMEWORKS[name](spec, counts)
    host = spec["cluster"]["memory_gb"]
    return Bound(framework=name, params=counts["total"], facts_source=facts[1], gpu_bytes=gpu[0], gpu_how=gpu[1],
                 host_bytes=int(host * GB) if host else None, phases=phases, levers=[], notes=notes)


def why_none(spec: dict) -> str:
    name = spec["framework"]["name"]
    if name not in FRAMEWORKS:
        return f"no memory bound for {name} yet"
    if spec["cluster"]["gpus_per_node"] < 1:
        return "no GPUs"
    if model_facts(spec) is None:
        return (f"no config.json facts pinned for model.name={spec['model']['name'] or '(none)'} in "
                "configs/versions.yaml (models.<name>.config)")
    return (f"no pinned memory size for cluster.accelerator={spec['cluster']['accelerator']} "
            "(configs/versions.yaml accelerators)")


def _with(spec: dict, **changes) -> dict:
    import copy

    out = spec.dump() if hasattr(spec, "dump") else copy.deepcopy(spec)  # a frozen Spec: its data
    for dotted, value in changes.items():
        node = out
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return out


def levers(spec: dict, b: Bound) -> list[str]:
    """What would make the bound fit: more nodes (the fewest that do), offload, ... each computed."""
    out = []
    nodes = spec["cluster"]["nodes"]
    for more in range(nodes + 1, nodes * 16 + 2):
        trial = bound(_with(spec, **{"cluster.nodes": more}))
        if trial and not [p for p in trial.over() if p.where == "gpu"]:
            out.append(f"NODES={more} (the fewest nodes of {spec['cluster']['gpus_per_node']} x "
                       f"{spec['cluster']['accelerator']} whose bound fits)")
            break
    else:
        out.append("more nodes: none up to 16x as many makes the bound fit")
    if spec["framework"]["name"] == "verl" and not spec["train"]["offload"]:
        trial = bound(_with(spec, **{"train.offload": True}))
        if trial:
            gpu = [p for p in trial.over() if p.where == "gpu"]
            out.append("SET=train.offload=true " + ("fits the GPUs" if not gpu else
                       f"is not enough alone (its {gpu[0].name} still needs {_gb(gpu[0].total)})"))
    worst = b.worst("gpu")
    if worst and any(t.name == "rollout reserved" for t in worst.terms):
        out.append("a smaller rollout.gpu_memory_utilization (the engine's reservation is in this phase)")
    out.append("a smaller micro-batch (train.micro_batch_size_per_gpu) lowers activations, which this bound "
               "does not count: it cannot make these terms fit")
    return out


def report(b: Bound) -> list[str]:
    lines = [f"{b.params / 1e9:.2f} B parameters (from {b.facts_source}); GPU {b.gpu_how}"]
    for p in b.phases:
        cap = b.gpu_bytes if p.where == "gpu" else b.host_bytes
        unit = "per GPU" if p.where == "gpu" else "per node, host memory"
        head = f"{p.name} ({unit}): {_gb(p.total)}"
        head += f" of {_gb(cap)}" if cap is not None else " (cluster.memory_gb=0: not checked)"
        lines.append(head)
        lines += [f"    {t.name:<30} {_gb(t.bytes):>9}  {t.how}" for t in p.terms]
    lines += [f"note: {n}" for n in b.notes]
    return lines


def check(spec: dict) -> str:
    """The plan's line: the bound and the headroom; CheckError (exit 2) when it cannot fit."""
    b = bound(spec)
    if b is None:
        return f"memory bound: not computed ({why_none(spec)})"
    over = b.over()
    if over:
        worst = max(over, key=lambda p: p.total - (b.gpu_bytes if p.where == "gpu" else b.host_bytes))
        cap = b.gpu_bytes if worst.where == "gpu" else b.host_bytes
        where = (f"one {spec['cluster']['accelerator']} ({_gb(cap)})" if worst.where == "gpu"
                 else f"a node's host memory (cluster.memory_gb={spec['cluster']['memory_gb']})")
        terms = " + ".join(f"{t.name} {_gb(t.bytes)}" for t in worst.terms)
        detail = "\n".join(["", *("  " + line for line in report(b)),
                            "  to make it fit: " + "; ".join(levers(spec, b))])
        raise CheckError("memory", f"the {worst.name} needs at least {_gb(worst.total)} on {where}: "
                                   f"{terms}{detail}")
    gpu = b.worst("gpu")
    line = (f"memory bound: {_gb(gpu.total)} per GPU at least ({gpu.name}), "
            f"{_gb(b.gpu_bytes - gpu.total)} headroom of {_gb(b.gpu_bytes)}")
    host = b.worst("host")
    if host is not None:
        line += (f"; host {_gb(host.total)} per node" + (f", {_gb(b.host_bytes - host.total)} headroom"
                                                         if b.host_bytes else " (cluster.memory_gb=0: not checked)"))
    return line

"""A lower bound on the memory a run needs, checked at `make plan` against the accelerators' memory.

It is a bound, not an estimate: every term is memory the framework certainly holds at the same time
in one phase of a step, so a run whose bound exceeds a GPU's memory cannot fit, and a run that could
fit is never failed. What the bound leaves out (activations of packed sequences, the KV cache beyond
the engine's reservation, CUDA context, fragmentation) only makes the real need larger.

Inputs, all offline: the spec; the model's config.json facts pinned beside it in configs/versions.yaml
(`models.<name>.config`: layers, hidden size, vocabulary, ... -> the parameter count); the memory of
the accelerator (`accelerators.<family>.memory_gb`, the makers' figures).

The phases are the framework's own (frameworks/<name>/memory.py `phases(spec, counts)`: each a set
of terms held at the same time, per GPU or per node's host); a framework without that module has no
bound (`bound` returns None, the plan says so).
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


def gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB"


def effective(spec: dict) -> dict[str, str]:
    from .frameworks import topology

    return topology.parse_overrides(spec["framework"]["overrides"])


def flag(eff: dict, key: str, default: bool) -> bool:
    value = eff.get(key)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def dtype_bytes(eff: dict, key: str, default: str) -> tuple[int, str]:
    name = str(eff.get(key, default)).strip().lower()
    return DTYPE_BYTES.get(name, DTYPE_BYTES[default]), name if name in DTYPE_BYTES else default




def gpu_memory(spec: dict) -> tuple[int, str]:
    found = accelerator_memory(spec["cluster"]["accelerator"])
    return found if found else (0, "")


def _phases(name: str):
    """The framework's phases function (frameworks/<name>/memory.py), or None."""
    from . import frameworks

    module = frameworks.descriptor(name).memory
    return module.phases if module else None


def bound(spec: dict) -> Bound | None:
    """The lower bound for this run, or None where rlaunch has none (framework, facts or
    accelerator size not known: then the plan says so and checks nothing)."""
    name = spec["framework"]["name"]
    if _phases(name) is None or spec["cluster"]["gpus_per_node"] < 1:
        return None
    facts = model_facts(spec)
    gpu = accelerator_memory(spec["cluster"]["accelerator"])
    if facts is None or gpu is None:
        return None
    counts = param_count(facts[0])
    phases, notes = _phases(name)(spec, counts)
    host = spec["cluster"]["memory_gb"]
    return Bound(framework=name, params=counts["total"], facts_source=facts[1], gpu_bytes=gpu[0], gpu_how=gpu[1],
                 host_bytes=int(host * GB) if host else None, phases=phases, levers=[], notes=notes)


def why_none(spec: dict) -> str:
    name = spec["framework"]["name"]
    if _phases(name) is None:
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


def _offloads(name: str) -> bool:
    """The framework's bound counts train.offload (its memory module says OFFLOAD = True)."""
    from . import frameworks

    return bool(getattr(frameworks.descriptor(name).memory, "OFFLOAD", False))


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
    if _offloads(spec["framework"]["name"]) and not spec["train"]["offload"]:
        trial = bound(_with(spec, **{"train.offload": True}))
        if trial:
            gpu = [p for p in trial.over() if p.where == "gpu"]
            out.append("SET=train.offload=true " + ("fits the GPUs" if not gpu else
                       f"is not enough alone (its {gpu[0].name} still needs {gb(gpu[0].total)})"))
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
        head = f"{p.name} ({unit}): {gb(p.total)}"
        head += f" of {gb(cap)}" if cap is not None else " (cluster.memory_gb=0: not checked)"
        lines.append(head)
        lines += [f"    {t.name:<30} {gb(t.bytes):>9}  {t.how}" for t in p.terms]
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
        where = (f"one {spec['cluster']['accelerator']} ({gb(cap)})" if worst.where == "gpu"
                 else f"a node's host memory (cluster.memory_gb={spec['cluster']['memory_gb']})")
        terms = " + ".join(f"{t.name} {gb(t.bytes)}" for t in worst.terms)
        detail = "\n".join(["", *("  " + line for line in report(b)),
                            "  to make it fit: " + "; ".join(levers(spec, b))])
        raise CheckError("memory", f"the {worst.name} needs at least {gb(worst.total)} on {where}: "
                                   f"{terms}{detail}")
    gpu = b.worst("gpu")
    line = (f"memory bound: {gb(gpu.total)} per GPU at least ({gpu.name}), "
            f"{gb(b.gpu_bytes - gpu.total)} headroom of {gb(b.gpu_bytes)}")
    host = b.worst("host")
    if host is not None:
        line += (f"; host {gb(host.total)} per node" + (f", {gb(b.host_bytes - host.total)} headroom"
                                                         if b.host_bytes else " (cluster.memory_gb=0: not checked)"))
    return line

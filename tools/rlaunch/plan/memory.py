"""A lower bound on the memory a run needs, checked at `make plan` against the accelerators' memory.

It is a bound, not an estimate: every term is memory the framework certainly holds at the same time
in one phase of a step, so a run whose bound exceeds a GPU's memory cannot fit, and a run that could
fit is never failed. What the bound leaves out (activations of packed sequences, the KV cache beyond
the engine's reservation, CUDA context, fragmentation) only makes the real need larger.

Inputs: the spec; the facts of the model the run loads, from its own config.json (rlaunch.config.modelfacts:
the parameter count, never the preset's model); the memory of the accelerator
(`accelerators.<family>.memory_gb`, the makers' figures); the host memory of the machine the nodes
will be (`host_memory`: SkyPilot's catalog for the instance types the task can get, KubeRay's pod
limit), never a request floor. Where the model's facts or the machine are unknown, the bound warns
and checks what it can: it never refuses for what it does not know.

The phases are the framework's own (frameworks/<name>/memory.py `phases(spec, counts)`: each a set
of terms held at the same time, per GPU or per node's host); a framework without that module has no
bound (`bound` returns None, the plan says so).
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlaunch.config import cmdfacts, knobs, modelfacts, pins
from rlaunch.config import topology
from rlaunch.plan import catalog
from rlaunch.errors import CheckError, ConfigError
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

GB = 10**9
GIB = 2**30
DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}


# ---------------------------------------------------------------- facts


def accelerator_memory(name: str, versions: dict[str, Any] | None = None) -> tuple[int, str] | None:
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
    host_bytes: int | None  # the nodes' host memory (host_memory), None when not known
    host_how: str
    phases: list[Phase]
    levers: list[str]
    notes: list[str] = field(default_factory=list)

    def worst(self, where: str) -> Phase | None:
        cands = [p for p in self.phases if p.where == where]
        return max(cands, key=lambda p: p.total) if cands else None

    def cap(self, phase: Phase) -> int | None:
        """The memory where a phase is held: one GPU's, or a node's host memory (None: not known)."""
        return self.gpu_bytes if phase.where == "gpu" else self.host_bytes

    def over(self) -> list[Phase]:
        """Phases whose bound exceeds the memory there."""
        out = []
        for p in self.phases:
            cap = self.cap(p)
            if cap is not None and p.total > cap:
                out.append(p)
        return out


def gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB"


def effective(spec: Spec) -> dict[str, str]:
    """The framework's keys that differ from rlaunch's rendering: the overrides, or with CMD= of
    AReaL/RLinf every value of the user's own config (their allocation, dtype, engine fraction)."""
    if spec.code.command and spec.framework.name in cmdfacts.MODEL_KEYS:
        return cmdfacts.values(spec)
    return topology.parse_overrides(spec.framework.overrides)


def flag(eff: dict[str, Any], key: str, default: bool) -> bool:
    value = eff.get(key)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def dtype_bytes(eff: dict[str, Any], key: str, default: str) -> tuple[int, str]:
    name = str(eff.get(key, default)).strip().lower()
    return DTYPE_BYTES.get(name, DTYPE_BYTES[default]), name if name in DTYPE_BYTES else default




def gpu_memory(spec: Spec) -> tuple[int, str]:
    found = accelerator_memory(spec.cluster.accelerator)
    return found if found else (0, "")


def _phases(name: str) -> Any:
    """The framework's phases function (frameworks/<name>/memory.py), or None."""
    module = frameworks.descriptor(name).memory
    return module.phases if module else None


def host_memory(spec: Spec) -> tuple[int | None, str]:
    """Bytes of host memory one node will have, and how that is known; (None, why) when it is not.

    A request floor is never the machine: SkyPilot's `memory: N+` gets an instance with at least N
    GiB, so the machine is the smallest instance its catalog offers for the task."""
    c, infra = spec.cluster, spec.infra.name
    if infra in knobs.SKY_INFRAS:
        infra_string = spec.infra.sky_infra or infra
        cloud = knobs.sky_cloud(infra_string)
        if cloud in ("", "kubernetes"):
            return None, f"the machine is not known ({'any cloud' if not cloud else 'a Kubernetes pod'} via SkyPilot)"
        parts = infra_string.split("/")
        got = catalog.instances(cloud, c.accelerator, c.gpus_per_node,
                                f"{c.cpus_per_node}+" if c.cpus_per_node else None,
                                f"{c.memory_gb}+" if c.memory_gb else None,
                                parts[1] if len(parts) > 1 and parts[1] else None)
        if isinstance(got, str):
            return None, got
        small = min(got, key=lambda i: i.memory_gib)
        others = f" (the smallest of {len(got)} instance types SkyPilot's catalog offers)" if len(got) > 1 else ""
        return small.memory_bytes, f"{cloud} {small.name}: {small.memory_gib:g} GiB{others}"
    if infra == "kuberay":
        if c.memory_gb:  # requests == limits: the pod gets exactly this
            return c.memory_gb * GIB, f"the pod's memory limit {c.memory_gb}Gi (cluster.memory_gb)"
        return None, "the pod has no memory limit (cluster.memory_gb=0): its node's memory is not known"
    if infra == "local":
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None, "this machine's memory is not readable"
        return total // max(c.nodes, 1), f"this machine's {total / GIB:.0f} GiB shared by {c.nodes} node(s)"
    return None, f"INFRA={infra}'s machine spec is not known to rlaunch (the platform's form sets it)"


def bound(spec: Spec) -> Bound | None:
    """The lower bound for this run, or None where rlaunch has none (framework, model facts or
    accelerator size not known: then the plan says so and checks nothing)."""
    name = spec.framework.name
    if _phases(name) is None or spec.cluster.gpus_per_node < 1:
        return None
    facts = modelfacts.of(spec)
    gpu = accelerator_memory(spec.cluster.accelerator)
    if isinstance(facts, str) or gpu is None:
        return None
    phases, notes = _phases(name)(spec, facts.parts)
    host, how = host_memory(spec)
    return Bound(framework=name, params=facts.params, facts_source=facts.source, gpu_bytes=gpu[0], gpu_how=gpu[1],
                 host_bytes=host, host_how=how, phases=phases, levers=[], notes=notes)


def why_none(spec: Spec) -> str:
    name = spec.framework.name
    if _phases(name) is None:
        return f"no memory bound for {name} yet"
    if spec.cluster.gpus_per_node < 1:
        return "no GPUs"
    facts = modelfacts.of(spec)
    if isinstance(facts, str):
        return f"warning: the model's facts are not known, so the memory bound and the heads rules did not run: {facts}"
    return (f"no pinned memory size for cluster.accelerator={spec.cluster.accelerator} "
            "(configs/versions.yaml accelerators)")


def _with(spec: Spec, **changes: Any) -> Spec:
    return spec.changed(changes)


def _offloads(name: str) -> bool:
    """The framework's bound counts train.offload (its memory module says OFFLOAD = True)."""
    return bool(getattr(frameworks.descriptor(name).memory, "OFFLOAD", False))


def _fits(trial: Bound | None) -> bool:
    return trial is not None and not trial.over()


def _tp_lever(spec: Spec, b: Bound) -> str:
    """The smallest larger rollout tensor parallel that fits, where the engine's weights are a term:
    a divisor of the GPUs per node that the model's heads allow."""
    key, now = topology.rollout_tp_of(spec)
    facts = modelfacts.of(spec)
    if key != "rollout.tp" or isinstance(facts, str) or \
            not any(t.name == "rollout weights" for p in b.over() for t in p.terms):
        return ""
    gpn = spec.cluster.gpus_per_node
    for tp in (d for d in range(now + 1, gpn + 1) if gpn % d == 0):
        trial = _with(spec, **{"rollout.tp": tp})
        try:
            topology.attention_heads(trial, facts.heads, facts.kv_heads)
        except ConfigError:
            continue
        if _fits(bound(trial)):
            return f"SET=rollout.tp={tp} (the rollout engine's weights split over {tp} GPUs)"
    return ""


def levers(spec: Spec, b: Bound) -> tuple[list[str], list[str]]:
    """(what would make the bound fit, each tried: the spec changed so, bounded again, fits; what
    would not be enough, said so that nobody tries it)."""
    out, short = [], []
    over = {p.where for p in b.over()}
    nodes = spec.cluster.nodes
    if "gpu" in over:
        for more in range(nodes + 1, nodes * 16 + 2):
            if _fits(bound(_with(spec, **{"cluster.nodes": more}))):
                out.append(f"NODES={more} (the fewest nodes of {spec.cluster.gpus_per_node} x "
                           f"{spec.cluster.accelerator} whose bound fits)")
                break
        else:
            short.append("more nodes: none up to 16x as many")
        if _offloads(spec.framework.name) and not spec.train.offload:
            trial = bound(_with(spec, **{"train.offload": True}))
            if trial:
                still = trial.over()
                if still:
                    short.append(f"SET=train.offload=true (its {still[0].name} still needs {gb(still[0].total)})")
                else:
                    out.append("SET=train.offload=true (parameters and optimizer states wait on the host)")
        tp = _tp_lever(spec, b)
        if tp:
            out.append(tp)
        worst = b.worst("gpu")
        if worst and any(t.name == "rollout reserved" for t in worst.terms) and \
                "actor_rollout_ref.rollout.gpu_memory_utilization" not in effective(spec):
            now = spec.rollout.gpu_memory_utilization
            for util in (round(now - 0.05 * i, 2) for i in range(1, 20)):
                if util >= 0.1 and _fits(bound(_with(spec, **{"rollout.gpu_memory_utilization": util}))):
                    out.append(f"SET=rollout.gpu_memory_utilization={util:g} (the engine reserves less; its KV "
                               "cache shrinks with it)")
                    break
        short.append("a smaller micro-batch (train.micro_batch_size_per_gpu): it lowers activations, which this "
                     "bound does not count")
    if "host" in over:
        host = b.worst("host")
        assert host is not None  # a host phase is over
        need = math.ceil(host.total / GIB)
        if spec.infra.name != "aistudio" and _fits(bound(_with(spec, **{"cluster.memory_gb": need}))):
            out.append(f"SET=cluster.memory_gb={need} (nodes with at least {need} GiB of host memory)")
        if spec.train.offload and _fits(bound(_with(spec, **{"train.offload": False}))):
            out.append("SET=train.offload=false (the GPUs hold the state without offload)")
        if not out:
            short.append("cluster.memory_gb or train.offload: neither makes it fit here")
    return out, short


def report(b: Bound) -> list[str]:
    lines = [f"{b.params / 1e9:.2f} B parameters (from {b.facts_source}); GPU {b.gpu_how}; host "
             + (b.host_how if b.host_bytes is not None else f"not known: {b.host_how}")]
    for p in b.phases:
        cap = b.cap(p)
        unit = "per GPU" if p.where == "gpu" else "per node, host memory"
        head = f"{p.name} ({unit}): {gb(p.total)}"
        head += f" of {gb(cap)}" if cap is not None else " (not checked: the machine is not known)"
        lines.append(head)
        lines += [f"    {t.name:<30} {gb(t.bytes):>9}  {t.how}" for t in p.terms]
    lines += [f"note: {n}" for n in b.notes]
    return lines


def check(spec: Spec) -> str:
    """The plan's line: the bound and the headroom; CheckError (exit 2) when it cannot fit."""
    b = bound(spec)
    if b is None:
        return f"memory bound: not computed ({why_none(spec)})"
    over = b.over()
    if over:
        worst = max(over, key=lambda p: p.total - (b.cap(p) or 0))  # over(): every one has a cap
        cap = b.cap(worst) or 0
        where = (f"one {spec.cluster.accelerator} ({gb(cap)})" if worst.where == "gpu"
                 else f"a node's host memory ({gb(cap)}: {b.host_how})")
        terms = " + ".join(f"{t.name} {gb(t.bytes)}" for t in worst.terms)
        fixes, short = levers(spec, b)
        detail = "\n".join(["", *("  " + line for line in report(b)),
                            *(["  not enough alone: " + "; ".join(short)] if short else []),
                            "  to make it fit: " + ("; ".join(fixes) if fixes else "nothing rlaunch can change "
                                                    "(a larger accelerator, or a smaller model)")])
        raise CheckError("memory", f"the {worst.name} needs at least {gb(worst.total)} on {where}: "
                                   f"{terms}{detail}")
    gpu = b.worst("gpu")
    assert gpu is not None  # bound() is for GPU runs: it has GPU phases
    line = (f"memory bound: {gb(gpu.total)} per GPU at least ({gpu.name}), "
            f"{gb(b.gpu_bytes - gpu.total)} headroom of {gb(b.gpu_bytes)}")
    host = b.worst("host")
    if host is not None:
        line += (f"; host {gb(host.total)} per node" + (
            f", {gb(b.host_bytes - host.total)} headroom of {gb(b.host_bytes)} ({b.host_how})" if b.host_bytes
            else f" (warning: not checked: {b.host_how})"))
    return line

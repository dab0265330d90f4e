"""Framework/accelerator rules: a known failure of a framework's image on one GPU family, the
workaround the job applies on every node before preflight, and what preflight then checks there.

A rule applies when the spec's framework is the rule's and cluster.accelerator is of one of its GPU
families (its first part: "A100-SXM4-80GB" -> A100). The job script runs the workaround on every node
(rlaunch.verify.accel); preflight checks, on every node and in the job's own Python, that the hidden
packages stay hidden, that each GPU reports the compute capability the rule was written for, and
that the rule's modules import. Every failure names the node and the rule's known cause.

Nodes without GPUs (cluster.gpus_per_node=0, as on the CPU stand-in of the AIStudio test) still run
the workaround, which touches only package metadata, and the metadata check; the compute capability
and import checks need a GPU and its CUDA libraries, so preflight records them as skipped there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    name: str
    framework: str
    families: tuple[str, ...]    # GPU families, lower case: cluster.accelerator's first part
    compute_capability: str      # what every GPU of a node must report ("8.0" on A100)
    hide: tuple[str, ...]        # distributions whose metadata the job's Python must not see
    imports: tuple[str, ...]     # modules that must import in the job's Python on every node
    cause: str                   # the known failure the rule avoids, quoted by every message
    source: str                  # where it was found

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the Ray tasks (they never import rlaunch)."""
        return asdict(self)


RULES = (
    Rule(
        name="a100-flash-attn-4",
        framework="rlinf",
        families=("a100",),
        compute_capability="8.0",
        hide=("flash-attn-4",),
        imports=("transformer_engine.pytorch", "sglang"),
        cause=("known A100 failure of the RLinf image (seed 003): it ships FlashAttention 2 and 4; Transformer "
               "Engine, finding flash-attn-4's metadata, goes for FlashAttention-4 kernels, which do not run on "
               "compute capability 8.0, and ends with no usable FlashAttention kernel. With that metadata hidden "
               "in each node's container it uses FlashAttention 2"),
        source="seed 003",
    ),
)


def family(accelerator: str) -> str:
    """The GPU family of an accelerator name: A100-SXM4-80GB -> a100, H100 -> h100, "" -> ""."""
    return accelerator.replace("_", "-").split("-")[0].strip().lower()


def rules_for(framework: str, accelerator: str) -> list[Rule]:
    """The rules for a framework on an accelerator (cluster.accelerator; none without one)."""
    fam = family(accelerator)
    return [r for r in RULES if fam and r.framework == framework and fam in r.families]

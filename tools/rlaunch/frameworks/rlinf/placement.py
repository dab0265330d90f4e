"""RLinf's component placement: resource ranks, who sits on which GPU, and seed 003's default shape.

Placement keys with commas ("actor,rollout: 0-3") are RLinf's way of saying "collocated on purpose".
Pure: no RLinf import; the topology rules (adapter.check) and postflight read it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rlaunch.errors import ConfigError
from rlaunch.config.topology import total_gpus

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def parse_ranks(key: str, value: Any) -> list[int]:
    """RLinf resource ranks: 3, '2-3', '0-1,4', 'all' -> a sorted list."""
    text = str(value).strip()
    ranks: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ConfigError(key, value, "resource ranks like 0, 2-3 or 0-1,4")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ConfigError(key, value, f"a range low-high with low <= high (got {lo}-{hi})")
        ranks.extend(range(lo, hi + 1))
    return sorted(set(ranks))


# A component that shares GPUs by design: the reward worker is light and sits with the others.
SHARES = {"reward"}


def placement(spec: Spec, placement_map: dict[str, Any], prefix: str = "cluster.component_placement") -> None:
    """Every rank within nodes x GPUs; no two components on one GPU unless they are meant to share."""
    total = total_gpus(spec)
    owner: dict[int, str] = {}
    for comp, value in placement_map.items():
        key = f"{prefix}.{comp}"
        # 'all': every GPU of the cluster (RLinf's published configs, e.g. actor,rollout,reward: all)
        ranks = list(range(total)) if str(value).strip() == "all" else parse_ranks(key, value)
        bad = [r for r in ranks if r >= total]
        if bad:
            raise ConfigError(key, value, f"resource ranks 0-{total - 1} (cluster.nodes x "
                              f"cluster.gpus_per_node = {spec.cluster.nodes} x "
                              f"{spec.cluster.gpus_per_node} GPUs)")
        # "actor,rollout" as one key is RLinf's way of saying "collocated on purpose".
        members = {c.strip() for c in comp.split(",")}
        for r in ranks:
            other = owner.get(r)
            if other is None:
                owner[r] = comp
                continue
            if members <= SHARES or {c.strip() for c in other.split(",")} <= SHARES:
                continue
            raise ConfigError(key, value, f"ranks not used by '{other}' (both on resource rank {r}); "
                              "to collocate on purpose, name them together, e.g. 'actor,rollout: 0-3'")


def default_placement(spec: Spec) -> dict[str, str]:
    """Seed 003's pipeline shape scaled to the cluster: rollout+reward, inference, then actor on half."""
    total = total_gpus(spec)
    if total < 4 or total % 4:
        raise ConfigError("cluster.gpus_per_node", spec.cluster.gpus_per_node,
                          "nodes x gpus_per_node a multiple of 4 for the default RLinf pipeline placement "
                          "(rollout+reward | inference | actor x 2), or set cluster.component_placement.* "
                          "in framework.overrides")
    q = total // 4

    def span(lo: int, n: int) -> str:
        return str(lo) if n == 1 else f"{lo}-{lo + n - 1}"

    return {"rollout": span(0, q), "inference": span(q, q), "actor": span(2 * q, 2 * q), "reward": span(0, q)}


def placement_ranks(placement: object) -> int | None:
    """How many ranks the actor gets in a resolved cluster.component_placement ("2-3" -> 2, "0-3,6" -> 5);
    None when the placement cannot be read (postflight then falls back on the cluster's shape)."""
    if not isinstance(placement, dict):
        return None
    for key, value in placement.items():
        if "actor" not in str(key).split(","):
            continue
        if isinstance(value, dict):
            value = value.get("placement")
        try:
            return len(parse_ranks("actor", value)) or None
        except ConfigError:
            return None
    return None

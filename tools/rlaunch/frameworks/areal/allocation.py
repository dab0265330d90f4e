"""AReaL's allocation strings (rollout.backend, actor.backend): 'sglang:d8', 'fsdp:d4p1t2'."""

from __future__ import annotations

import re

from rlaunch.errors import ConfigError


def allocation_gpus(key: str, value: str) -> int:
    """'sglang:d8' / 'fsdp:d4p1t2' -> GPUs it needs (the product of its parallel sizes)."""
    text = str(value).strip().strip("'\"")
    engine, sep, dims = text.partition(":")
    if not sep or not engine or not re.fullmatch(r"([dptce]\d+)+", dims):
        raise ConfigError(key, value, "engine:dims, e.g. sglang:d8 or fsdp:d4p1t1 (colons separate engine "
                          "and sizes)")
    gpus = 1
    for _letter, size in re.findall(r"([dptce])(\d+)", dims):
        if int(size) < 1:
            raise ConfigError(key, value, "parallel sizes >= 1")
        gpus *= int(size) if _letter in "dptc" else 1
    return gpus

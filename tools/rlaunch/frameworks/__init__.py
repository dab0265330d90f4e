"""Registry of framework adapters, by name."""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import ARTIFACTS, Framework

_MODULES = {"trl": "trl", "verl": "verl", "areal": "areal", "rlinf": "rlinf"}


def names() -> list[str]:
    """Every framework rlaunch has an adapter for (what framework.name may be)."""
    return list(_MODULES)


def get(name: str) -> Framework:
    if name not in _MODULES:
        raise ConfigError("framework.name", name, "one of " + ", ".join(_MODULES))
    module = importlib.import_module(f".{_MODULES[name]}", __name__)
    return module.ADAPTER


def job_env(spec) -> dict[str, str]:
    """The job's non-secret environment, for the driver and every Ray process: the framework's own,
    then the run's NCCL settings."""
    env = {k: str(v) for k, v in get(spec["framework"]["name"]).env(spec).items()}
    env.update(spec["derived"]["nccl_env"])
    return env


__all__ = ["ARTIFACTS", "Framework", "get", "names"]

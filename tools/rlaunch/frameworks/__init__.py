"""Registry of framework adapters, by name."""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import ARTIFACTS, Framework

_MODULES = {"trl": "trl", "verl": "verl", "areal": "areal", "rlinf": "rlinf"}


def get(name: str) -> Framework:
    if name not in _MODULES:
        raise ConfigError("framework.name", name, "one of " + ", ".join(_MODULES))
    module = importlib.import_module(f".{_MODULES[name]}", __name__)
    return module.ADAPTER


__all__ = ["ARTIFACTS", "Framework", "get"]

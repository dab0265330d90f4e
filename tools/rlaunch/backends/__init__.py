"""Registry: infra name -> backend module. One module per infrastructure."""

from __future__ import annotations

import importlib

from rlaunch.errors import ConfigError
from rlaunch.backends.base import Backend

# Every cloud and SkyPilot's own Kubernetes go through the SkyPilot backend.
_MODULES = {
    "local": "local", "gcp": "skypilot", "aws": "skypilot", "azure": "skypilot", "k8s": "skypilot",
    "sky": "skypilot", "kuberay": "kuberay", "aistudio": "aistudio",
}


def get(infra: str) -> Backend:
    if infra not in _MODULES:
        raise ConfigError("infra.name", infra, "one of " + ", ".join(_MODULES))
    return importlib.import_module(f"rlaunch.backends.{_MODULES[infra]}.backend").BACKEND


__all__ = ["Backend", "get"]

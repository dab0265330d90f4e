"""The frameworks rlaunch launches, one package each (frameworks/<name>/), and the registry of them.

A package holds everything rlaunch knows about its framework: `__init__.py` the descriptor
(FRAMEWORK: its CPU rule, the modules its metrics need, its validator, its image), `adapter.py` the
adapter (entrypoint, rendered files, env, inputs on the shared storage, topology rules),
`postflight.py` where its run writes and the checks on it, and `loader.py` its own config loader
where it has one (run in its validator venv). Everything else asks this registry: the config's
framework.name, preflight's CPU rule, postflight, compare, the AIStudio run script's imports, the
KubeRay head, the image check, and the scripts (`python -m rlaunch frameworks ...`).

Adding a framework: its package here, configs/framework/<name>.yaml, and its pins in
configs/versions.yaml (frameworks.<name>, images.<name>). Nothing else.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

from rlaunch.errors import ConfigError
from rlaunch.frameworks import topology
from rlaunch.frameworks.base import ARTIFACTS, CpuRule, Descriptor, Framework, Images, Saves, StepSource, Validator

HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def _descriptors() -> dict[str, Descriptor]:
    found = {}
    for path in sorted(HERE.iterdir()):
        if (path / "__init__.py").is_file():
            descriptor = importlib.import_module(f".{path.name}", __name__).FRAMEWORK
            if descriptor.name != path.name:
                raise ImportError(f"frameworks/{path.name}: its FRAMEWORK is named {descriptor.name!r}")
            found[path.name] = descriptor
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def names() -> list[str]:
    """Every framework rlaunch has a package for (what framework.name may be), in listing order."""
    return list(_descriptors())


def descriptor(name: str) -> Descriptor:
    if name not in _descriptors():
        raise ConfigError("framework.name", name, "one of " + ", ".join(names()))
    return _descriptors()[name]


def get(name: str) -> Framework:
    """The framework's adapter."""
    return descriptor(name).adapter()


def check(spec) -> None:
    """The framework's topology rules (config.check's pass): the descriptor's CPU rule, then the
    adapter's own."""
    fw = descriptor(spec["framework"]["name"])
    if fw.cpu_rule is not None:
        topology.ray_cpus(spec, fw.cpu_rule, fw.name)
    fw.adapter().check(spec)


__all__ = ["ARTIFACTS", "CpuRule", "Descriptor", "Framework", "Images", "Saves", "StepSource", "Validator", "check",
           "descriptor", "get", "names"]

"""The infrastructures' registry: the INFRA= values each package under backends/ declares
(backends/<name>/__init__.py: INFRAS, a tuple of Infra), found on disk, and the backend loaded by name.

Everything that needs the list asks here: the INFRA knob and infra.name, `make runs`' families, the
SkyPilot clouds, the error messages; the workflows' INFRA options are held to it by a test. Standard
library only, and no backend module is imported until get() asks for it: the knobs run on a bare
python3.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlaunch.errors import ConfigError

# The packages this registry lists (and loads by name).
BACKENDS = Path(__file__).resolve().parents[1] / "backends"


@dataclass(frozen=True)
class Infra:
    """One INFRA= value, as the backend package that launches it declares it."""

    name: str
    order: int                   # where it is listed (INFRA's allowed values, `make runs`)
    cloud: str | None = None     # the SkyPilot family's cloud ("" any cloud: INFRA=sky); None off SkyPilot
    resume: bool = False         # RESUME=1 restarts a run in place
    spot: bool = False           # SPOT=1 applies (a preemptible run its infrastructure recovers)
    tensorboard: bool = False    # `make tensorboard` of a run not on this machine: served from its cluster
    ssh: bool = False            # `make ssh` / `make ray-status`
    # A run id that does not start with a letter gets this prefix as the cluster's name there (DNS
    # labels, SkyPilot names), cut to name_max characters (0: not cut).
    name_prefix: str = "r-"
    name_max: int = 0
    # CODE='s transport there carries at most this many bytes of the pack's tar.gz, with DATA='s when
    # it is on this machine (0: no limit; rlaunch.config.code.check_limit, datasource.check_carried).
    code_limit: int = 0
    code_via: str = ""           # what carries it, for the refusal's message
    code_fetch: bool = False     # a git CODE over code_limit is fetched on the cluster instead (config.code.by_fetch)
    backend: str = ""            # the package under backends/ (set by the registry)

    def cluster_name(self, run_id: str) -> str:
        """The run's cluster (or job) name here: the run id, which must start with a letter."""
        if run_id[:1].isalpha():
            return run_id
        name = f"{self.name_prefix}{run_id}"
        return name[:self.name_max] if self.name_max else name


@lru_cache(maxsize=1)
def _infras() -> dict[str, Infra]:
    found: list[Infra] = []
    for path in sorted(BACKENDS.iterdir()):
        if (path / "__init__.py").is_file():
            declared = importlib.import_module(f"rlaunch.backends.{path.name}").INFRAS
            found.extend(Infra(**{**vars(infra), "backend": path.name}) for infra in declared)
    return {infra.name: infra for infra in sorted(found, key=lambda i: (i.order, i.name))}


def names() -> list[str]:
    """Every INFRA= value (what infra.name may be), in listing order."""
    return list(_infras())


def infra(name: str) -> Infra:
    if name not in _infras():
        raise ConfigError("infra.name", name, "one of " + ", ".join(names()))
    return _infras()[name]


def families() -> dict[str, str]:
    """Each backend package -> the INFRA= value it is asked as (its first): `make runs` asks each once."""
    out: dict[str, str] = {}
    for item in _infras().values():
        out.setdefault(item.backend, item.name)
    return out


def sky_clouds() -> dict[str, str]:
    """The infrastructures SkyPilot launches -> their SkyPilot cloud ("" for any)."""
    return {item.name: item.cloud for item in _infras().values() if item.cloud is not None}


def get(name: str) -> Any:
    """The backend (rlaunch.backends.base.Backend) that launches INFRA=name. Any to the type checker:
    base sits below this registry, which imports nothing of rlaunch but errors (tests/unit/test_imports.py)."""
    return importlib.import_module(f"rlaunch.backends.{infra(name).backend}.backend").BACKEND


__all__ = ["Infra", "families", "get", "infra", "names", "sky_clouds"]

"""The frameworks' registry: one Descriptor per package under frameworks/ (frameworks/<name>/__init__.py
declares FRAMEWORK), found on disk, and the adapter loaded by name.

Everything that needs a framework asks here: the config's framework.name, preflight's CPU rule,
postflight, compare, the AIStudio run script's imports, the KubeRay head, the image check, and the
scripts (`python -m rlaunch frameworks ...`). Standard library only.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from rlaunch import ROOT
from rlaunch.errors import ConfigError

# The packages this registry lists (and loads by name).
FRAMEWORKS = Path(__file__).resolve().parents[1] / "frameworks"


@dataclass(frozen=True)
class CpuRule:
    """Ray CPUs the framework needs where it schedules: on the head, or on every node. The topology
    rules check cluster.cpus_per_node against it, preflight the live cluster, and a KubeRay CPU-only
    head advertises them (config.derive)."""

    where: str   # "head" or "every"
    count: int
    why: str

    @property
    def place(self) -> str:
        return "the head" if self.where == "head" else "every node"


@dataclass(frozen=True)
class Validator:
    """The framework's own config loader (<package>/loader.py), run at plan in .venv-<name>, which
    `make setup-validators` builds: the framework at its pin without its dependencies, plus `needs`
    (the packages its loader imports) at the versions the framework's own metadata gives."""

    needs: tuple[str, ...]


@dataclass(frozen=True)
class Images:
    """The framework's images: images.<name>.official in configs/versions.yaml, and the rlaunch
    image built on it from `dockerfile` (make image-build; its name derived by
    rlaunch.config.images.rlaunch_ref), checked by running `entrypoint_help` inside it (python ARGS that
    print the entrypoint's usage and exit 0; empty: not known)."""

    dockerfile: str = ""
    entrypoint_help: tuple[str, ...] = ()
    # The plan's image check (rlaunch.plan.imagecheck): the requirement resolved against the image
    # ({version}: the pin, {rollout}: rollout.backend; "" where none is: why_none says why; an image
    # entry's own `requirement` wins, as GB200's does), whether
    # the run installs it over the official image (SkyPilot's install step, docker/<name>), and
    # python.<package> pins the rlaunch image adds where the base lacks them.
    requirement: str = ""
    installs: bool = False
    adds: tuple[str, ...] = ()
    why_none: str = ""


@dataclass(frozen=True)
class StepSource:
    """Where the framework's own outputs record each step it finished, for the stall watch
    (rlaunch.job.stall). `path`: a location of its postflight layout in braces ({metrics}), or a glob
    built from them; kind: "jsonl" (one JSON object per step with an integer "step"), "log" (the
    first group of `pattern` on each matching line), "tfevents" (TensorBoard event files under the
    path: each event's step)."""

    kind: str
    path: str
    pattern: str = ""


@dataclass(frozen=True)
class Saves:
    """What one checkpoint of the framework holds, per trained parameter summed over its ranks, for
    the storage check (rlaunch.config.ckptsize): the weights at `weights_bytes` (the precision of its
    master copy; `weights_key`, an override that names another dtype), `optimizer_states` Adam states
    at `optimizer_bytes` each; a critic (PPO) saved as well when `critic`. `keep`: how many it keeps
    (0: every one; `keep_key`, an override that says otherwise); `once_bytes` per parameter:
    what it writes once besides them (a final export, a recover checkpoint overwritten in place)."""

    weights_bytes: int = 4
    weights_key: str = ""
    optimizer_states: int = 2
    optimizer_bytes: int = 4
    critic: bool = False
    keep: int = 0
    keep_key: str = ""
    once_bytes: int = 0
    how: str = ""


@dataclass(frozen=True)
class Descriptor:
    """Everything rlaunch asks of a framework, in one place (frameworks/<name>/__init__.py)."""

    name: str
    summary: str
    order: int = 100                       # where it is listed (errors, help): the rehearsal first
    cpu_rule: CpuRule | None = None
    # What the job's own steps (accel, preflight, postflight) import beyond the standard library and
    # rlaunch for this framework: a run script that cannot count on rlaunch's image (AIStudio's)
    # refuses an image whose Python lacks one, and asks for nothing else (rlaunch.verify.job_modules;
    # tests/unit/test_job_modules.py runs the steps with every other import blocked).
    step_modules: tuple[str, ...] = ("ray",)
    validator: Validator | None = None
    images: Images = field(default_factory=Images)
    # True: it calls wandb.init without an id, so every attempt logs into one W&B run only when the
    # job's env carries WANDB_RUN_ID and WANDB_RESUME (rlaunch.plan.tracking).
    wandb_id_from_env: bool = False
    # Where each step it finished shows (the stall watch); None: not watched for stalls.
    steps: StepSource | None = None
    # What its checkpoints hold (the storage check before the run); None: not estimated.
    saves: Saves | None = None
    # The values it runs for a key of rlaunch's whose values are the framework's own (algo.adv_estimator:
    # verl's registered estimators), generated from its registry at the pin; a key it leaves out: any
    # framework's.
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def module(self, part: str) -> ModuleType:
        return importlib.import_module(f"rlaunch.frameworks.{self.name}.{part}")

    def adapter(self) -> Any:
        """<package>/adapter.py's ADAPTER (rlaunch.frameworks.base.Framework: Any here, below it)."""
        return self.module("adapter").ADAPTER

    @property
    def postflight(self) -> ModuleType:
        """<package>/postflight.py: layout(spec, run_dir) (where the run writes, the keys of
        --path), checks(spec, run_dir, where, facts) (postflight's checks of it) and
        rewards(where, run_dir) (the (step, reward) pairs compare draws) and, optionally,
        smoke(spec, run_dir) (SMOKE=1's numbers, rlaunch.verify.smoke)."""
        return self.module("postflight")

    @property
    def memory(self) -> ModuleType | None:
        """<package>/memory.py, where the framework has plan's memory bound: phases(spec, counts)
        (rlaunch.plan.memory's phases of a step), OFFLOAD (the bound counts train.offload)."""
        if not (FRAMEWORKS / self.name / "memory.py").is_file():
            return None
        return self.module("memory")



@lru_cache(maxsize=1)
def _descriptors() -> dict[str, Descriptor]:
    found = {}
    for path in sorted(FRAMEWORKS.iterdir()):
        if (path / "__init__.py").is_file():
            descriptor = importlib.import_module(f"rlaunch.frameworks.{path.name}").FRAMEWORK
            if descriptor.name != path.name:
                raise ImportError(f"frameworks/{path.name}: its FRAMEWORK is named {descriptor.name!r}")
            found[path.name] = descriptor
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def venv_python(framework: str) -> Path:
    """The Python of a framework's pinned validator environment (`make setup-validators`: .venv-<name>,
    or under RLAUNCH_VALIDATORS), where its own loaders check what rlaunch renders."""
    base = Path(os.environ.get("RLAUNCH_VALIDATORS") or ROOT)
    # Resolve a symlinked venv dir (not the python link inside it): AReaL turns the config path into
    # one relative to its own package, which breaks across a symlink.
    return (base / f".venv-{framework}").resolve() / "bin" / "python"


def names() -> list[str]:
    """Every framework rlaunch has a package for (what framework.name may be), in listing order."""
    return list(_descriptors())


def values(key: str) -> tuple[str, ...]:
    """What the frameworks declare `key` may be (Descriptor.values), every framework's, in listing order."""
    return tuple(dict.fromkeys(v for d in _descriptors().values() for v in d.values.get(key, ())))


def descriptor(name: str) -> Descriptor:
    if name not in _descriptors():
        raise ConfigError("framework.name", name, "one of " + ", ".join(names()))
    return _descriptors()[name]


def get(name: str) -> Any:
    """The framework's adapter (rlaunch.frameworks.base.Framework; Any to the type checker: the adapters
    sit above this registry, which imports nothing of theirs)."""
    return descriptor(name).adapter()


__all__ = ["CpuRule", "Descriptor", "Images", "Validator", "descriptor", "get", "names", "values"]

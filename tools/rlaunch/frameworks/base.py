"""What a framework package provides: one descriptor (what the rest of rlaunch asks of it) and one
adapter (the spec in, the exact entrypoint and files out)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from rlaunch.frameworks import loaders

# Rendered job scripts export this as the directory that holds spec.json and the files below, so
# commands can point at them wherever the backend put them ("${RLAUNCH_ARTIFACTS}/rlinf.yaml").
ARTIFACTS = "${RLAUNCH_ARTIFACTS}"
HERE = Path(__file__).resolve().parent


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

    def module(self, part: str) -> ModuleType:
        return importlib.import_module(f"rlaunch.frameworks.{self.name}.{part}")

    def adapter(self) -> "Framework":
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
        if not (HERE / self.name / "memory.py").is_file():
            return None
        return self.module("memory")

    @property
    def loader(self) -> Path | None:
        """<package>/loader.py, run by frameworks/loader_main.py in the validator venv."""
        return loaders.script(self.name) if self.validator else None


class Framework:
    """One RL framework's adapter. Methods are pure: they read the spec and return text or raise ConfigError."""

    # framework.overrides keys that rlaunch owns: mapped onto its keys or refused (rlaunch.config.overrides).
    owned: dict = {}
    name = ""
    # True: the framework reads the dataset's hub snapshot as is (rlaunch.config.inputs lays it out so).
    dataset_snapshot = False

    def command(self, spec) -> list[str]:
        """argv of the training entrypoint, run once on the Ray head (the driver)."""
        raise NotImplementedError

    def files(self, spec) -> dict[str, str]:
        """Extra files to render next to spec.json: relative path -> text."""
        return {}

    def env(self, spec) -> dict[str, str]:
        """The framework's own non-secret environment for the job (logger paths, ...); the run's NCCL
        settings (spec.derived.nccl_env) come after it in rlaunch.plan.jobenv."""
        return {}

    def pythonpath(self, spec) -> list[str]:
        """Directories the job's Python imports from beyond its site-packages (the image's, e.g.
        RLinf's /opt/Megatron-LM): on PYTHONPATH after the framework's checkout, before anything else."""
        return []

    def setup(self, spec) -> list[str]:
        """Idempotent shell lines that prepare data on the shared mount."""
        return []

    # REHEARSE=1 (rlaunch.config.rehearse): a framework that rehearses on CPU answers these.
    def rehearsal_lines(self, spec) -> list[str]:
        """The plan's rehearsal section: every rewrite with why, and what the rehearsal cannot show."""
        return []

    def rehearsal_check(self, spec) -> list[str]:
        """Checks of the user's code run before any node starts (plan lines); raise CheckError."""
        return []

    def rehearsal_python(self) -> Path | None:
        """The Python every node and the entrypoint run on a rehearsal (its own venv)."""
        return None

    def inputs(self, spec) -> list[str]:
        """Files that must already be on shared storage; preflight checks them on every node."""
        return []

    def checkout(self, spec) -> str:
        """The framework's pinned git checkout on the shared storage, when its entrypoint lives in one
        (RLinf); "" when it comes installed."""
        return ""

    def check(self, spec) -> None:
        """rlaunch's own topology rules; raise ConfigError naming the key."""

    def loader_request(self, spec) -> dict | None:
        """What the framework's own loader (<package>/loader.py) is asked to load; None: no loader."""
        return None

    def loader_check(self, spec, files: dict[str, str]) -> str:
        """Run the framework's own config loader; return a one-line result."""
        request = self.loader_request(spec)
        if request is None:
            return "no loader for this framework"
        return loaders.result_line(self.name, loaders.run(self.name, [request])[0])

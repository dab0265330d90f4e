"""The backend interface: one per infrastructure, the same small verbs for all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import backends
from rlaunch.config.load import NEEDED_SECRETS
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.plan import artifacts

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


@dataclass(frozen=True)
class Run:
    """One run as an infrastructure reports it: what `make runs` prints, what down/status act on."""

    run_id: str
    infra: str                  # the INFRA= value it runs on (gcp, aws, k8s, kuberay, local, ...)
    state: str                  # the infrastructure's own word (UP, RUNNING, SUCCEEDED, up, ...)
    where: str                  # what it is there, in the infrastructure's terms ("sky cluster exp-7")
    nodes: int | None = None
    gpus_per_node: int | None = None
    accelerator: str = ""
    created: float | None = None  # epoch seconds
    kind: str = ""              # the backend's own sort of thing ("cluster", "managed-job", ...)
    active: bool = True         # False once finished: nothing left to tear down

    def shape(self) -> str:
        """nodes x GPUs, as `make runs` prints it: "2x H100:1", "2x CPU", "-" when unknown."""
        if self.nodes is None:
            return "-"
        if self.gpus_per_node is None:
            return f"{self.nodes}x ?"
        if not self.gpus_per_node:
            return f"{self.nodes}x CPU"
        return f"{self.nodes}x {self.accelerator or 'GPU'}:{self.gpus_per_node}"


@dataclass(frozen=True)
class Answer:
    """What an infrastructure said: the runs it knows, and what was asked (a command to rerun)."""

    asked: str
    runs: tuple[Run, ...] = ()
    note: str = ""              # what the answer leaves out, for the user to look at


@dataclass(frozen=True)
class LaunchPlan:
    """What `make plan` decided, and all that `launch` acts on: the spec, every rendered file (the
    very texts written to `out`), the offline checks that passed and the steps launch will run.
    Launch never renders again."""

    spec: Spec
    out: Path
    files: dict[str, str]
    checks: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    # Epoch seconds: the command's start and the plan's end (rlaunch.job.phases' "plan" phase).
    started: float = 0.0
    planned: float = 0.0

    PLAN_TXT = "plan.txt"  # what `make plan` printed, beside the artifacts it describes

    @property
    def rendered(self) -> dict[str, str]:
        """The rendered files alone (what a backend ships to the cluster), without plan.txt."""
        return {rel: text for rel, text in self.files.items() if rel != self.PLAN_TXT}

    @classmethod
    def render(cls, spec: Spec, out: Path | None = None) -> "LaunchPlan":
        """The plan of `spec` without its checks (render only): what tests and `make render` hold."""
        backend = backends.get(spec.infra.name)
        files = artifacts.finish(spec, backend.render(spec))
        return cls(spec, Path(out or spec.run.out), files)


class Backend:
    """Render is pure and offline; launch/status/logs/down/dashboard act and return an exit code.

    status/logs/down/dashboard get `out`, the launch's artifacts on this machine, or None when the
    run is known only by its id (launched elsewhere, or build/ removed): then they ask the
    infrastructure (find) what exists of the run. An infrastructure that cannot be asked raises
    MissingPrerequisite (exit 3); "nothing to do" comes only from its answer.
    """

    name = ""
    # What restarts a run on this infrastructure, for RESUME=1 where the launch cannot do it.
    resume_hint = "a run here is started again by its infrastructure, not by RESUME=1"

    @contextlib.contextmanager
    def claim(self, spec: Spec, resume: bool = False) -> Iterator[None]:
        """Held for the whole launch, before anything is rendered or written: refuses a run id
        this launch must not (re)use. Here: nothing to hold, and RESUME=1 is the local launch's."""
        if resume:
            where = ", ".join(n for n in backends.names() if backends.infra(n).resume)
            raise ConfigError("RESUME", "1", f"INFRA={where} only; on {spec.infra.name}, {self.resume_hint}")
        yield

    # Where a launch's secrets come from: this shell's environment, sent by name to the nodes (False:
    # the user types them into the infrastructure's own form).
    secrets_from_env = True

    def require_secrets(self, spec: Spec) -> None:
        """Before anything is created: every name in spec.secrets is set here (exit 3 naming it)."""
        missing = [name for name in spec.secrets if not os.environ.get(name)] if self.secrets_from_env else []
        if missing:
            why = {name: f"{key}=true" for key, name in NEEDED_SECRETS}
            because = [f"{why[name]} needs {name}" for name in missing if name in why]
            raise MissingPrerequisite(
                f"{', '.join(missing)} in your environment",
                f"export {missing[0]}=... and launch again ({'; '.join(because) or 'secrets names it'}; "
                "it travels by name to the nodes, never written)")

    def rules(self, spec: Spec) -> None:
        """What this infrastructure refuses in a spec, as one ConfigError naming the key; part of
        config.check's one pass, so render can rely on it."""

    def render(self, spec: Spec) -> dict[str, str]:
        """Every artifact of a launch: relative path -> text (headers added by the caller)."""
        raise NotImplementedError

    def check(self, spec: Spec, artifacts: dict[str, str]) -> list[str]:
        """Offline validation by the owning tool's parser; raise CheckError. Returns lines passed."""
        return []

    def plan(self, spec: Spec, artifacts: dict[str, str]) -> list[str]:
        """Human lines: what `launch` would run, in order."""
        return []

    def launch(self, plan: LaunchPlan) -> int:
        """Act on the plan (plan.files are on disk in plan.out): form, submit, follow."""
        raise NotImplementedError

    def status(self, spec: Spec, out: Path | None) -> int:
        raise NotImplementedError

    def logs(self, spec: Spec, out: Path | None) -> int:
        raise NotImplementedError

    def down(self, spec: Spec, out: Path | None) -> int:
        raise NotImplementedError

    def dashboard(self, spec: Spec, out: Path | None, port: int | None = None) -> int:
        """Make the Ray dashboard openable from this machine (port: the local one, None = default)."""
        print(f"{self.name}: no dashboard command for this infrastructure")
        return 0

    def runs(self, spec: Spec) -> Answer:
        """Every rlaunch run this infrastructure knows, asked once. `spec` carries the settings of
        where to ask (namespace, WORK_ROOT, ...); its run id is ignored."""
        raise NotImplementedError

    def find(self, spec: Spec) -> Answer:
        """What exists of run spec.run.id here (no runs: the infrastructure answered none)."""
        answer = self.runs(spec)
        return Answer(answer.asked, tuple(r for r in answer.runs if r.run_id == spec.run.id))

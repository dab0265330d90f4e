"""The backend interface: one per infrastructure, the same small verbs for all."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rlaunch.config.load import NEEDED_SECRETS
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.plan import artifacts
from rlaunch.registry import backends

if TYPE_CHECKING:
    from rlaunch.config.spec import Config, Spec


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
class Place:
    """Where an infrastructure keeps rlaunch's runs: what its backend needs to ask it (`make runs`)."""

    infra: str              # the INFRA= value
    namespace: str = ""     # KubeRay: the runs' namespace
    storage: str = ""       # the shared storage's mount on the nodes (local, AIStudio: WORK_ROOT)
    storage_here: str = ""  # where this machine sees it, where that is elsewhere (AIStudio's install_root)


@dataclass(frozen=True)
class RunHandle:
    """What a launch makes and where: all that status, logs, down, dashboard and summary act on.

    Backend.handle(plan) makes it from the plan; it is written beside the artifacts as <out>/run.json
    by `make plan` and `make render` (what launching them makes) and by `make launch` before it acts;
    job.sh keeps a copy in the run directory's plan/, AIStudio's launch one beside its files on the
    shared storage. rlaunch.runs.lookup finds it again from the run id. A run known only by its id,
    with no handle on this machine, gets one from its infrastructure's rule (Backend.handle_of):
    what it is and where its run directory is are not known ("": the backend asks the
    infrastructure what exists)."""

    run_id: str
    place: Place
    name: str                       # its resources' name there: the cluster, managed job, RayJob
    kind: str = ""                  # its backend's sort of thing: cluster, managed-job, rayjob, launch
    run_dir: str = ""               # the run directory on the shared storage, as the nodes see it
    out: str = ""                   # the launch's artifacts on the launching machine
    framework: str = ""
    dashboard_port: int = 8265      # the Ray dashboard's and GCS's ports on the head
    ray_port: int = 6379
    wait_s: int = 600               # how long its cluster may take to form (cluster.formation_timeout_s)
    nodes: int | None = None
    gpus_per_node: int | None = None
    accelerator: str = ""

    FILE: ClassVar[str] = "run.json"

    def json_text(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    def write(self, directory: Path) -> Path:
        path = Path(directory) / self.FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.json_text(), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> RunHandle:
        """A run.json; one this rlaunch cannot read is a ConfigError naming the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**{**data, "place": Place(**data["place"])})
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(cls.FILE, str(path), f"a {cls.FILE} this rlaunch reads ({err}); name the run with "
                              "INFRA= and RUN_ID= to ask its infrastructure") from None


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
    """Render is pure and offline; launch acts on the plan; status/logs/down/dashboard act on the
    run's handle (RunHandle) and return an exit code.

    A handle whose kind is not known ("") is a run known only by its id (launched elsewhere, or
    build/ removed): the verbs then ask the infrastructure (find) what exists of it. An
    infrastructure that cannot be asked raises MissingPrerequisite (exit 3); "nothing to do" comes
    only from its answer.
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

    def inputs_now(self, spec: Spec, artifacts: dict[str, str]) -> list[str]:
        """`make plan`'s word on whether the inputs are already prepared, one line per input ("model:
        prepared ..." / "model: not prepared: why: what launch does"), or where that is decided. A
        read-only look of a few seconds at most: never writes, never refuses (a doubt is a line).
        Not part of render (it asks the outside world): the CLI asks it as it prints the plan."""
        return []

    # --- the handle: what a launch makes, and a run known by its id alone ----------------------

    def place(self, spec: Config) -> Place:
        """Where this infrastructure keeps the spec's runs."""
        return Place(spec.infra.name, storage=spec.storage.mount)

    def kind(self, spec: Spec) -> str:
        """The sort of thing a launch of `spec` makes here."""
        return "cluster"

    def handle(self, plan: LaunchPlan) -> RunHandle:
        """What launching `plan` makes, and where: the record the verbs act on."""
        spec, c = plan.spec, plan.spec.cluster
        return RunHandle(run_id=spec.run.id, place=self.place(spec),
                         name=self.resource_name(spec.infra.name, spec.run.id),
                         kind=self.kind(spec), run_dir=spec.paths.run_dir, out=str(plan.out),
                         framework=spec.framework.name, dashboard_port=c.dashboard_port, ray_port=c.ray_port,
                         wait_s=c.formation_timeout_s, nodes=c.nodes, gpus_per_node=c.gpus_per_node,
                         accelerator=c.accelerator)

    def resource_name(self, infra: str, run_id: str) -> str:
        """The run's resources' name on INFRA=infra: its run id, by that infrastructure's rule."""
        return backends.infra(infra).cluster_name(run_id)

    def handle_of(self, run_id: str, place: Place, **defaults: Any) -> RunHandle:
        """A run known by its id alone (no handle on this machine): what its name is here; what it
        is and where its run directory is, the infrastructure answers (kind "")."""
        return RunHandle(run_id=run_id, place=place, name=self.resource_name(place.infra, run_id), **defaults)

    # --- acting on a run ------------------------------------------------------------------------

    def launch(self, plan: LaunchPlan) -> int:
        """Act on the plan (plan.files are on disk in plan.out): form, submit, follow."""
        raise NotImplementedError

    def status(self, run: RunHandle) -> int:
        raise NotImplementedError

    def logs(self, run: RunHandle) -> int:
        raise NotImplementedError

    def down(self, run: RunHandle) -> int:
        raise NotImplementedError

    def dashboard(self, run: RunHandle, port: int | None = None) -> int:
        """Make the Ray dashboard openable from this machine (port: the local one, None = default)."""
        print(f"{self.name}: no dashboard command for this infrastructure")
        return 0

    def runs(self, place: Place) -> Answer:
        """Every rlaunch run this infrastructure knows at `place`, asked once."""
        raise NotImplementedError

    def find(self, run: RunHandle) -> Answer:
        """What exists of the run here (no runs: the infrastructure answered none)."""
        answer = self.runs(run.place)
        return Answer(answer.asked, tuple(r for r in answer.runs if r.run_id == run.run_id))

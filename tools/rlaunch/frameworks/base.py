"""The framework adapter's interface: the spec in, the exact entrypoint and files out. Each framework
package's adapter.py implements it; its descriptor (what the registry knows of it) is
rlaunch.frameworks.Descriptor."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.validate import imports, loaders

if TYPE_CHECKING:  # the adapters also run on the nodes, whose Python has no pydantic
    from rlaunch.config.overrides import Owned
    from rlaunch.config.spec import Spec

# Rendered job scripts export this as the directory that holds spec.json and the files below, so
# commands can point at them wherever the backend put them ("${RLAUNCH_ARTIFACTS}/rlinf.yaml").
ARTIFACTS = "${RLAUNCH_ARTIFACTS}"


class Framework:
    """One RL framework's adapter. Methods are pure: they read the spec and return text or raise ConfigError."""

    # framework.overrides keys that rlaunch owns: mapped onto its keys or refused (rlaunch.config.overrides).
    owned: dict[str, Owned] = {}
    name = ""
    # True: the framework reads the dataset's hub snapshot as is (rlaunch.config.inputs lays it out so).
    dataset_snapshot = False

    def command(self, spec: Spec) -> list[str]:
        """argv of the training entrypoint, run once on the Ray head (the driver)."""
        raise NotImplementedError

    def files(self, spec: Spec) -> dict[str, str]:
        """Extra files to render next to spec.json: relative path -> text."""
        return {}

    def env(self, spec: Spec) -> dict[str, str]:
        """The framework's own non-secret environment for the job (logger paths, ...); the run's NCCL
        settings (spec.derived.nccl_env) come after it in rlaunch.plan.jobenv."""
        return {}

    def pythonpath(self, spec: Spec) -> list[str]:
        """Directories the job's Python imports from beyond its site-packages (the image's, e.g.
        RLinf's /opt/Megatron-LM): on PYTHONPATH after the framework's checkout, before anything else."""
        return []

    def setup(self, spec: Spec) -> list[str]:
        """Idempotent shell lines that prepare data on the shared mount."""
        return []

    # REHEARSE=1 (rlaunch.config.rehearse): a framework that rehearses on CPU answers these.
    def rehearsal_lines(self, spec: Spec) -> list[str]:
        """The plan's rehearsal section: every rewrite with why, and what the rehearsal cannot show."""
        return []

    def rehearsal_check(self, spec: Spec) -> list[str]:
        """Checks of the user's code run before any node starts (plan lines); raise CheckError."""
        return []

    def import_check(self, spec: Spec) -> list[str]:
        """What the workers import of the user's code (CODE, CMD's entry), imported in the framework's
        pinned environment before any node starts (rlaunch.validate.imports); ConfigError naming the
        argument when one does not import. Here: CODE that is a framework's checkout, said with its version."""
        return imports.checkout_lines(spec)

    def data_check(self, spec: Spec) -> list[str]:
        """DATA='s rows checked at plan time (plan lines; ConfigError when one fails)."""
        if not spec.pins.source:
            return []
        return [f"WARNING data: rows not checked at plan time for {spec.framework.name} yet (verl's are)"]

    def rehearsal_python(self) -> Path | None:
        """The Python every node and the entrypoint run on a rehearsal (its own venv)."""
        return None

    def inputs(self, spec: Spec) -> list[str]:
        """Files that must already be on shared storage; preflight checks them on every node."""
        return []

    def own_inputs(self, spec: Spec) -> bool:
        """True when the user's program names its own model and data (AReaL's and RLinf's CMD=, whose
        config says them): rlaunch prepares neither on the shared storage."""
        return False

    def checkout(self, spec: Spec) -> str:
        """The framework's pinned git checkout on the shared storage, when its entrypoint lives in one
        (RLinf); "" when it comes installed."""
        return ""

    def check(self, spec: Spec) -> None:
        """rlaunch's own topology rules; raise ConfigError naming the key."""

    def loader_request(self, spec: Spec) -> dict[str, Any] | None:
        """What the framework's own loader (<package>/loader.py) is asked to load; None: no loader."""
        return None

    def loader_check(self, spec: Spec, files: dict[str, str]) -> str:
        """Run the framework's own config loader; return a one-line result."""
        request = self.loader_request(spec)
        if request is None:
            return "no loader for this framework"
        return loaders.result_line(self.name, loaders.run(self.name, [request], spec.run.id)[0])

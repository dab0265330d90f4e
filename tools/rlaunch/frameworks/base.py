"""The framework adapter interface: the spec in, the exact entrypoint and files out."""

from __future__ import annotations

# Rendered job scripts export this as the directory that holds spec.json and the files below, so
# commands can point at them wherever the backend put them ("${RLAUNCH_ARTIFACTS}/rlinf.yaml").
ARTIFACTS = "${RLAUNCH_ARTIFACTS}"


class Framework:
    """One RL framework. Methods are pure: they read the spec and return text or raise ConfigError."""

    name = ""
    # Arguments to python that print the entrypoint's usage and exit 0 without training: the image
    # check (rlaunch.verify.image) runs them inside a built image. Empty: not known yet.
    entrypoint_help: tuple[str, ...] = ()
    # True: the framework reads the dataset's hub snapshot as is (rlaunch.inputs lays it out so).
    dataset_snapshot = False

    def command(self, spec: dict) -> list[str]:
        """argv of the training entrypoint, run once on the Ray head (the driver)."""
        raise NotImplementedError

    def files(self, spec: dict) -> dict[str, str]:
        """Extra files to render next to spec.json: relative path -> text."""
        return {}

    def env(self, spec: dict) -> dict[str, str]:
        """The framework's own non-secret environment for the job (logger paths, ...); the run's NCCL
        settings (spec.derived.nccl_env) come with it in frameworks.job_env."""
        return {}

    def pythonpath(self, spec: dict) -> list[str]:
        """Directories the job's Python imports from beyond its site-packages (the image's, e.g.
        RLinf's /opt/Megatron-LM): on PYTHONPATH after the framework's checkout, before anything else."""
        return []

    def install(self, spec: dict) -> list[str]:
        """Idempotent shell lines run on EVERY node before Ray starts, when the image lacks the
        framework at its pinned version (SkyPilot nodes on an upstream image)."""
        return []

    def setup(self, spec: dict) -> list[str]:
        """Idempotent shell lines that prepare data on the shared mount."""
        return []

    def inputs(self, spec: dict) -> list[str]:
        """Files that must already be on shared storage; preflight checks them on every node."""
        return []

    def check(self, spec: dict) -> None:
        """rlaunch's own topology rules; raise ConfigError naming the key."""

    def loader_check(self, spec: dict, files: dict[str, str]) -> str:
        """Run the framework's own config loader; return a one-line result."""
        return "no loader for this framework"

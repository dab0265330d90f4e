"""Where a run's outputs are, relative to one run directory: what every framework shares (its logs,
the fatal markers in them) and each framework's own layout (frameworks/<name>/postflight.py `layout`).

Every location derives from the run directory given to postflight, so `make verify RUN_DIR=...`
also works on a copy of a run (downloaded from a bucket). An adapter that puts something elsewhere
passes it explicitly: `postflight --path KEY=VALUE` (the keys are the framework's layout).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rlaunch.errors import UsageError
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# Lines that mean a run failed, whatever its exit code says; name -> substring.
FATAL_MARKERS = {
    "python traceback": "Traceback (most recent call last)",
    "CUDA out of memory": "CUDA out of memory",
    "Ray task error": "RayTaskError",
    "Ray actor died": "ActorDiedError",
    "Ray actor unavailable": "ActorUnavailableError",
    "NCCL error": "NCCL error",
    "Hydra job error": "Error executing job with overrides",
    "storage full": "No space left on device",
}
# Log files: everything under these (relative to the run directory), plus *.log directly in it.
LOG_DIRS = ("logs", "log", "worker_logs")
LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ""}


def relocate(spec: Spec, key: str, run_dir: Path, default: str) -> Path:
    """spec.paths[key] moved with the run directory: a path under the spec's run_dir moves with it,
    one outside stays put, none is run_dir/default."""
    spec_path, spec_run_dir = str(getattr(spec.paths, key, "")), spec.paths.run_dir
    if not spec_path:
        return Path(run_dir) / default
    if spec_run_dir and (spec_path == spec_run_dir or spec_path.startswith(spec_run_dir.rstrip("/") + "/")):
        return Path(run_dir) / spec_path[len(spec_run_dir.rstrip("/")) + 1:]
    return Path(spec_path)


def defaults(spec: Spec, run_dir: Path) -> dict[str, Path | str]:
    """Every location postflight reads for this spec's framework, keyed as --path accepts them."""
    out: dict[str, Path | str] = {"log_dir": relocate(spec, "log_dir", Path(run_dir), "logs")}
    out.update(frameworks.descriptor(spec.framework.name).postflight.layout(spec, Path(run_dir)))
    return out


def resolve(spec: Spec, run_dir: Path, overrides: dict[str, str] | None = None) -> dict[str, Path | str]:
    """defaults() with --path KEY=VALUE applied; an unknown key is a usage error naming the keys."""
    out = defaults(spec, run_dir)
    for key, value in (overrides or {}).items():
        if key not in out:
            raise UsageError(f"--path {key}={value}: unknown key for framework "
                             f"{spec.framework.name}; allowed: {', '.join(sorted(out))}")
        out[key] = value if isinstance(out[key], str) else Path(value)
    return out


def log_files(run_dir: Path, extra_dirs: Iterable[Path] = ()) -> list[Path]:
    """The text logs of a run: files under logs/, log/, worker_logs/ (and extra_dirs), *.log on top."""
    run_dir = Path(run_dir)
    roots = [run_dir / d for d in LOG_DIRS] + [Path(d) for d in extra_dirs]
    found = {p for p in run_dir.glob("*.log") if p.is_file()}
    for root in roots:
        if root.is_dir():
            found.update(p for p in root.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES)
    return sorted(found)


def parse_path_args(items: list[str]) -> dict[str, str]:
    """--path KEY=VALUE, repeated or comma-joined (KEY=VALUE,KEY=VALUE) for callers that cannot repeat."""
    out = {}
    for item in (part for arg in items for part in arg.split(",") if part):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--path {item}: expected KEY=VALUE, e.g. ckpt_dir=/storage/ckpt")
        out[key] = value
    return out

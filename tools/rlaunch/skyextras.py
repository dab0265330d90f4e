"""SkyPilot's cloud extras: which clouds' clients an environment has, and the install on first use.

`make setup` installs skypilot[gcp,aws,kubernetes] (requirements.txt): each adds 40-200 MB and a few
seconds. The azure extra is left for its first use: azure-cli and the Azure SDKs add ~1.1 GB and
~85 s (measured on 2 cores), which users of the other clouds should not pay. The first `make launch`
to Azure installs it into the launcher's venv, says so, and only then runs `sky check`. Versions come
from configs/versions.yaml (the same constraints as scripts/setup).

CLI:
    python -m rlaunch.skyextras missing [EXTRA...]   the unmet requirements of each (default: all)
    python -m rlaunch.skyextras install EXTRA...     install them into this Python's environment
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib import metadata

from . import pins
from .errors import MissingPrerequisite

# The extra of each cloud rlaunch launches to (as `sky check` names the cloud, lower case).
EXTRAS = {"gcp": "gcp", "aws": "aws", "azure": "azure", "kubernetes": "kubernetes"}
# The ones `make setup` leaves to their first use, with what that use costs.
ON_FIRST_USE = {"azure": "about 1.1 GB and 1.5 minutes, once"}


def missing(extra: str) -> list[str]:
    """The requirements skypilot[extra] adds that this environment does not satisfy (pip's spelling)."""
    from packaging.requirements import Requirement  # a dependency of skypilot itself

    unmet = []
    for text in metadata.requires("skypilot") or []:
        req = Requirement(text)
        # Only what the extra adds: its marker holds with the extra and not without it.
        if req.marker is None or not req.marker.evaluate({"extra": extra}) or req.marker.evaluate({"extra": ""}):
            continue
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(str(req).split(";")[0].strip())
            continue
        if not req.specifier.contains(installed, prereleases=True):
            unmet.append(f"{str(req).split(';')[0].strip()} (have {installed})")
    return unmet


def install_argv(extra: str, constraints: str, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "-c", constraints,
            f"skypilot[{extra}]"]


def install(extra: str, python: str = sys.executable) -> None:
    """pip install skypilot[extra] under the pins of configs/versions.yaml; raise if still unmet."""
    with tempfile.NamedTemporaryFile("w", prefix="rlaunch-constraints-", suffix=".txt") as fh:
        fh.write(pins.constraints())
        fh.flush()
        proc = subprocess.run(install_argv(extra, fh.name, python), check=False)
    left = missing(extra)
    if proc.returncode or left:
        raise MissingPrerequisite(
            f"SkyPilot's {extra} extra ({', '.join(left) or 'pip failed'})",
            f"pip install -c build/constraints.txt 'skypilot[{extra}]' into {sys.prefix} failed (exit "
            f"{proc.returncode}); run it yourself to see why, then `make launch` again")


def ensure(cloud: str) -> bool:
    """Install the cloud's extra where setup left it to first use; True if it installed something."""
    extra = EXTRAS.get(cloud)
    if not extra:
        return False
    unmet = missing(extra)
    if not unmet:
        return False
    if extra not in ON_FIRST_USE:
        raise MissingPrerequisite(f"SkyPilot's {extra} extra ({', '.join(unmet)})",
                                  "run `make setup` (it installs skypilot[gcp,aws,kubernetes])")
    print(f"skypilot: first use of {cloud}: installing SkyPilot's {extra} extra into {sys.prefix} "
          f"({ON_FIRST_USE[extra]}): pip install 'skypilot[{extra}]' with the pins of configs/versions.yaml",
          flush=True)
    install(extra)
    print(f"skypilot: the {extra} extra is installed", flush=True)
    return True


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("missing", "install") or (argv[0] == "install" and len(argv) < 2):
        print(__doc__.split("CLI:", 1)[1].rstrip(), file=sys.stderr)
        return 2
    names = argv[1:] or sorted(set(EXTRAS.values()))
    unknown = [n for n in names if n not in EXTRAS.values()]
    if unknown:
        print(f"skyextras: unknown extra {unknown[0]!r}; allowed: {', '.join(sorted(EXTRAS.values()))}",
              file=sys.stderr)
        return 2
    if argv[0] == "missing":
        unmet = {n: missing(n) for n in names}
        for name, reqs in unmet.items():
            print(f"{name}: {', '.join(reqs) if reqs else 'installed'}")
        return 1 if any(unmet.values()) else 0
    try:
        for name in names:
            if missing(name):
                install(name)
    except MissingPrerequisite as err:
        print(f"skyextras: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

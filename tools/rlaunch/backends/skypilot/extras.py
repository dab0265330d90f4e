"""SkyPilot's cloud extras: which clouds' clients an environment has, and the install on first use.

`make setup` installs skypilot[gcp,aws,kubernetes] (requirements.txt): each adds 40-200 MB and a few
seconds. The azure extra is left for its first use: azure-cli and the Azure SDKs add ~1.1 GB and
~85 s (measured on 2 cores), which users of the other clouds should not pay. The first `make launch`
to Azure installs it into the launcher's venv, says so, and only then runs `sky check`. Versions come
from its lock (locks.skypilot-azure in configs/versions.yaml): the launcher's lock is resolved under
it, so the install adds packages and moves none of the launcher's; `pip check` runs after it, and
should it fail, the venv goes back to exactly the launcher's lock.

CLI:
    python -m rlaunch.backends.skypilot.extras missing [EXTRA...]   the unmet requirements of each (default: all)
    python -m rlaunch.backends.skypilot.extras install EXTRA...     install them into this Python's environment
"""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from rlaunch import cmdline
from rlaunch.config import pins
from rlaunch.errors import MissingPrerequisite

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


def lock_path(name: str, python: str = sys.executable) -> Path:
    """The lock file locks.<name>: the committed one, or on another Python or platform than the
    locks' the one scripts/setup resolved for this machine under build/locks/."""
    versions = pins.load_versions()
    committed = pins.ROOT / pins.get_str(f"locks.{name}", versions)
    if python == sys.executable:
        here = "%d.%d %s %s" % (*sys.version_info[:2], sys.platform, platform.machine())
    else:
        here = subprocess.run([python, "-c", "import platform, sys; print('%d.%d %s %s' % "
                               "(*sys.version_info[:2], sys.platform, platform.machine()))"],
                              capture_output=True, text=True, check=False).stdout.strip()
    if here == f"{pins.get_str('locks.python', versions)} linux x86_64":
        return committed
    return pins.ROOT / "build" / "locks" / committed.name


def install_argv(lock: Path, python: str = sys.executable) -> list[str]:
    """uv (in the venv, from its lock) installs exactly the lock's packages, resolving nothing."""
    return [str(Path(python).parent / "uv"), "pip", "install", "--quiet", "--no-deps", "--python", python,
            "-r", str(lock)]


def install(extra: str, python: str = sys.executable) -> None:
    """Install skypilot[extra] from its lock; raise if pip check then fails (after putting the venv
    back to the launcher's lock) or the extra is still unmet."""
    lock = lock_path(f"skypilot-{extra}", python)
    argv = install_argv(lock, python)
    for needed in (Path(argv[0]), lock):
        if not needed.is_file():
            raise MissingPrerequisite(f"{needed} for SkyPilot's {extra} extra",
                                      "run `make setup` (it installs uv and, off the locks' platform, resolves the locks)")
    proc = subprocess.run(argv, check=False)
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    if check.returncode:
        subprocess.run([argv[0], "pip", "sync", "--quiet", "--python", python,
                        str(lock_path("launcher", python))], check=False)
        raise MissingPrerequisite(
            f"SkyPilot's {extra} extra: after installing {lock.name}, pip check found "
            f"{check.stdout.strip().splitlines()[0] if check.stdout.strip() else 'broken requirements'}",
            f"the venv is back to the launcher's lock; run `make lock` (the locks disagree), then `make setup`")
    left = missing(extra)
    if proc.returncode or left:
        raise MissingPrerequisite(
            f"SkyPilot's {extra} extra ({', '.join(left) or 'uv failed'})",
            f"{' '.join(argv)} failed (exit {proc.returncode}); run it yourself to see why, then "
            "`make launch` again")


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
          f"({ON_FIRST_USE[extra]}): the packages of its lock, locks.skypilot-{extra} of configs/versions.yaml",
          flush=True)
    install(extra)
    print(f"skypilot: the {extra} extra is installed", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.backends.skypilot.extras", __doc__.split("\n\n", 1)[0],
                            epilog=__doc__.split("CLI:\n", 1)[1].rstrip())
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("missing").add_argument("extras", nargs="*", metavar="EXTRA")
    verbs.add_parser("install").add_argument("extras", nargs="+", metavar="EXTRA")
    args = parser.parse_args(argv)
    names = args.extras or sorted(set(EXTRAS.values()))
    unknown = [n for n in names if n not in EXTRAS.values()]
    if unknown:
        parser.error(f"unknown extra {unknown[0]!r}; allowed: {', '.join(sorted(EXTRAS.values()))}")
    if args.verb == "missing":
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
    sys.exit(main())

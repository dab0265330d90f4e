"""The CRDs the offline KubeRay check validates against, at the versions pinned in configs/versions.yaml.

Section `crds:` of the versions file names, per kind, the upstream file at its release tag (the group's
`url`, where `{version}` is the group's own pin, `kuberay` or `prometheus-operator`, then the kind's
`path`) and its SHA256. A CRD is used only when its bytes have the pinned hash, wherever they came from:

  - $RLAUNCH_CRDS_DIR: folders holding local copies (a PATH-like list, for machines that cannot reach
    GitHub). Each folder is searched for the file itself and for <group>-crds-v<version>/<file>.
  - then the cache that `make crds` fills: $RLAUNCH_CRDS_CACHE (default <repo>/build/crds), laid
    out as <group>-crds-v<version>/<file>. `make crds` downloads what no local folder holds; a
    download that cannot reach its upstream is recorded beside it (unreachable()), so tests can tell
    a machine without that network from a setup that never fetched.

CLI (what `make crds` and scripts/setup run):
    python -m rlaunch.validate.crds fetch   # download (or copy from $RLAUNCH_CRDS_DIR) into the cache
    python -m rlaunch.validate.crds where [KIND...]  # where each (or each named) CRD is found; exit 3 if
                                                      # one is missing
    python -m rlaunch.validate.crds unreachable [KIND...]  # exit 0 if each is in place or the last
                                                      # fetch could not reach its upstream (tests tell a
                                                      # machine offline from a setup never run)

Exit: 0 every CRD in place; 1 a file whose SHA256 is not the pinned one (refused, nothing written);
3 a CRD could not be had (no network, not in $RLAUNCH_CRDS_DIR): the message says how to get it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import ROOT, pins
from ..data import sha256
from ..errors import MissingPrerequisite, RlaunchError

DOWNLOAD_TIMEOUT_S = 30  # per file; GitHub's raw files arrive in a second or two where it is reachable


class HashMismatch(RlaunchError):
    """A CRD file whose bytes are not the pinned ones."""

    exit_code = 1


@dataclass(frozen=True)
class Crd:
    kind: str         # RayJob
    group: str        # kuberay: the pin that gives its version
    version: str      # 1.7.0
    url: str          # the upstream file at that release tag
    sha256: str

    @property
    def file(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def folder(self) -> str:
        """Where it lives in the cache or a local copy: kuberay-crds-v1.7.0."""
        return f"{self.group}-crds-v{self.version}"

    @property
    def label(self) -> str:
        return f"{self.group} v{self.version} {self.kind} CRD"


def pinned() -> dict[str, Crd]:
    """Every pinned CRD by kind, from the versions file."""
    path = pins.versions_path()
    return dict(_pinned(str(path), path.stat().st_mtime_ns if path.exists() else 0))


@lru_cache(maxsize=8)
def _pinned(path: str, _mtime: int) -> tuple[tuple[str, Crd], ...]:
    versions = pins.load_versions(path)
    out = []
    for group, entries in pins.get("crds", versions).items():
        version = pins.get_str(group, versions)
        base = str(entries["url"]).format(version=version)
        out += [(kind, Crd(kind, group, version, f"{base}/{entry['path']}", str(entry["sha256"])))
                for kind, entry in entries.items() if kind != "url"]
    return tuple(out)


def get(kind: str) -> Crd:
    crds = pinned()
    if kind not in crds:
        raise KeyError(f"no CRD pinned for kind {kind} in configs/versions.yaml (pinned: {', '.join(crds)})")
    return crds[kind]


def local_dirs() -> list[Path]:
    return [Path(p) for p in os.environ.get("RLAUNCH_CRDS_DIR", "").split(os.pathsep) if p]


def cache_dir() -> Path:
    return Path(os.environ.get("RLAUNCH_CRDS_CACHE") or ROOT / "build" / "crds")


def _candidates(crd: Crd, roots: list[Path]) -> list[Path]:
    return [path for root in roots for path in (root / crd.file, root / crd.folder / crd.file)]


def how_to_get(crd: Crd) -> str:
    return (f"run `make crds` (downloads {crd.url} into {cache_dir()}/{crd.folder}/ and checks its SHA256), "
            f"or, on a machine that cannot reach GitHub, set RLAUNCH_CRDS_DIR to a folder holding a copy "
            f"of {crd.file} (itself or in {crd.folder}/)")


def _verified(crd: Crd, path: Path, what: str = "") -> Path:
    actual = sha256(path)
    if actual != crd.sha256:
        raise HashMismatch(f"{what or path} is not the pinned {crd.label}: sha256 {actual}, the pin is {crd.sha256}")
    return path


def locate(kind: str) -> Path:
    """The verified file of a pinned CRD; MissingPrerequisite (exit 3) saying how to get it."""
    crd = get(kind)
    dirs = local_dirs()
    where = (f"RLAUNCH_CRDS_DIR={os.pathsep.join(map(str, dirs))} or " if dirs else "") + f"the cache {cache_dir()}"
    for path in _candidates(crd, [*dirs, cache_dir()]):
        if path.is_file():
            try:
                return _verified(crd, path)
            except HashMismatch as err:
                raise MissingPrerequisite(f"the {crd.label}", f"{err}; {how_to_get(crd)}") from None
    raise MissingPrerequisite(f"the {crd.label}", f"not in {where}; {how_to_get(crd)}")


@lru_cache(maxsize=None)
def _load(path: Path, digest: str) -> dict:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads the 1.4 MB RayJob CRD in <1 s
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader


def load(kind: str) -> dict:
    """The parsed CRD of a kind (parsed once per file and hash)."""
    return _load(locate(kind), get(kind).sha256)


# ---------------------------------------------------------------- make crds


def _download(crd: Crd, target: Path) -> None:
    """Fetch crd.url to target through a temporary file; the hash is checked before the rename."""
    import urllib.error
    import urllib.request  # only `make crds` needs http: plan reads local files

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{crd.file}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(crd.url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310
                    shutil.copyfileobj(response, out)
            except (urllib.error.URLError, OSError, ValueError) as err:
                reason = getattr(err, "reason", err)
                _unreachable_file(crd).write_text(f"{crd.url}: {reason}\n", encoding="utf-8")
                raise MissingPrerequisite(f"the {crd.label}", f"could not download {crd.url} ({reason}, "
                                          f"{DOWNLOAD_TIMEOUT_S} s limit); set RLAUNCH_CRDS_DIR to a folder "
                                          f"holding a copy of {crd.file} and run `make crds` again") from None
        _verified(crd, Path(tmp), f"the download of {crd.url}")
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the cache from other users of the checkout
        os.replace(tmp, target)
        _unreachable_file(crd).unlink(missing_ok=True)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _unreachable_file(crd: Crd) -> Path:
    return cache_dir() / crd.folder / f".{crd.file}.unreachable"


def unreachable(kind: str) -> str:
    """Why the last `make crds` could not download this CRD ("" if it did, or never tried): the
    machine cannot reach its upstream, as opposed to a setup that never fetched it."""
    path = _unreachable_file(get(kind))
    return path.read_text(encoding="utf-8").strip() if path.is_file() else ""


def fetch_one(crd: Crd) -> str:
    """Put one pinned CRD in the cache; a line saying where it came from. A copy in RLAUNCH_CRDS_DIR
    comes first; a CRD none of those folders holds is downloaded."""
    target = cache_dir() / crd.folder / crd.file
    dirs = local_dirs()
    source = next((p for p in _candidates(crd, dirs) if p.is_file()), None)
    if source is not None:
        _verified(crd, source)
        if source.resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target.with_name(f".{crd.file}.part"))
            os.replace(target.with_name(f".{crd.file}.part"), target)
        _unreachable_file(crd).unlink(missing_ok=True)
        return f"{crd.label}: copied from {source} (sha256 ok)"
    if target.is_file() and sha256(target) == crd.sha256:
        _unreachable_file(crd).unlink(missing_ok=True)
        return f"{crd.label}: already in {target.parent} (sha256 ok)"
    _download(crd, target)
    return f"{crd.label}: downloaded to {target.parent} (sha256 ok)"


def fetch() -> list[str]:
    return [fetch_one(crd) for crd in pinned().values()]


def main(argv: list[str]) -> int:
    if argv[:1] not in (["fetch"], ["where"], ["unreachable"]) or not set(argv[1:]) <= set(pinned()):
        print(__doc__.split("CLI")[1].split("Exit")[0].strip(), file=sys.stderr)
        return 0 if argv in (["-h"], ["--help"]) else 2
    if argv[0] == "unreachable":  # exit 0: each named CRD is in place or its upstream was unreachable
        codes = []
        for kind in argv[1:] or pinned():
            try:
                locate(kind)
            except MissingPrerequisite:
                why = unreachable(kind)
                print(f"crds: {kind}: {why or 'missing, and no fetch recorded its upstream unreachable'}")
                codes.append(0 if why else 1)
        return max(codes, default=0)
    codes = []
    for crd in [c for kind, c in pinned().items() if kind in argv[1:] or len(argv) == 1]:
        try:
            line = fetch_one(crd) if argv == ["fetch"] else f"{crd.label}: {locate(crd.kind)}"
        except RlaunchError as err:
            print(f"crds: {err}", file=sys.stderr)
            codes.append(err.exit_code)
        else:
            print(f"crds: {line}")
    return HashMismatch.exit_code if HashMismatch.exit_code in codes else max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

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
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlaunch import ROOT, firecli
from rlaunch.config import pins
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.validate import pinned_files
from rlaunch.validate.pinned_files import HashMismatch  # noqa: F401 - a CRD whose bytes are not the pinned ones (exit 1)


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


def _verified(crd: Crd, path: Path) -> Path:
    pinned_files.verified(path.read_bytes(), crd.sha256, str(path), crd.label)
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
def _load(path: Path, digest: str) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads the 1.4 MB RayJob CRD in <1 s
    doc: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    return doc


def load(kind: str) -> dict[str, Any]:
    """The parsed CRD of a kind (parsed once per file and hash)."""
    return _load(locate(kind), get(kind).sha256)


# ---------------------------------------------------------------- make crds


def _target(crd: Crd) -> Path:
    return cache_dir() / crd.folder / crd.file


def unreachable(kind: str) -> str:
    """Why the last `make crds` could not download this CRD ("" if it did, or never tried): the
    machine cannot reach its upstream, as opposed to a setup that never fetched it."""
    return pinned_files.unreachable(_target(get(kind)))


def fetch_one(crd: Crd) -> str:
    """Put one pinned CRD in the cache; a line saying where it came from. A copy in RLAUNCH_CRDS_DIR
    comes first; a CRD none of those folders holds is downloaded."""
    target = _target(crd)
    source = next((p for p in _candidates(crd, local_dirs()) if p.is_file()), None)
    if source is not None:
        data = pinned_files.verified(source.read_bytes(), crd.sha256, str(source), crd.label)
        if source.resolve() != target.resolve():
            pinned_files.store(target, data)
        pinned_files.in_place(target)
        return f"{crd.label}: copied from {source} (sha256 ok)"
    if target.is_file():
        try:
            _verified(crd, target)
        except HashMismatch:
            pass  # a stale or damaged copy: downloaded again
        else:
            pinned_files.in_place(target)
            return f"{crd.label}: already in {target.parent} (sha256 ok)"
    hint = f"set RLAUNCH_CRDS_DIR to a folder holding a copy of {crd.file} and run `make crds` again"
    pinned_files.store(target, pinned_files.download(crd.url, target, crd.sha256, crd.label, hint))
    return f"{crd.label}: downloaded to {target.parent} (sha256 ok)"


def fetch() -> list[str]:
    return [fetch_one(crd) for crd in pinned().values()]


class Commands:
    """make crds, and where the tests look (fire: python -m rlaunch.validate.crds COMMAND)."""

    def fetch(self, *kinds: object) -> int:
        """Download (or copy from RLAUNCH_CRDS_DIR) every pinned CRD, or those named, into the cache."""
        return _each(kinds, lambda crd: fetch_one(crd))

    def where(self, *kinds: object) -> int:
        """Where each (or each named) CRD is found; exit 3 if one is missing."""
        return _each(kinds, lambda crd: f"{crd.label}: {locate(crd.kind)}")

    def unreachable(self, *kinds: object) -> int:
        """Exit 0 if each (or each named) CRD is in place or the last fetch could not reach its upstream."""
        codes = []
        for crd in _named(kinds):
            try:
                locate(crd.kind)
            except MissingPrerequisite:
                why = unreachable(crd.kind)
                print(f"crds: {crd.kind}: {why or 'missing, and no fetch recorded its upstream unreachable'}")
                codes.append(0 if why else 1)
        return max(codes, default=0)


def _named(kinds: Sequence[object]) -> list[Crd]:
    crds = pinned()
    unknown = [str(k) for k in kinds if str(k) not in crds]
    if unknown:
        raise ConfigError("KIND", unknown[0], "a pinned CRD's kind: " + ", ".join(crds))
    return [crds[str(k)] for k in kinds] if kinds else list(crds.values())


def _each(kinds: Sequence[object], line: Callable[[Crd], str]) -> int:
    return pinned_files.report(_named(kinds), line, "crds")


def main(argv: list[str] | None = None) -> int:
    return firecli.run(Commands, "rlaunch.validate.crds", "crds", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Files of a framework's pinned commit that none of its packages ship, pinned with their SHA256 in
configs/versions.yaml (frameworks.<framework>.files): RLinf's e2e config, which seed 003 starts from,
and the default it composes. The RLinf parity test compares the rendered config with them.

A file is used only when its bytes have the pinned hash, wherever they came from:
  - the cache that `make upstream` fills: $RLAUNCH_UPSTREAM_CACHE (default <repo>/build/upstream),
    laid out as <framework>-<commit>/<path>;
  - $RLAUNCH_UPSTREAM_DIR, for machines that cannot reach GitHub: a PATH-like list whose entries are
    git repositories holding the commit (any clone of the framework, such as the pinned checkout on
    an AIStudio shared storage; read with `git show <commit>:<path>`, never checked out) or folders
    holding a copy as <path> or <framework>-<commit>/<path>;
  - `make upstream` only: GitHub's raw file at the commit.

CLI (`make upstream`; scripts/setup-validators runs the fetch):
    python -m rlaunch.validate.upstream fetch [FRAMEWORK...]   # into the cache
    python -m rlaunch.validate.upstream where [FRAMEWORK...]   # where each file is found

Exit: 0 every file in place; 1 a file whose SHA256 is not the pinned one (refused, nothing written);
3 a file could not be had (no network, not in $RLAUNCH_UPSTREAM_DIR): the message says how to get it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rlaunch import ROOT, firecli
from rlaunch.config import pins
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.validate import pinned_files
from rlaunch.validate.pinned_files import HashMismatch  # noqa: F401 - bytes that are not the pinned ones (exit 1)

RAW = "https://raw.githubusercontent.com/{owner_repo}/{commit}/{path}"


@dataclass(frozen=True)
class File:
    framework: str
    repo: str       # https://github.com/RLinf/RLinf
    commit: str
    path: str       # tests/e2e_tests/reasoning/qwen2.5-1.5b-grpo-pipeline-fsdp-sgl.yaml
    sha256: str

    @property
    def folder(self) -> str:
        return f"{self.framework}-{self.commit}"

    @property
    def url(self) -> str:
        owner_repo = self.repo.rstrip("/").removesuffix(".git").split("github.com/", 1)[-1]
        return RAW.format(owner_repo=owner_repo, commit=self.commit, path=self.path)

    @property
    def label(self) -> str:
        return f"{self.framework} {self.path} at {self.commit[:12]}"


def pinned(framework: str) -> list[File]:
    versions = pins.load_versions()
    fw = pins.get(f"frameworks.{framework}", versions)
    return [File(framework, str(fw["repo"]), str(fw["commit"]), str(e["path"]), str(e["sha256"]))
            for e in fw.get("files") or []]


def cache_dir() -> Path:
    return Path(os.environ.get("RLAUNCH_UPSTREAM_CACHE") or ROOT / "build" / "upstream")


def local_sources() -> list[Path]:
    return [Path(p) for p in os.environ.get("RLAUNCH_UPSTREAM_DIR", "").split(os.pathsep) if p]


def how_to_get(f: File) -> str:
    return (f"run `make upstream` (downloads {f.url} into {cache_dir()}/{f.folder}/ and checks its SHA256), "
            f"or, on a machine that cannot reach GitHub, set RLAUNCH_UPSTREAM_DIR to a clone of {f.repo} that "
            f"holds commit {f.commit} (or to a folder with a copy of {f.path}) and run `make upstream`")


def _verified(f: File, data: bytes, where: str) -> bytes:
    return pinned_files.verified(data, f.sha256, where, f.label)


def _from_git(f: File, repo: Path) -> bytes | None:
    git = ["git", "-c", f"safe.directory={repo}", "-C", str(repo)]
    try:
        proc = subprocess.run([*git, "show", f"{f.commit}:{f.path}"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _from_local(f: File) -> tuple[bytes, str] | None:
    """The file from $RLAUNCH_UPSTREAM_DIR: (verified bytes, where), or None when no entry has it."""
    for source in local_sources():
        # A clone first, at the commit: its work tree may be at any other one.
        data = _from_git(f, source) if source.is_dir() else None
        if data is not None:
            where = f"git show {f.commit[:12]}:{f.path} in {source}"
            return _verified(f, data, where), where
        for copy in (source / f.path, source / f.folder / f.path):
            if copy.is_file():
                return _verified(f, copy.read_bytes(), str(copy)), str(copy)
    return None


def read(f: File) -> tuple[bytes, str]:
    """The pinned file's bytes and where they came from (never the network); MissingPrerequisite."""
    cached = cache_dir() / f.folder / f.path
    if cached.is_file():
        try:
            return _verified(f, cached.read_bytes(), str(cached)), str(cached)
        except HashMismatch as err:
            raise MissingPrerequisite(f"the {f.label}", f"{err}; {how_to_get(f)}") from None
    found = _from_local(f)
    if found is None:
        where = f"the cache {cache_dir()}" + (f" or RLAUNCH_UPSTREAM_DIR={os.environ['RLAUNCH_UPSTREAM_DIR']}"
                                               if local_sources() else "")
        raise MissingPrerequisite(f"the {f.label}", f"not in {where}; {how_to_get(f)}")
    return found


def tree(framework: str, dest: Path) -> Path:
    """Every pinned file of the framework under dest/<path>, as in its repository; returns dest."""
    for f in pinned(framework):
        data, _ = read(f)
        (dest / f.path).parent.mkdir(parents=True, exist_ok=True)
        (dest / f.path).write_bytes(data)
    return dest


def _target(f: File) -> Path:
    return cache_dir() / f.folder / f.path


def unreachable(framework: str) -> str:
    """Why the last `make upstream` could not download a pinned file of this framework ("" if none
    failed so): the machine cannot reach GitHub, as opposed to a setup that never fetched."""
    return pinned_files.unreachable(*map(_target, pinned(framework)))


def fetch_one(f: File) -> str:
    """Put one pinned file in the cache; a line saying where it came from."""
    target = _target(f)
    if target.is_file():
        try:
            _verified(f, target.read_bytes(), str(target))
        except HashMismatch:
            pass  # a stale or damaged copy: fetched again
        else:
            pinned_files.in_place(target)
            return f"{f.label}: already in {cache_dir() / f.folder} (sha256 ok)"
    found = _from_local(f)
    if found is None and local_sources():
        raise MissingPrerequisite(f"the {f.label}", f"not in RLAUNCH_UPSTREAM_DIR={os.environ['RLAUNCH_UPSTREAM_DIR']} "
                                  f"(looked for a git repository holding {f.commit}, {f.path} and "
                                  f"{f.folder}/{f.path} in each)")
    if found is None:
        hint = f"set RLAUNCH_UPSTREAM_DIR to a clone of {f.repo} that holds commit {f.commit} and run `make upstream` again"
        found = pinned_files.download(f.url, target, f.sha256, f.label, hint), f"downloaded from {f.url}"
    data, source = found
    pinned_files.store(target, data)
    return f"{f.label}: {source} -> {target} (sha256 ok)"


class Commands:
    """make upstream (fire: python -m rlaunch.validate.upstream COMMAND [FRAMEWORK...])."""

    def fetch(self, *frameworks: object) -> int:
        """Put each pinned file of every framework that has some, or of those named, in the cache."""
        return _each(frameworks, fetch_one)

    def where(self, *frameworks: object) -> int:
        """Where each pinned file is found (never the network); exit 3 if one is missing."""
        return _each(frameworks, lambda f: f"{f.label}: {read(f)[1]}")


def _each(frameworks: Iterable[object], line: Callable[[File], str]) -> int:
    names = [str(n) for n in frameworks] or [name for name, fw in pins.get("frameworks").items() if fw.get("files")]
    files = []
    for framework in names:
        try:
            files += pinned(framework)
        except pins.PinError as err:
            raise ConfigError("FRAMEWORK", framework, f"a framework with pinned files ({err})") from None
    return pinned_files.report(files, line, "upstream")


def main(argv: list[str] | None = None) -> int:
    return firecli.run(Commands, "rlaunch.validate.upstream", "upstream", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

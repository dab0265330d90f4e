"""A git repository a CODE=<url>@<commit> test can fetch: made here, the same commit on every machine (fixed
names and dates), with a file that does not compress so that its pack is over KubeRay's ConfigMap limit.
Its URL is a remote one (URL, never resolved): git reaches the bare repository through `insteadOf`
(git_env), and the plan's cache can be filled without a fetch (cache_checkout)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_SYSTEM": os.devnull}
BIG = 1100 * 1024  # over the 900 KiB KubeRay's ConfigMap carries
URL = "https://git.invalid/big-code.git"  # .invalid: never a host (RFC 2606)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def incompressible(size: int) -> bytes:
    """`size` bytes of a sha256 chain: deterministic, and gzip cannot shrink them."""
    blocks = (hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1))
    return b"".join(blocks)[:size]


def bare_repo(bare: Path, files: dict[str, bytes] | None = None) -> str:
    """A bare repository at `bare` (made once) whose one commit holds `files` (default: a reward module
    and BIG bytes of weights, plus an ignored file git tracks anyway); its commit."""
    if not (bare / "HEAD").is_file():
        files = files if files is not None else {
            "pkg/__init__.py": b"", "pkg/reward.py": b"def score(x):\n    return 1.0\n",
            "assets/table.bin": incompressible(BIG), ".gitignore": b"*.log\n", "tracked.log": b"kept: tracked\n"}
        # Made under names of this process's own, then renamed into place: xdist's workers collect the
        # goldens at the same time, and the first rename wins (the commit is the same either way).
        work = bare.with_name(f"{bare.name}.work.{os.getpid()}")
        made = bare.with_name(f"{bare.name}.{os.getpid()}")
        work.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(data)
        git(work, "init", "-q")
        git(work, "add", "-f", ".")
        git(work, "commit", "-qm", "big")
        git(bare.parent, "clone", "-q", "--bare", str(work), str(made))
        subprocess.run(["rm", "-rf", str(work)], check=True)
        _into_place(made, bare)
    return git(bare, "rev-parse", "HEAD")


def _into_place(made: Path, dest: Path) -> None:
    """`made` renamed to `dest`, unless another process put one there first (then `made` goes)."""
    try:
        made.rename(dest)
    except OSError:
        if not dest.is_dir():
            raise
        subprocess.run(["rm", "-rf", str(made)], check=True)


def git_env(bare: Path) -> dict[str, str]:
    """Environment under which git fetches URL from `bare` (git's url.<base>.insteadOf, as config in the
    environment)."""
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.file://{bare}.insteadOf", "GIT_CONFIG_VALUE_0": URL}


def cache_checkout(cache: Path, bare: Path, commit: str) -> str:
    """URL@commit checked out where rlaunch.config.code.resolve looks first (cache/<sha of URL>/<commit>);
    the CODE value."""
    dest = cache / hashlib.sha256(URL.encode()).hexdigest()[:16] / commit
    if not dest.is_dir():
        made = dest.with_name(f"{dest.name}.{os.getpid()}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        git(dest.parent, "clone", "-q", str(bare), str(made))
        git(made, "checkout", "-q", "--detach", commit)
        _into_place(made, dest)
    return f"{URL}@{commit}"

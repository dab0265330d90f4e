"""What the pinned CRDs (validate.crds) and the frameworks' pinned upstream files (validate.upstream)
share: a file used only with its pinned SHA256, written into a cache atomically, and the record of a
download that could not reach its upstream. That record lets the tests tell a machine without that
network (they skip, saying so) from a setup that never fetched (under CI=true they fail)."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from rlaunch.errors import MissingPrerequisite, RlaunchError

T = TypeVar("T")

DOWNLOAD_TIMEOUT_S = 30  # per file; GitHub's raw files arrive in a second or two where it is reachable


class HashMismatch(RlaunchError):
    """Bytes that are not the pinned ones."""

    exit_code = 1


def verified(data: bytes, sha256: str, where: str, label: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise HashMismatch(f"{where} is not the pinned {label}: sha256 {actual}, the pin is {sha256}")
    return data


def write(target: Path, data: bytes) -> None:
    """target holds data, or what it held before: never a partial file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the cache from other users of the checkout
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _marker(target: Path) -> Path:
    return target.with_name(f".{target.name}.unreachable")


def store(target: Path, data: bytes) -> None:
    """The pinned file is in the cache: written, and no longer recorded as unreachable."""
    write(target, data)
    in_place(target)


def in_place(target: Path) -> None:
    _marker(target).unlink(missing_ok=True)


def download(url: str, target: Path, sha256: str, label: str, hint: str) -> bytes:
    """url's verified bytes. One that cannot be reached is recorded beside target and raised as
    MissingPrerequisite (exit 3) ending with hint (how to get the file otherwise)."""
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        write(_marker(target), f"{url}: {reason}\n".encode())
        raise MissingPrerequisite(f"the {label}", f"could not download {url} ({reason}, {DOWNLOAD_TIMEOUT_S} s "
                                  f"limit); {hint}") from None
    return verified(data, sha256, f"the download of {url}", label)


def unreachable(*targets: Path) -> str:
    """Why the last fetch could not download these files ("" if none failed so, or never tried)."""
    return "; ".join(m.read_text(encoding="utf-8").strip() for m in map(_marker, targets) if m.is_file())


def report(items: Iterable[T], line: Callable[[T], str], prefix: str) -> int:
    """`prefix: line(item)` for each item, or its error on stderr; the exit code: a hash mismatch
    (1) before any other failure, else the highest."""
    codes = []
    for item in items:
        try:
            text = line(item)
        except RlaunchError as err:
            print(f"{prefix}: {err}", file=sys.stderr)
            codes.append(err.exit_code)
        else:
            print(f"{prefix}: {text}")
    return HashMismatch.exit_code if HashMismatch.exit_code in codes else max(codes, default=0)

"""What a test does when a tool or fixture it needs is missing: under CI=true (CI installs
everything) it fails, naming what is missing and how to get it; elsewhere it skips saying the same.
Never a silent skip. The one exception is a fixture whose download was recorded as unable to reach
its upstream (`make crds` / `make upstream` on a machine without GitHub): that skips everywhere,
saying so, because no setup step on this machine could have fetched it."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(what: str, *, unreachable: bool = False) -> None:
    """Fail under CI=true, else skip; `what` names the missing thing and how to get it."""
    if in_ci() and not unreachable:
        pytest.fail(f"CI=true and a prerequisite is missing: {what}", pytrace=False)
    pytest.skip(what)

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


def crd_gaps(*kinds: str) -> tuple[dict, str, bool]:
    """(the pinned CRD files of these kinds that are here, what is missing and how to get it, whether
    every missing one was recorded by `make crds` as unreachable from this machine)."""
    from rlaunch.errors import MissingPrerequisite
    from rlaunch.validate import crds as pinned

    found, gaps = {}, []
    for kind in kinds:
        try:
            found[kind] = pinned.locate(kind)
        except MissingPrerequisite as err:
            gaps.append((kind, str(err), pinned.unreachable(kind)))
    text = "; ".join(err + (f" (this machine cannot reach it: {why})" if why else "") for _, err, why in gaps)
    return found, text, bool(gaps) and all(why for _, _, why in gaps)


def kuberay_kinds() -> tuple[str, ...]:
    """The KubeRay and PodMonitor CRDs: every KubeRay manifest's but A4X's ComputeDomain."""
    from rlaunch.validate import crds as pinned

    return tuple(kind for kind, crd in pinned.pinned().items() if crd.group in ("kuberay", "prometheus-operator"))

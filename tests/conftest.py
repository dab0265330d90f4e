"""Shared pytest setup: rlaunch importable from tools/ and the test helpers from tests/ (actrun),
markers registered, the `crds` and `host_ok` fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: starts a real multi-node Ray cluster in network namespaces")
    config.addinivalue_line("markers", "e2e: runs a whole launch end to end")
    config.addinivalue_line("markers", "slow: takes more than a minute")


@pytest.fixture
def crds():
    """The pinned CRD files (rlaunch.validate.crds: `make crds` or RLAUNCH_CRDS_DIR). Without them the
    test skips saying how to get them; under CI=true it fails instead."""
    from rlaunch.errors import MissingPrerequisite
    from rlaunch.validate import crds as pinned

    try:
        return {kind: pinned.locate(kind) for kind in pinned.pinned()}
    except MissingPrerequisite as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and a CRD is missing: {err}")
        pytest.skip(str(err))


@pytest.fixture
def host_ok():
    """A host where tests/kuberay_harness.py can run pods (root, ip, iptables, unshare); skip saying
    what is missing, and under CI=true fail instead."""
    import kuberay_harness as kh

    missing = kh.prerequisites()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and this host cannot run the KubeRay harness: " + ", ".join(missing))
        pytest.skip("the KubeRay harness needs " + ", ".join(missing))

"""Shared pytest setup: rlaunch importable from tools/ and the test helpers from tests/ (actrun),
markers registered."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: starts a real multi-node Ray cluster in network namespaces")
    config.addinivalue_line("markers", "e2e: runs a whole launch end to end")
    config.addinivalue_line("markers", "slow: takes more than a minute")

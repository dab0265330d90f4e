"""A missing prerequisite skips a test saying what and how to get it, and fails it under CI=true
(tests/needs.py for pytest, tests/bats/needs.bash for bats): never a silent skip in CI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(ci: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return {**env, "CI": "true"} if ci else env


@pytest.mark.parametrize("ci", [False, True])
def test_pytest_missing_skips_or_fails_under_ci(tmp_path, ci):
    (tmp_path / "test_x.py").write_text("from needs import missing\n\n\ndef test_x():\n"
                                        "    missing('frobnicate is not installed (apt-get install frob)')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env={
                              **_env(ci), "PYTHONPATH": str(ROOT / "tests")})
    out = proc.stdout + proc.stderr
    assert "frobnicate is not installed (apt-get install frob)" in out
    if ci:
        assert proc.returncode == 1 and "1 failed" in out and "CI=true and a prerequisite is missing" in out
    else:
        assert proc.returncode == 0 and "1 skipped" in out


def test_a_fixture_this_machine_cannot_reach_skips_even_under_ci(tmp_path):
    (tmp_path / "test_x.py").write_text("from needs import missing\n\n\ndef test_x():\n"
                                        "    missing('the CRD: github unreachable', unreachable=True)\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env={
                              **_env(True), "PYTHONPATH": str(ROOT / "tests")})
    assert proc.returncode == 0 and "1 skipped" in proc.stdout and "github unreachable" in proc.stdout


@pytest.mark.parametrize("ci", [False, True])
def test_bats_missing_skips_or_fails_under_ci(tmp_path, ci):
    bats = shutil.which("bats", path=str(Path(sys.executable).parent)) or shutil.which("bats")
    if bats is None:
        from needs import missing

        missing("bats is not installed (make setup installs bats-core)")
    (tmp_path / "needs.bash").write_text((ROOT / "tests" / "bats" / "needs.bash").read_text())
    (tmp_path / "x.bats").write_text('load needs\n\n@test "x" {\n  missing "frob is not installed"\n  true\n}\n')
    proc = subprocess.run([bats, str(tmp_path / "x.bats")], capture_output=True, text=True, timeout=120,
                          env=_env(ci))
    out = proc.stdout + proc.stderr
    if ci:
        assert proc.returncode == 1 and "not ok 1 x" in out and "CI=true and a prerequisite is missing: frob" in out
    else:
        assert proc.returncode == 0 and "ok 1 x # skip frob is not installed" in out

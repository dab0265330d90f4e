"""`python -m rlaunch frameworks requires`: the lock inputs of a validator venv (setup-validators),
read from the framework's own metadata in a site-packages that holds it alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def requires(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlaunch", "frameworks", "requires", *argv], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"},
                          timeout=120)


def test_each_need_gets_the_frameworks_specifier_and_torch_and_ray_the_pins(tmp_path):
    info = tmp_path / "areal-1.0.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: areal\nVersion: 1.0.4\n"
        "Requires-Dist: transformers<=5.3.0,>=5.0.0\n"
        "Requires-Dist: torch>=2.9\n"
        "Requires-Dist: aiohttp>=3.13.3,<4\n"
        "Requires-Dist: pytest; extra == \"dev\"\n"
        "Requires-Dist: uvloop>=0.21; extra == \"dev\"\n")
    proc = requires("areal", f"--site={tmp_path}", "--torch=2.13.0+cpu", "--ray=2.60.0")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert "torch==2.13.0+cpu" in lines and "ray==2.60.0" in lines  # the pins, not the metadata's >=2.9
    assert "transformers<=5.3.0,>=5.0.0" in lines and "aiohttp<4,>=3.13.3" in lines
    assert "uvloop" in lines  # only an extra names it: no specifier
    assert "pytest" not in lines  # the loader does not need it


def test_a_site_without_the_framework_is_exit_2_naming_it(tmp_path):
    proc = requires("areal", f"--site={tmp_path}", "--torch=2.13.0+cpu", "--ray=2.60.0")
    assert proc.returncode == 2
    assert f"site='{tmp_path}'" in proc.stderr and "holds areal" in proc.stderr


def test_a_version_fire_would_read_as_a_number_is_refused(tmp_path):
    proc = requires("areal", f"--site={tmp_path}", "--torch=2.13.0", "--ray=2.60")
    assert proc.returncode == 2 and "--ray=2.6" in proc.stderr

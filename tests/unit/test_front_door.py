"""scripts/rlaunch, the documented front door for rlaunch's own exit codes (make exits 2 on any
failure): a missing prerequisite is 3, bad input is 2, through the same knobs as make."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def front_door(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    # Nothing from an outer make or the user's own knobs.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_KNOB_", "MAKE")) and k != "MFLAGS"}
    return subprocess.run([str(ROOT / "scripts" / "rlaunch"), *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_missing_prerequisite_is_exit_3(tmp_path):
    empty = tmp_path / "no-crds"
    empty.mkdir()
    out = tmp_path / "out"
    proc = front_door("plan", "INFRA=kuberay", f"OUT={out}",
                      env={"RLAUNCH_CRDS_DIR": str(empty), "RLAUNCH_CRDS_CACHE": str(empty)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "CRD" in proc.stderr and "make crds" in proc.stderr, proc.stderr


def test_bad_input_is_exit_2_naming_the_knob(tmp_path):
    out = tmp_path / "out"
    proc = front_door("plan", "NODES=zero", f"OUT={out}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "NODES" in proc.stderr and "zero" in proc.stderr
    assert not out.exists()
    # A name that is no knob: refused by the front door itself, with the knobs it knows.
    proc = front_door("plan", "NODE=2")
    assert proc.returncode == 2 and "NODE='2' is not allowed: a knob is one of" in proc.stderr, proc.stderr


def test_a_knob_from_the_environment_counts_as_for_make(tmp_path):
    # make reads `NAME ?=` from the environment; so does the front door (same bad value, same exit 2).
    proc = front_door("plan", f"OUT={tmp_path / 'out'}", env={"NODES": "zero"})
    assert proc.returncode == 2 and "NODES" in proc.stderr, proc.stderr

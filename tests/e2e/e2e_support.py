"""What the end-to-end tests share: `make` in the repository, with a secret in the environment that
must never show up in an output."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sekret-value"


def make(*args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "WANDB_API_KEY": SECRET})


def start_make(*args: str, stdout, stderr) -> subprocess.Popen:
    """make, as make() runs it, without waiting for it."""
    return subprocess.Popen(["make", *args], cwd=ROOT, stdout=stdout, stderr=stderr, text=True,
                            env={**os.environ, "WANDB_API_KEY": SECRET})

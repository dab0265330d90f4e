"""`make plan DATA=...` for AReaL: the user's rows checked here, before any GPU (issue 44).

The dataset directory AReaL loads (train_dataset.path) found on this machine
(rlaunch.frameworks.verl.cpu.datacheck.base_here), then rlaunch.frameworks.areal.data_probe run once:
AReaL's gsm8k loader's rows, the batch, and the reward called as AReaL's workflow calls it, within its
15 s. Run in .venv-areal (AReaL at its pin, with `datasets` and its rewards' math-verify); without it,
in the launcher's venv, where AReaL's own rewards do not import (a warning). A passing answer is kept
by content (the files, the arguments, CODE's hash, .venv-areal's stamp).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rlaunch.config import datasource, topology
from rlaunch.frameworks.verl.cpu import datacheck as verl_datacheck
from rlaunch.validate import loaders

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROBE = Path(__file__).with_name("data_probe.py")


def lines(spec: Spec) -> list[str]:
    """The plan's data check lines for AReaL ([] without data.source); ConfigError when a check fails."""
    base = verl_datacheck.base_or_lines(spec)
    if isinstance(base, list):
        return base
    eff = topology.parse_overrides(spec.framework.overrides)
    batch = eff.get("train_dataset.batch_size", str(spec.train.batch_size))
    venv = loaders.venv_python("areal")
    python = str(venv) if venv.exists() else sys.executable  # AReaL's own rewards import in .venv-areal alone
    argv = [python, "-m", "rlaunch.frameworks.areal.data_probe", f"--path={base}", "--splits=train,test",
            f"--batch={batch}"]
    files = sorted(p for p in base.rglob("*") if p.is_file() and not set(datasource.SKIPPED) & set(p.parts))
    return verl_datacheck.probe_lines(spec, argv, [PROBE, *files], loaders.venv_stamp("areal") or "launcher", "AReaL")

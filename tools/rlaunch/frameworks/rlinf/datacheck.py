"""`make plan DATA=...` for RLinf: the user's rows checked here, before any GPU (issue 44).

The files the rendered config reads (data.train_data_paths, data.val_data_paths) found on this machine
(rlaunch.frameworks.verl.cpu.datacheck.base_here: DATA here, data.prepare's plan-time output, a shared
path this machine sees, a hub dataset's files), then rlaunch.frameworks.rlinf.data_probe run once in
.venv-rlinf (RLinf at its pin): suffixes, prompt_key/answer_key on every row, the rollout batch, RLinf's
reward class called on the rows. A passing answer is kept by content (the files, the arguments, CODE's
hash, the venv's stamp), as verl's is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import datasource, dotted
from rlaunch.frameworks.verl.cpu import datacheck as verl_datacheck
from rlaunch.validate import loaders

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROBE = Path(__file__).with_name("data_probe.py")
VENV = "rlinf"


def lines(spec: Spec, cfg: dict[str, Any]) -> list[str]:
    """The plan's data check lines for RLinf ([] without data.source); ConfigError when a check fails."""
    base = verl_datacheck.base_or_lines(spec)
    if isinstance(base, list):
        return base
    python = loaders.venv_python(VENV)
    if not python.exists():
        return [f"WARNING data: rows not checked: {python.parent.parent.name} is missing (make setup-validators: "
                "RLinf at its pin reads and scores them)"]
    read_dir = datasource.read_dir(spec.pins.source)
    wanted = [*dotted.get(cfg, "data.train_data_paths", []), *dotted.get(cfg, "data.val_data_paths", [])]
    here = [base / str(p)[len(read_dir) + 1:] for p in dict.fromkeys(wanted) if str(p).startswith(read_dir + "/")]
    reward = dotted.get(cfg, "reward", {}) or {}
    argv = [str(python), "-m", "rlaunch.frameworks.rlinf.data_probe", f"--files={','.join(map(str, here))}",
            f"--prompt-key={dotted.get(cfg, 'data.prompt_key')}", f"--answer-key={dotted.get(cfg, 'data.answer_key')}",
            f"--chat={int(bool(dotted.get(cfg, 'data.apply_chat_template')))}",
            f"--batch={dotted.get(cfg, 'data.rollout_batch_size')}",
            f"--reward-type={reward.get('reward_type', 'math')}", f"--reward={json.dumps(reward, default=str)}"]
    return verl_datacheck.probe_lines(spec, argv, [PROBE, *here], loaders.venv_stamp(VENV), "RLinf")

"""Where AReaL 1.0.4 writes, and postflight's checks of it: the step markers in main.log, the HF
checkpoint of the last step, the resolved topology.

- Logs in {fileroot}/logs/{user}/{experiment}/{trial}/ (main.log, merged.log, config.yaml) with
  "Train step g/G done." per step; HF checkpoints in {fileroot}/checkpoints/{user}/{experiment}/{trial}/
  default/epoch{e}epochstep{s}globalstep{g}/ (g counts from 0). rlaunch's defaults: fileroot = run_dir,
  experiment = run.name, trial = run.id; any user.

--path keys: fileroot, experiment, trial, tensorboard.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import dotted
from rlaunch.job.files import log_text, read_yaml
from rlaunch.verify.postflight import (check_step_target, check_topology, hf_checkpoint_problems, target_steps,
                                       tensorboard_check)
from rlaunch.verify.report import check

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

STEP = r"Train step (\d+)/(\d+) done"
CKPT = r"epoch(\d+)epochstep(\d+)globalstep(\d+)"


def layout(spec: Spec, run_dir: Path) -> dict[str, Path | str]:
    return {"fileroot": Path(run_dir), "experiment": spec.run.name, "trial": spec.run.id,
            "tensorboard": ""}


def rewards(where: dict[str, Any], run_dir: Path) -> list[tuple[int, float]]:
    return []  # its TensorBoard events: compare reads them


def _areal_dir(fileroot: Path, kind: str, experiment: str, trial: str) -> Path | None:
    # {fileroot}/{kind}/{user}/{experiment}/{trial}: any user (the job's USER, not ours).
    found = sorted(Path(fileroot).glob(f"{kind}/*/{experiment}/{trial}"))
    return found[-1] if found else None


def checks(spec: Spec, run_dir: Path, where: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    fileroot, experiment, trial = Path(where["fileroot"]), where["experiment"], where["trial"]
    checks = []
    log_dir = _areal_dir(fileroot, "logs", experiment, trial)
    main_log = log_dir / "main.log" if log_dir else None
    target = target_steps(spec)
    last = None
    if main_log is None or not main_log.is_file():
        checks.append(check("step target", False,
                            f"no {fileroot}/logs/<user>/{experiment}/{trial}/main.log"))
    else:
        steps = [(int(a), int(b)) for a, b in re.findall(STEP, log_text(main_log))]
        last = max((a for a, _ in steps), default=None)
        target = target or (steps[-1][1] if steps else None)
        checks.append(check_step_target(last, target, str(main_log)))
    facts.update(steps=last, target_steps=target)

    ckpt_root = _areal_dir(fileroot, "checkpoints", experiment, trial)
    saves = []
    if ckpt_root:
        for path in (ckpt_root / "default").glob("epoch*epochstep*globalstep*"):
            match = re.fullmatch(CKPT, path.name)
            if match and path.is_dir():
                saves.append((int(match.group(3)), path))
    if not saves:
        checks.append(check("checkpoint", False,
                            f"no HF checkpoint under {fileroot}/checkpoints/<user>/{experiment}/{trial}/default"))
    else:
        step, path = max(saves)
        problems = hf_checkpoint_problems(path, tokenizer=False)
        if target and step != target - 1:  # AReaL names checkpoints by its 0-based global step
            problems.insert(0, f"latest is globalstep{step}, the last step is globalstep{target - 1}")
        checks.append(check("checkpoint", not problems, "; ".join(problems) or f"complete: {path}"))
        facts["checkpoint"] = str(path)

    config_path = (log_dir or fileroot) / "config.yaml"
    cfg = read_yaml(config_path) if config_path.is_file() else None
    cluster = spec.cluster
    checks.append(check_topology(cfg, config_path, {"cluster.n_nodes": cluster.nodes,
                                                    "cluster.n_gpus_per_node": cluster.gpus_per_node},
                                 required=False))
    tb = where["tensorboard"] or (dotted.get(cfg, "stats_logger.tensorboard.path", None) if cfg else None)
    if tb:
        checks.append(tensorboard_check(Path(tb))[0])
    return checks

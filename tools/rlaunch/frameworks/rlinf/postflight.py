"""Where RLinf 0.3 writes, and postflight's checks of it: the step-limit line, TensorBoard reward/loss/
grad norm/lr finite and lr > 0, DCP .metadata and one *.distcp per actor rank plus data/data.pt, the
resolved topology, and the resolved placement, output_dir and experiment_name equal to the requested
ones (the rendered config the job keeps in <run_dir>/plan/).

- {output_dir}/{experiment_name}/log/main.log with "Step limit given by max_steps=N reached";
  TensorBoard under {logger.log_path}/tensorboard/; checkpoints in {output_dir}/{experiment_name}/
  checkpoints/global_step_N/actor/dcp_checkpoint/{.metadata,*.distcp} and .../data/data.pt; Hydra's
  resolved config in {hydra.run.dir}/.hydra/config.yaml, the config rlaunch rendered (what was
  requested) in <run_dir>/plan/rlinf/rlaunch-grpo.yaml. For rlaunch (and the AIStudio preset)
  output_dir/experiment_name and log_path are both the run directory, and hydra.run.dir is
  <run_dir>/hydra.

--path keys: main_log, tensorboard, ckpt_dir, resolved_config, requested_config.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import dotted
from rlaunch.frameworks.rlinf.adapter import ADAPTER, CONFIG_DIR, CONFIG_NAME
from rlaunch.frameworks.rlinf.placement import placement_ranks
from rlaunch.job.files import log_text, nonempty, read_scalars, read_yaml
from rlaunch.job.layouts import log_files, relocate
from rlaunch.verify.postflight import check_lr, check_step_target, check_topology, target_steps, tensorboard_check
from rlaunch.verify.report import check

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

STEP = r"Step limit given by max_steps=(\d+) reached"
TAGS = {
    "reward": "rollout/reward_scores",
    "loss": "actor/training/actor/final_loss",
    "grad_norm": "actor/training/actor/grad_norm",
    "lr": "actor/training/actor/lr",
}


def layout(spec: Spec, run_dir: Path) -> dict[str, Path | str]:
    run_dir = Path(run_dir)
    return {"main_log": run_dir / "log" / "main.log", "tensorboard": run_dir / "tensorboard",
            "ckpt_dir": relocate(spec, "ckpt_dir", run_dir, "checkpoints"),
            "resolved_config": run_dir / "hydra" / ".hydra" / "config.yaml",
            # The adapter names the file it renders; job.sh keeps it under <run_dir>/plan/.
            "requested_config": run_dir / "plan" / CONFIG_DIR / f"{CONFIG_NAME}.yaml"}


def rewards(where: dict[str, Any], run_dir: Path) -> list[tuple[int, float]]:
    """(step, reward) from TensorBoard's TAGS["reward"] anywhere under the run directory."""
    root = Path(run_dir)
    return read_scalars(root).get(TAGS["reward"], []) if any(root.rglob("events.out.tfevents.*")) else []


def check_distcp(dcp_dir: Path, expected_ranks: int) -> dict[str, Any]:
    """torch.distributed.checkpoint: .metadata plus __R_T.distcp files covering every actor rank."""
    name = "actor checkpoint shards"
    if not nonempty(dcp_dir / ".metadata"):
        return check(name, False, f"{dcp_dir / '.metadata'} missing or empty")
    shards = [p for p in dcp_dir.glob("*.distcp") if nonempty(p)]
    ranks = {int(m.group(1)) for p in shards if (m := re.match(r"__(\d+)_\d+\.distcp$", p.name))}
    if len(shards) < expected_ranks:
        return check(name, False, f"{len(shards)} non-empty *.distcp in {dcp_dir}, expected one per "
                                  f"actor rank ({expected_ranks})")
    missing = [r for r in range(expected_ranks) if ranks and r not in ranks]
    if missing:
        return check(name, False, f"no shard for actor rank {missing[0]} in {dcp_dir}")
    return check(name, True, f"{len(shards)} *.distcp shards for {expected_ranks} actor ranks + .metadata")


def _requested(spec: Spec, requested_path: Path) -> tuple[dict[str, Any] | None, str]:
    """What the job asked RLinf for: the rendered config the job kept in plan/, else the adapter's
    config for this spec; (None, why) when neither can be had."""
    if requested_path.is_file():
        return read_yaml(requested_path), str(requested_path)
    try:
        return ADAPTER.config(spec), "the spec (no rendered config in the run's plan/)"
    except Exception as err:  # noqa: BLE001 - a copied run without its plan and a partial spec
        return None, f"no {requested_path} and the spec does not render ({type(err).__name__}: {err})"


def check_request(spec: Spec, cfg: dict[str, Any] | None, config_path: Path,
                  requested_path: Path) -> list[dict[str, Any]]:
    """Placement, output_dir and experiment_name as resolved, against what the job requested."""
    requested, source = _requested(spec, requested_path)
    if requested is None:
        return [check("resolved placement", False, f"requested placement unknown: {source}")]
    placement = {"cluster.component_placement": dotted.get(requested, "cluster.component_placement", None)}
    outputs = {key: dotted.get(requested, key, None) for key in ("runner.output_dir", "runner.experiment_name")}
    return [check_topology(cfg, config_path, placement, required=True, name="resolved placement",
                           wants=f"requested in {source}:"),
            check_topology(cfg, config_path, outputs, required=True, name="resolved outputs",
                           wants=f"requested in {source}:")]


def checks(spec: Spec, run_dir: Path, where: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    checks = []
    target = target_steps(spec)
    logs = [Path(where["main_log"])] + log_files(run_dir, [Path(where["log_dir"])])
    limits = [int(n) for p in dict.fromkeys(logs) if p.is_file() for n in re.findall(STEP, log_text(p))]
    if not limits:
        checks.append(check("step target", False, f"no 'Step limit given by max_steps=N reached' in "
                                                   f"{where['main_log']} or the run's logs"))
    else:
        checks.append(check_step_target(max(limits), target, "step-limit line"))
    steps = target or (max(limits) if limits else None)
    facts.update(steps=max(limits, default=None), target_steps=target)

    tb_check, scalars = tensorboard_check(Path(where["tensorboard"]), TAGS)
    checks.append(tb_check)
    lr = scalars.get(TAGS["lr"], [])
    checks.append(check_lr(lr, TAGS["lr"]))
    facts["metrics"] = {tag: points[-1][1] for tag, points in scalars.items()
                        if tag in TAGS.values() and points}

    config_path = Path(where["resolved_config"])
    cfg = read_yaml(config_path) if config_path.is_file() else None
    expected = {"cluster.num_nodes": spec.cluster.nodes}
    if target:
        expected["runner.max_steps"] = target
    checks.append(check_topology(cfg, config_path, expected, required=True))
    checks += check_request(spec, cfg, config_path, Path(where["requested_config"]))

    ckpt_dir = Path(where["ckpt_dir"])
    if steps is None:
        saved = [int(m.group(1)) for p in ckpt_dir.glob("global_step_*")
                 if (m := re.fullmatch(r"global_step_(\d+)", p.name))]
        steps = max(saved, default=0)
    step_dir = ckpt_dir / f"global_step_{steps}"
    cluster = spec.cluster
    # Without a readable placement: one actor rank per GPU is unknowable; demand at least 2 when the
    # cluster has them, as the two-worker preset does.
    ranks = placement_ranks(dotted.get(cfg, "cluster.component_placement", None) if cfg else None) or \
        (2 if cluster.nodes * cluster.gpus_per_node >= 2 else 1)
    checks.append(check_distcp(step_dir / "actor" / "dcp_checkpoint", ranks))
    data = step_dir / "data" / "data.pt"
    checks.append(check("dataloader state", nonempty(data),
                        f"{data} " + ("present" if nonempty(data) else "missing or empty")))
    facts["checkpoint"] = str(step_dir)
    return checks

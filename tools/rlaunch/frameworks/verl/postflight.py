"""Where verl 0.9 writes, and postflight's checks of it: step target (its file logger, else its console
lines), finite reward/pg_loss/grad_norm, lr > 0, FSDP checkpoint shards for every rank of the world size,
data.pt, latest_checkpointed_iteration.txt, and the resolved topology when Hydra's config is there.

- The `file` logger writes one JSON line per step, {"step": N, "data": {...}}, to $VERL_FILE_LOGGER_PATH
  (the adapter sets it to <run_dir>/logs/metrics.jsonl); the console logger prints
  "step:N - key:value - ...".
- Checkpoints under trainer.default_local_dir (rlaunch: <run_dir>/checkpoints):
  global_step_N/actor/{model,optim,extra_state}_world_size_W_rank_R.pt, global_step_N/data.pt,
  latest_checkpointed_iteration.txt.

--path keys: metrics, ckpt_dir, resolved_config.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import topology
from rlaunch.config.command import trainer_pool
from rlaunch.job import attempts, layouts
from rlaunch.job.files import is_finite, log_text, nonempty, read_jsonl, read_yaml
from rlaunch.job.layouts import log_files, relocate
from rlaunch.verify.postflight import check_lr, check_series, check_step_target, check_topology, target_steps
from rlaunch.verify.report import check

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

METRICS = "logs/metrics.jsonl"  # the adapter exports VERL_FILE_LOGGER_PATH=<run_dir>/this
LATEST = "latest_checkpointed_iteration.txt"
SHARD_KINDS = ("model", "optim", "extra_state")
# verl metric -> accepted names (the first one logged is used).
METRIC_NAMES = {
    "reward": ("critic/score/mean", "critic/rewards/mean", "reward"),
    "loss": ("actor/pg_loss",),
    "grad_norm": ("actor/grad_norm",),
    "lr": ("actor/lr",),
}


def layout(spec: Spec, run_dir: Path) -> dict[str, Path | str]:
    run_dir = Path(run_dir)
    return {"metrics": run_dir / METRICS, "ckpt_dir": relocate(spec, "ckpt_dir", run_dir, "checkpoints"),
            "resolved_config": run_dir / "hydra" / ".hydra" / "config.yaml"}


def rewards(where: dict[str, Any], run_dir: Path) -> list[tuple[int, float]]:
    rows, _ = verl_rows(where, run_dir)
    points = []
    for step, data in rows:
        key = next((k for k in METRIC_NAMES["reward"] if k in data), None)
        if key is not None:
            points.append((step, data[key]))
    return points


CONSOLE_STEP = re.compile(r"\bstep:(\d+) - (.*)$")


def _console_rows(files: list[Path]) -> list[tuple[int, dict[str, Any]]]:
    """verl's console logger: 'step:N - key:value - key:value' (pprint of each number)."""
    rows = []
    for path in files:
        for line in log_text(path).splitlines():
            match = CONSOLE_STEP.search(line)
            if not match:
                continue
            data = {}
            for item in match.group(2).split(" - "):
                key, sep, value = item.strip().rpartition(":")
                if sep:
                    try:
                        data[key] = float(value)
                    except ValueError:
                        continue
            rows.append((int(match.group(1)), data))
    return rows


def verl_rows(where: dict[str, Any], run_dir: Path) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    metrics = Path(where["metrics"])
    if metrics.is_file():
        raw, _ = read_jsonl(metrics)
        rows = [(r["step"], r.get("data") or {}) for r in raw if isinstance(r.get("step"), int)]
        if rows:
            return rows, str(metrics)
    return _console_rows(log_files(run_dir, [Path(where["log_dir"])])), "console 'step:N' lines"


def check_shards(step_dir: Path, role: str, expected_world: int | None) -> dict[str, Any]:
    """verl FSDP: {model,optim,extra_state}_world_size_W_rank_R.pt for every rank R < W."""
    name = f"{role} checkpoint shards"
    role_dir = step_dir / role
    pattern = re.compile(r"model_world_size_(\d+)_rank_(\d+)\.pt$")
    found = [pattern.match(p.name) for p in role_dir.glob("model_world_size_*_rank_*.pt")] if role_dir.is_dir() else []
    worlds = sorted({int(m.group(1)) for m in found if m})
    if not worlds:
        return check(name, False, f"no model_world_size_*_rank_*.pt in {role_dir}")
    if len(worlds) > 1:
        return check(name, False, f"mixed world sizes {worlds} in {role_dir}")
    world = worlds[0]
    if expected_world and world != expected_world:
        return check(name, False, f"world size {world} in {role_dir}, spec wants {expected_world} "
                                  "(nodes x gpus_per_node)")
    for rank in range(world):
        for kind in SHARD_KINDS:
            shard = role_dir / f"{kind}_world_size_{world}_rank_{rank}.pt"
            if not nonempty(shard):
                return check(name, False, f"rank {rank} of {world}: {shard.name} missing or empty "
                                          f"in {role_dir}")
    return check(name, True, f"all {world} ranks x {len(SHARD_KINDS)} files in {role_dir}")


def check_resumed(run_dir: Path, rows: list[tuple[int, dict[str, Any]]]) -> dict[str, Any] | None:
    """A restarted attempt that found a checkpoint (attempts.jsonl's resume_step) continued from it:
    its first logged step is the one after (verl's file logger starts its file again on each start).
    None for a run that started at step 0."""
    records = attempts.read(Path(run_dir))
    last = attempts.summary(records)["attempts"][-1] if records else {}
    resume = last.get("resume_step") or 0
    if not resume:
        return None
    first = min((s for s, _ in rows), default=None)
    ok = first == resume + 1
    return check("resumed from checkpoint", ok,
                 f"attempt {last['attempt']} continued at step {first}, after step {resume}'s checkpoint" if ok
                 else f"attempt {last['attempt']} found step {resume}'s checkpoint, but verl's metrics begin "
                      f"at step {first}: it did not resume from it (trainer.resume_mode?)")


def checks(spec: Spec, run_dir: Path, where: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    rows, source = verl_rows(where, run_dir)
    checks = [check("metrics", bool(rows), f"{len(rows)} steps from {source}" if rows else
                    f"no step metrics in {where['metrics']} nor 'step:N' lines in the logs")]
    if rows:
        keys = {}
        for name, aliases in METRIC_NAMES.items():
            result, keys[name] = check_series(name, rows, aliases)
            checks.append(result)
        lr_key = keys["lr"] or METRIC_NAMES["lr"][0]
        checks.append(check_lr([(s, d[lr_key]) for s, d in rows if is_finite(d.get(lr_key))], lr_key))
    target = target_steps(spec)
    last = max((s for s, _ in rows), default=None)
    checks.append(check_step_target(last, target, source))
    resumed = check_resumed(run_dir, rows)
    if resumed:
        checks.append(resumed)
    facts.update(steps=last, target_steps=target, metrics_source=source)

    ckpt_dir = Path(where["ckpt_dir"])
    latest_file = ckpt_dir / LATEST
    latest = latest_file.read_text().strip() if latest_file.is_file() else None
    # The checkpoint of the last step: the target, else the last logged step, else what verl says.
    want = target or last or (int(latest) if latest and latest.isdigit() else None)
    checks.append(check("latest checkpoint", latest is not None and latest == str(want),
                        f"{latest_file.name} says {latest}, expected {want}" if latest is not None
                        else f"{latest_file} missing"))
    step_dir = ckpt_dir / f"global_step_{want}"
    cluster = spec.cluster
    # REHEARSE=1: the GPUs each CPU node declares to Ray; one-step-off, fully-async: the trainer's pool
    nodes, gpus = trainer_pool(spec) or (cluster.nodes, topology.gpus_per_node(spec))
    world = nodes * gpus if gpus > 0 else None
    checks.append(check_shards(step_dir, "actor", world))
    if spec.algo.adv_estimator == "gae" or (step_dir / "critic").is_dir():
        checks.append(check_shards(step_dir, "critic", world))
    checks.append(check("dataloader state", nonempty(step_dir / "data.pt"),
                        f"{step_dir / 'data.pt'} " + ("present" if nonempty(step_dir / "data.pt")
                                                       else "missing or empty")))
    facts["checkpoint"] = str(step_dir)
    config_path = Path(where["resolved_config"])
    expected = {"trainer.nnodes": nodes, "trainer.n_gpus_per_node": gpus}
    checks.append(check_topology(read_yaml(config_path) if config_path.is_file() else None,
                                 config_path, expected, required=False))
    return checks


def smoke(spec: Spec, run_dir: Path) -> dict[str, Any]:
    """SMOKE=1's numbers (rlaunch.verify.smoke): the file logger's timing_s/step after step 1 and
    perf/max_memory_reserved_gb (rank 0's node); the wall time is the steps' sum."""
    rows = [r for _, r in verl_rows(layouts.resolve(spec, run_dir), run_dir)[0]]
    steps = [r["timing_s/step"] for r in rows[1:] if isinstance(r.get("timing_s/step"), (int, float))]
    peak = max((r["perf/max_memory_reserved_gb"] for r in rows
                if isinstance(r.get("perf/max_memory_reserved_gb"), (int, float))), default=None)
    return {"steps": len(rows), "s_per_step": sum(steps) / len(steps) if steps else None,
            "peak_memory": {"rank 0's node": {"gpu_mb": round(peak * 1024, 1)}} if peak is not None else {},
            "duration_s": sum(r.get("timing_s/step") or 0 for r in rows) or None}

"""Where the TRL rehearsal writes and postflight's checks of it. The names are the trainer's
(rlaunch.rehearsal.layout, beside the code that writes them; rehearsal sits below frameworks); `layout`
maps postflight's keys onto them.

The checks: step target, one metrics history (each step once, across attempts), finite metrics,
lr > 0, TensorBoard, a complete HF checkpoint, learning (mean reward of the last 10% of steps against
the first 10%), the greedy score (a smoke run: validation and a checkpoint save + reload at step 1
instead of those two), one Ray Train worker per node.

--path keys: metrics, tensorboard, checkpoint, eval, plot, summary (all in the run directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.rehearsal.layout import (EVAL, FINAL_CHECKPOINT, METRICS, PLOT, RELOAD, STEP1_CHECKPOINT, SUMMARY,
                                      TENSORBOARD, VALIDATION)
from rlaunch.job.files import head_bytes, is_finite, read_json, read_jsonl
from rlaunch.verify.postflight import (PNG_MAGIC, check_lr, check_series, check_step_target, hf_checkpoint_problems,
                                       target_steps, tensorboard_check, thresholds)
from rlaunch.verify.report import check

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec


def layout(spec: Spec, run_dir: Path) -> dict[str, Path | str]:
    keys = {"metrics": METRICS, "tensorboard": TENSORBOARD, "checkpoint": FINAL_CHECKPOINT,
            "eval": EVAL, "plot": PLOT, "summary": SUMMARY}
    return {key: Path(run_dir) / rel for key, rel in keys.items()}


def rewards(where: dict[str, Any], run_dir: Path) -> list[tuple[int, float]]:
    """(step, reward) from metrics.jsonl, what compare draws."""
    rows, _ = read_jsonl(Path(where["metrics"])) if Path(where["metrics"]).is_file() else ([], 0)
    return [(r["step"], r["reward"]) for r in rows
            if isinstance(r.get("step"), int) and isinstance(r.get("reward"), (int, float))]


def checks(spec: Spec, run_dir: Path, where: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    checks = []
    metrics = Path(where["metrics"])
    raw, bad = read_jsonl(metrics) if metrics.is_file() else ([], 0)
    steps = [r.get("step") for r in raw]
    twice = sorted({s for s in steps if isinstance(s, int) and steps.count(s) > 1})
    rows: list[tuple[Any, dict[str, Any]]] = [(r.get("step"), r) for r in raw]
    if not rows:
        checks.append(check("metrics", False, f"{metrics} missing or empty"))
    elif bad:
        checks.append(check("metrics", False, f"{metrics}: {bad} line(s) are not JSON"))
    elif twice or steps != sorted(steps, key=lambda s: s if isinstance(s, int) else -1):
        # One history across attempts: a resumed attempt continues after its checkpoint.
        what = f"step {twice[0]} logged {steps.count(twice[0])} times" if twice else "steps out of order"
        checks.append(check("metrics", False, f"{metrics.name}: {what}: one history is expected, "
                                              "a resumed attempt continues after its checkpoint"))
    else:
        checks.append(check("metrics", True, f"{len(rows)} steps in {metrics.name}, each once"))
    if rows:
        checks += [check_series(name, rows, (name,))[0] for name in ("reward", "loss", "grad_norm", "lr")]
        checks.append(check_lr([(s, r["lr"]) for s, r in rows if is_finite(r.get("lr"))], "lr"))

    summary = read_json(Path(where["summary"]))
    target = target_steps(spec) or (summary or {}).get("target_steps")
    last = max((s for s, _ in rows if isinstance(s, int)), default=None)
    checks.append(check_step_target(last, target, metrics.name))
    facts.update(steps=last, target_steps=target)

    checks.append(tensorboard_check(Path(where["tensorboard"]))[0])
    problems = hf_checkpoint_problems(Path(where["checkpoint"]), tokenizer=True)
    checks.append(check("checkpoint", not problems,
                        "; ".join(problems) if problems else f"complete: {where['checkpoint']}"))
    if spec.train.smoke:
        # A few steps learn nothing to speak of: the smoke run proves validation and checkpoint
        # save + reload at step 1 instead of the learning thresholds.
        checks += _check_smoke_step1(run_dir, facts)
    else:
        checks.append(_check_learned(spec, [r.get("reward") for _, r in rows], facts))
        checks.append(_check_greedy(spec, Path(where["eval"]), facts))
    checks.append(_check_workers(summary, Path(where["summary"]), facts))
    plot = Path(where["plot"])
    is_png = plot.is_file() and head_bytes(plot, len(PNG_MAGIC)) == PNG_MAGIC
    checks.append(check("reward plot", is_png, f"{plot} {'is a PNG' if is_png else 'missing or not a PNG'}"))
    return checks


def _check_smoke_step1(run_dir: Path, facts: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    validation = read_json(run_dir / VALIDATION) or {}
    ok = bool(validation) and validation.get("step") == 1 and isinstance(validation.get("greedy_total"), int) \
        and validation["greedy_total"] > 0
    out.append(check("validation at step 1", ok,
                     f"greedy {validation['greedy_correct']}/{validation['greedy_total']} on the held-out prompts, "
                     f"from the step-1 checkpoint" if ok else f"{run_dir / VALIDATION} missing or incomplete"))
    reload = read_json(run_dir / RELOAD)
    problems = hf_checkpoint_problems(run_dir / STEP1_CHECKPOINT, tokenizer=True)
    if reload is None:
        problems.append(f"{run_dir / RELOAD} missing")
    else:
        if reload.get("differ") or reload.get("missing"):
            problems.append(f"reloaded tensors differ from the live ones: {(reload.get('differ') or reload['missing'])[:3]}")
        if not reload.get("optimizer_states"):
            problems.append("no optimizer state reloaded")
        facts.update(step1_save_s=reload.get("save_s"), step1_reload_s=reload.get("reload_s"))
    out.append(check("checkpoint reload at step 1", not problems, "; ".join(problems) if problems or reload is None else
                     f"{reload['tensors']} tensors and {reload['optimizer_states']} optimizer states saved and "
                     f"reloaded on every rank, identical ({reload['save_s']} s + {reload['reload_s']} s)"))
    return out


def _check_learned(spec: Spec, rewards: list[Any], facts: dict[str, Any]) -> dict[str, Any]:
    values = [r for r in rewards if is_finite(r)]
    if len(values) < 2:
        return check("learned", False, f"{len(values)} finite reward value(s); need at least 2")
    tenth = max(1, len(values) // 10)
    first, last = sum(values[:tenth]) / tenth, sum(values[-tenth:]) / tenth
    limits = thresholds(spec)
    facts.update(reward_first=first, reward_last=last)
    ok = last >= limits["reward_last_min"] and last - first >= limits["reward_gain_min"]
    return check("learned", ok,
                 f"mean reward first 10% {first:.3f} -> last 10% {last:.3f} (needs last >= "
                 f"{limits['reward_last_min']} and a gain >= {limits['reward_gain_min']})")


def _check_greedy(spec: Spec, path: Path, facts: dict[str, Any]) -> dict[str, Any]:
    result = read_json(path)
    if result is None:
        return check("greedy eval", False, f"{path} missing or not JSON")
    correct, total = result.get("greedy_correct"), result.get("greedy_total")
    if not (isinstance(correct, int) and isinstance(total, int) and total > 0):
        return check("greedy eval", False, f"{path}: greedy_correct/greedy_total missing ({correct}/{total})")
    need = thresholds(spec)["greedy_min"]
    facts.update(greedy_correct=correct, greedy_total=total)
    return check("greedy eval", correct / total >= need,
                 f"greedy {correct}/{total} on held-out prompts (needs >= {need:.0%})")


def _check_workers(summary: dict[str, Any] | None, path: Path, facts: dict[str, Any]) -> dict[str, Any]:
    if summary is None:
        return check("workers on distinct nodes", False, f"{path} missing or not JSON")
    workers, nodes = summary.get("num_workers"), summary.get("worker_nodes") or []
    facts.update(num_workers=workers, worker_nodes=nodes)
    if not isinstance(workers, int) or len(nodes) != workers:
        return check("workers on distinct nodes", False,
                     f"num_workers={workers} but {len(nodes)} worker node(s) recorded in {path.name}")
    if workers > 1 and len(set(nodes)) < workers:
        shared = sorted({n for n in nodes if nodes.count(n) > 1})
        return check("workers on distinct nodes", False,
                     f"{workers} workers on {len(set(nodes))} node(s); shared: {', '.join(shared)}")
    return check("workers on distinct nodes", True, f"{workers} worker(s) on {', '.join(nodes)}")


def smoke(spec: Spec, run_dir: Path) -> dict[str, Any]:
    """SMOKE=1's numbers (rlaunch.verify.smoke), as the trainer's train_summary.json records them:
    duration_s, s_per_step (from the end of step 1, which a smoke run spends saving, reloading and
    validating), peak_memory per node (RSS; CUDA reserved on GPU)."""
    summary = read_json(Path(run_dir) / SUMMARY) or {}
    return {k: summary.get(k) for k in ("steps", "s_per_step", "peak_memory", "duration_s")}

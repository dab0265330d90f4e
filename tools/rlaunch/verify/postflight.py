"""Postflight: prove from a run's own outputs that it trained, for every framework.

A platform's "succeeded" proves nothing: postflight reads what the framework wrote (logs, metrics,
TensorBoard, checkpoints, the resolved config) and checks, for spec["framework"]["name"]:
  common  no fatal markers in the logs (traceback, CUDA OOM, RayTaskError, ActorDiedError,
          ActorUnavailableError, NCCL error) and exit code 0;
  trl     step target, finite metrics, lr > 0, TensorBoard, a complete HF checkpoint, learning (mean
          reward of the last 10% of steps >= 0.9 and >= 0.5 above the first 10%), greedy score >= 9/10,
          one Ray Train worker per node;
  verl    step target (file logger or console), finite reward/pg_loss/grad_norm, lr > 0, checkpoint
          shards for every rank of the world size, data.pt, latest_checkpointed_iteration.txt, the
          resolved topology (when a resolved config is present);
  areal   step markers in main.log, the HF checkpoint of the last step, the resolved topology;
  rlinf   the step-limit line, TensorBoard reward/loss/grad norm/lr finite and lr > 0, DCP
          .metadata and one *.distcp per actor rank plus data/data.pt, the resolved topology, and
          the resolved placement, output_dir and experiment_name equal to the requested ones (the
          rendered config the job keeps in <run_dir>/plan/).
Where each framework writes is documented in rlaunch.verify.layouts.

Usage:
  python -m rlaunch.verify.postflight --run-dir DIR [--spec SPEC.json] [--exit-code N]
                                      [--out REPORT.json] [--path KEY=VALUE ...]
  --spec       default: DIR/spec.json (as every launch renders it)
  --exit-code  the framework's exit code; default: the number in DIR/logs/exit_code (as the job
               scripts record it) or DIR/exit_code, if one exists
  --out        default: DIR/verification.json
  --path       override one location (see rlaunch.verify.layouts), e.g. ckpt_dir=/data/ckpt
Thresholds (spec key `verify`, when present; defaults in THRESHOLDS): reward_last_min,
reward_gain_min, greedy_min.
Exit: 0 passed, 1 a check failed (the last stderr line names it), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from . import layouts
from .report import (EXIT_FAILED, EXIT_USAGE, UsageError, all_passed, check, checks_table,
                     failure_line, first_failure, load_spec, skipped, write_json)

PROG = "postflight"
THRESHOLDS = {"reward_last_min": 0.9, "reward_gain_min": 0.5, "greedy_min": 0.9}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# ---------------------------------------------------------------- small readers


def _is_finite(value) -> bool:
    # orjson (verl's file logger) writes NaN as null: a missing value is not a finite one.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _read_jsonl(path: Path) -> tuple[list[dict], int]:
    """Rows of a JSON-lines file and the count of lines that did not parse."""
    rows, bad = [], 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _read_yaml(path: Path) -> dict | None:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _dig(tree: dict, dotted: str):
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _text(path: Path) -> str:
    return ANSI.sub("", Path(path).read_text(encoding="utf-8", errors="replace"))


def _head(path: Path, n: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def read_scalars(root: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar under a TensorBoard directory (all event dirs merged): tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for event_dir in sorted({p.parent for p in Path(root).rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(event_dir), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    for points in out.values():
        points.sort()
    return out


def safetensors_problem(path: Path) -> str | None:
    """None if the file's header parses and its tensors fit the file exactly (not truncated)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return f"{path.name}: shorter than a safetensors header"
            size = int.from_bytes(raw, "little")
            if size > 100 * 2**20:
                return f"{path.name}: header length {size} is not plausible"
            header = json.loads(fh.read(size))
    except (OSError, ValueError) as err:
        return f"{path.name}: unreadable safetensors header ({err.__class__.__name__})"
    ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
    expected = 8 + size + max(ends, default=0)
    actual = Path(path).stat().st_size
    if actual != expected:
        return f"{path.name}: {actual} bytes, its header says {expected} (truncated or corrupt)"
    return None


def hf_checkpoint_problems(ckpt: Path, tokenizer: bool) -> list[str]:
    """What is missing from a Hugging Face model directory: config, weights, tokenizer files."""
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        return [f"{ckpt} does not exist"]
    problems = []
    if _read_json(ckpt / "config.json") is None:
        problems.append("config.json missing or not JSON")
    index = ckpt / "model.safetensors.index.json"
    if index.exists():
        weight_map = (_read_json(index) or {}).get("weight_map", {})
        shards = sorted({ckpt / name for name in weight_map.values()})
        if not shards:
            problems.append(f"{index.name} lists no shards")
    else:
        shards = sorted(ckpt.glob("*.safetensors"))
        if not shards:
            problems.append("no *.safetensors weights")
    for shard in shards:
        problem = "missing" if not shard.exists() else safetensors_problem(shard)
        if problem:
            problems.append(problem if problem != "missing" else f"{shard.name} missing")
    if tokenizer:
        problems += [f"{n} missing or empty" for n in ("tokenizer.json", "tokenizer_config.json")
                     if not _nonempty(ckpt / n)]
    return problems


# ---------------------------------------------------------------- shared checks


def _target_steps(spec: dict) -> int | None:
    train = spec.get("train", {})
    steps = train.get("smoke_steps", 0) if train.get("smoke") else train.get("steps", 0)
    return steps if isinstance(steps, int) and steps > 0 else None


def _thresholds(spec: dict) -> dict:
    return {**THRESHOLDS, **(spec.get("verify") or {})}


RAY_FORWARDED = re.compile(r"^\(\w+ pid=\d+")


def check_exit_code(exit_code: int | None, run_dir: Path, log_dir: Path) -> dict:
    if exit_code is None:
        # The job scripts record the framework's exit code in <run_dir>/logs/exit_code.
        recorded = next((p for p in (Path(log_dir) / "exit_code", Path(run_dir) / "exit_code") if p.is_file()), None)
        if recorded is None:
            return skipped("exit code", "not given (--exit-code) and no logs/exit_code in the run dir")
        try:
            exit_code = int(recorded.read_text().strip())
        except ValueError:
            return check("exit code", False, f"{recorded} does not hold an integer")
    return check("exit code", exit_code == 0, f"framework exited with {exit_code}")


def check_logs(run_dir: Path, extra_dirs: list[Path]) -> dict:
    """The first fatal marker in any log, by file and line; a clean log is evidence, not proof."""
    files = layouts.log_files(run_dir, extra_dirs)
    forwarded = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                for label, marker in layouts.FATAL_MARKERS.items():
                    if marker not in line:
                        continue
                    # Ray forwards every actor's stderr, "(Name pid=N)"-prefixed; a traceback there
                    # that Ray logged and handled (e.g. a timed-out autoscaler request under load) did
                    # not fail the job. One that did also fails the driver: exit code and RayTaskError.
                    if label == "python traceback" and RAY_FORWARDED.match(ANSI.sub("", line)):
                        forwarded += 1
                        continue
                    return check("fatal log markers", False,
                                 f"{label} in {path}:{lineno}: {ANSI.sub('', line).strip()[:160]}")
    note = f"; {forwarded} handled traceback(s) forwarded from Ray actors" if forwarded else ""
    return check("fatal log markers", True, f"none in {len(files)} log file(s){note}")


def check_series(name: str, rows: list[tuple[int, dict]], aliases: tuple[str, ...]) -> tuple[dict, str | None]:
    """Every logged value of the first alias present is finite; returns (check, key used)."""
    key = next((a for a in aliases if any(a in data for _, data in rows)), None)
    if key is None:
        return check(f"metric {name}", False, f"none of {', '.join(aliases)} logged"), None
    values = [(step, data[key]) for step, data in rows if key in data]
    bad = next(((s, v) for s, v in values if not _is_finite(v)), None)
    if bad:
        return check(f"metric {name}", False, f"{key}={bad[1]} at step {bad[0]} is not finite"), key
    return check(f"metric {name}", True, f"{key}: {len(values)} finite values, last {values[-1][1]:.4g}"), key


def check_lr(values: list[tuple[int, float]], key: str) -> dict:
    """lr > 0: none negative and positive at some step (a linear schedule ends at exactly 0)."""
    if not values:
        return check("lr > 0", False, f"{key} not logged")
    negative = next(((s, v) for s, v in values if v < 0), None)
    if negative:
        return check("lr > 0", False, f"{key}={negative[1]} at step {negative[0]} is negative")
    peak = max(v for _, v in values)
    return check("lr > 0", peak > 0, f"{key} max {peak:.3g} over {len(values)} steps")


def check_step_target(last: int | None, target: int | None, source: str) -> dict:
    if last is None:
        return check("step target", False, f"no step recorded in {source}")
    if target is None:
        return check("step target", True, f"reached step {last} ({source}; no target: train.steps=0)")
    return check("step target", last >= target,
                 f"reached step {last} of {target} ({source})" if last >= target
                 else f"stopped at step {last} of {target} ({source})")


def _same(got, want) -> bool:
    """Equal as the framework reads them: scalars by their text (RLinf str()s every placement value,
    so rank 0 and "0" are one placement), mappings key by key."""
    if isinstance(want, dict):
        return isinstance(got, dict) and {str(k): str(v) for k, v in got.items()} == \
            {str(k): str(v) for k, v in want.items()}
    return got is not None and str(got) == str(want)


def check_topology(cfg: dict | None, path: Path, expected: dict[str, object], required: bool,
                   name: str = "resolved topology", wants: str = "spec wants") -> dict:
    """The resolved config asks for what the spec (or the rendered config) asked for."""
    if cfg is None:
        if required:
            return check(name, False, f"resolved config {path} missing or unreadable")
        return skipped(name, f"no resolved config at {path}")
    wrong, unresolved = [], []
    for key, want in expected.items():
        got = _dig(cfg, key)
        if isinstance(got, str) and "${" in got:
            unresolved.append(key)  # Hydra keeps interpolations in .hydra/config.yaml
        elif not _same(got, want):
            wrong.append(f"{key}={got} ({wants} {want})")
    if wrong:
        return check(name, False, f"{path}: " + "; ".join(wrong))
    note = f" ({', '.join(unresolved)} unresolved, not compared)" if unresolved else ""
    return check(name, True,
                 ", ".join(f"{k}={v}" for k, v in expected.items() if k not in unresolved) + note)


def check_tensorboard(scalars: dict, root: Path, required: dict[str, str] | None = None) -> dict:
    if not scalars:
        return check("tensorboard", False, f"no scalars in event files under {root}")
    missing = [tag for tag in (required or {}).values() if tag not in scalars]
    if missing:
        return check("tensorboard", False, f"tag(s) missing under {root}: {', '.join(missing)}")
    for tag, points in sorted(scalars.items()):
        bad = next(((s, v) for s, v in points if not math.isfinite(v)), None)
        if bad:
            return check("tensorboard", False, f"{tag}={bad[1]} at step {bad[0]} is not finite")
    return check("tensorboard", True, f"{len(scalars)} scalar tags, all finite")


def _tensorboard(root: Path, required: dict[str, str] | None = None) -> tuple[dict, dict]:
    root = Path(root)
    if not root.is_dir() or not any(root.rglob("events.out.tfevents.*")):
        return check("tensorboard", False, f"no event files under {root}"), {}
    scalars = read_scalars(root)
    return check_tensorboard(scalars, root, required), scalars


# ---------------------------------------------------------------- trl (the rehearsal)


def check_trl(spec: dict, run_dir: Path, where: dict, facts: dict) -> list[dict]:
    checks = []
    metrics = Path(where["metrics"])
    raw, bad = _read_jsonl(metrics) if metrics.is_file() else ([], 0)
    rows = [(r.get("step"), r) for r in raw]
    if not rows:
        checks.append(check("metrics", False, f"{metrics} missing or empty"))
    elif bad:
        checks.append(check("metrics", False, f"{metrics}: {bad} line(s) are not JSON"))
    else:
        checks.append(check("metrics", True, f"{len(rows)} steps in {metrics.name}"))
    if rows:
        checks += [check_series(name, rows, (name,))[0] for name in ("reward", "loss", "grad_norm", "lr")]
        checks.append(check_lr([(s, r["lr"]) for s, r in rows if _is_finite(r.get("lr"))], "lr"))

    summary = _read_json(Path(where["summary"]))
    target = _target_steps(spec) or (summary or {}).get("target_steps")
    last = max((s for s, _ in rows if isinstance(s, int)), default=None)
    checks.append(check_step_target(last, target, metrics.name))
    facts.update(steps=last, target_steps=target)

    checks.append(_tensorboard(Path(where["tensorboard"]))[0])
    problems = hf_checkpoint_problems(Path(where["checkpoint"]), tokenizer=True)
    checks.append(check("checkpoint", not problems,
                        "; ".join(problems) if problems else f"complete: {where['checkpoint']}"))
    if spec.get("train", {}).get("smoke"):
        # A few steps learn nothing to speak of: the smoke run proves validation and checkpoint
        # save + reload at step 1 instead of the learning thresholds.
        checks += _check_smoke_step1(run_dir, facts)
    else:
        checks.append(_check_learned(spec, [r.get("reward") for _, r in rows], facts))
        checks.append(_check_greedy(spec, Path(where["eval"]), facts))
    checks.append(_check_workers(summary, Path(where["summary"]), facts))
    plot = Path(where["plot"])
    is_png = plot.is_file() and _head(plot, len(PNG_MAGIC)) == PNG_MAGIC
    checks.append(check("reward plot", is_png, f"{plot} {'is a PNG' if is_png else 'missing or not a PNG'}"))
    return checks


def _check_smoke_step1(run_dir: Path, facts: dict) -> list[dict]:
    from ..rehearsal.train import RELOAD, STEP1_CHECKPOINT, VALIDATION

    out = []
    validation = _read_json(run_dir / VALIDATION)
    ok = bool(validation) and validation.get("step") == 1 and isinstance(validation.get("greedy_total"), int) \
        and validation["greedy_total"] > 0
    out.append(check("validation at step 1", ok,
                     f"greedy {validation['greedy_correct']}/{validation['greedy_total']} on the held-out prompts, "
                     f"from the step-1 checkpoint" if ok else f"{run_dir / VALIDATION} missing or incomplete"))
    reload = _read_json(run_dir / RELOAD)
    problems = hf_checkpoint_problems(run_dir / STEP1_CHECKPOINT, tokenizer=True)
    if reload is None:
        problems.append(f"{run_dir / RELOAD} missing")
    else:
        if reload.get("differ") or reload.get("missing"):
            problems.append(f"reloaded tensors differ from the live ones: {(reload.get('differ') or reload['missing'])[:3]}")
        if not reload.get("optimizer_states"):
            problems.append("no optimizer state reloaded")
        facts.update(step1_save_s=reload.get("save_s"), step1_reload_s=reload.get("reload_s"))
    out.append(check("checkpoint reload at step 1", not problems, "; ".join(problems) if problems else
                     f"{reload['tensors']} tensors and {reload['optimizer_states']} optimizer states saved and "
                     f"reloaded on every rank, identical ({reload['save_s']} s + {reload['reload_s']} s)"))
    return out


def _check_learned(spec: dict, rewards: list, facts: dict) -> dict:
    values = [r for r in rewards if _is_finite(r)]
    if len(values) < 2:
        return check("learned", False, f"{len(values)} finite reward value(s); need at least 2")
    tenth = max(1, len(values) // 10)
    first, last = sum(values[:tenth]) / tenth, sum(values[-tenth:]) / tenth
    limits = _thresholds(spec)
    facts.update(reward_first=first, reward_last=last)
    ok = last >= limits["reward_last_min"] and last - first >= limits["reward_gain_min"]
    return check("learned", ok,
                 f"mean reward first 10% {first:.3f} -> last 10% {last:.3f} (needs last >= "
                 f"{limits['reward_last_min']} and a gain >= {limits['reward_gain_min']})")


def _check_greedy(spec: dict, path: Path, facts: dict) -> dict:
    result = _read_json(path)
    if result is None:
        return check("greedy eval", False, f"{path} missing or not JSON")
    correct, total = result.get("greedy_correct"), result.get("greedy_total")
    if not (isinstance(correct, int) and isinstance(total, int) and total > 0):
        return check("greedy eval", False, f"{path}: greedy_correct/greedy_total missing ({correct}/{total})")
    need = _thresholds(spec)["greedy_min"]
    facts.update(greedy_correct=correct, greedy_total=total)
    return check("greedy eval", correct / total >= need,
                 f"greedy {correct}/{total} on held-out prompts (needs >= {need:.0%})")


def _check_workers(summary: dict | None, path: Path, facts: dict) -> dict:
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


# ---------------------------------------------------------------- verl


CONSOLE_STEP = re.compile(r"\bstep:(\d+) - (.*)$")


def _console_rows(files: list[Path]) -> list[tuple[int, dict]]:
    """verl's console logger: 'step:N - key:value - key:value' (pprint of each number)."""
    rows = []
    for path in files:
        for line in _text(path).splitlines():
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


def verl_rows(where: dict, run_dir: Path) -> tuple[list[tuple[int, dict]], str]:
    metrics = Path(where["metrics"])
    if metrics.is_file():
        raw, _ = _read_jsonl(metrics)
        rows = [(r["step"], r.get("data") or {}) for r in raw if isinstance(r.get("step"), int)]
        if rows:
            return rows, str(metrics)
    return _console_rows(layouts.log_files(run_dir, [Path(where["log_dir"])])), "console 'step:N' lines"


def check_shards(step_dir: Path, role: str, expected_world: int | None) -> dict:
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
        for kind in layouts.VERL_SHARD_KINDS:
            shard = role_dir / f"{kind}_world_size_{world}_rank_{rank}.pt"
            if not _nonempty(shard):
                return check(name, False, f"rank {rank} of {world}: {shard.name} missing or empty "
                                          f"in {role_dir}")
    return check(name, True, f"all {world} ranks x {len(layouts.VERL_SHARD_KINDS)} files in {role_dir}")


def check_verl(spec: dict, run_dir: Path, where: dict, facts: dict) -> list[dict]:
    rows, source = verl_rows(where, run_dir)
    checks = [check("metrics", bool(rows), f"{len(rows)} steps from {source}" if rows else
                    f"no step metrics in {where['metrics']} nor 'step:N' lines in the logs")]
    if rows:
        keys = {}
        for name, aliases in layouts.VERL_METRIC_NAMES.items():
            result, keys[name] = check_series(name, rows, aliases)
            checks.append(result)
        lr_key = keys["lr"] or layouts.VERL_METRIC_NAMES["lr"][0]
        checks.append(check_lr([(s, d[lr_key]) for s, d in rows if _is_finite(d.get(lr_key))], lr_key))
    target = _target_steps(spec)
    last = max((s for s, _ in rows), default=None)
    checks.append(check_step_target(last, target, source))
    facts.update(steps=last, target_steps=target, metrics_source=source)

    ckpt_dir = Path(where["ckpt_dir"])
    latest_file = ckpt_dir / layouts.VERL_LATEST
    latest = latest_file.read_text().strip() if latest_file.is_file() else None
    # The checkpoint of the last step: the target, else the last logged step, else what verl says.
    want = target or last or (int(latest) if latest and latest.isdigit() else None)
    checks.append(check("latest checkpoint", latest is not None and latest == str(want),
                        f"{latest_file.name} says {latest}, expected {want}" if latest is not None
                        else f"{latest_file} missing"))
    step_dir = ckpt_dir / f"global_step_{want}"
    cluster = spec["cluster"]
    world = cluster["nodes"] * cluster["gpus_per_node"] if cluster["gpus_per_node"] > 0 else None
    checks.append(check_shards(step_dir, "actor", world))
    if spec["algo"].get("adv_estimator") == "gae" or (step_dir / "critic").is_dir():
        checks.append(check_shards(step_dir, "critic", world))
    checks.append(check("dataloader state", _nonempty(step_dir / "data.pt"),
                        f"{step_dir / 'data.pt'} " + ("present" if _nonempty(step_dir / "data.pt")
                                                       else "missing or empty")))
    facts["checkpoint"] = str(step_dir)
    config_path = Path(where["resolved_config"])
    expected = {"trainer.nnodes": cluster["nodes"], "trainer.n_gpus_per_node": cluster["gpus_per_node"]}
    checks.append(check_topology(_read_yaml(config_path) if config_path.is_file() else None,
                                 config_path, expected, required=False))
    return checks


# ---------------------------------------------------------------- AReaL


def _areal_dir(fileroot: Path, kind: str, experiment: str, trial: str) -> Path | None:
    # {fileroot}/{kind}/{user}/{experiment}/{trial}: any user (the job's USER, not ours).
    found = sorted(Path(fileroot).glob(f"{kind}/*/{experiment}/{trial}"))
    return found[-1] if found else None


def check_areal(spec: dict, run_dir: Path, where: dict, facts: dict) -> list[dict]:
    fileroot, experiment, trial = Path(where["fileroot"]), where["experiment"], where["trial"]
    checks = []
    log_dir = _areal_dir(fileroot, "logs", experiment, trial)
    main_log = log_dir / "main.log" if log_dir else None
    target = _target_steps(spec)
    last = None
    if main_log is None or not main_log.is_file():
        checks.append(check("step target", False,
                            f"no {fileroot}/logs/<user>/{experiment}/{trial}/main.log"))
    else:
        steps = [(int(a), int(b)) for a, b in re.findall(layouts.AREAL_STEP, _text(main_log))]
        last = max((a for a, _ in steps), default=None)
        target = target or (steps[-1][1] if steps else None)
        checks.append(check_step_target(last, target, str(main_log)))
    facts.update(steps=last, target_steps=target)

    ckpt_root = _areal_dir(fileroot, "checkpoints", experiment, trial)
    saves = []
    if ckpt_root:
        for path in (ckpt_root / "default").glob("epoch*epochstep*globalstep*"):
            match = re.fullmatch(layouts.AREAL_CKPT, path.name)
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
    cfg = _read_yaml(config_path) if config_path.is_file() else None
    cluster = spec["cluster"]
    checks.append(check_topology(cfg, config_path, {"cluster.n_nodes": cluster["nodes"],
                                                    "cluster.n_gpus_per_node": cluster["gpus_per_node"]},
                                 required=False))
    tb = where["tensorboard"] or (_dig(cfg, "stats_logger.tensorboard.path") if cfg else None)
    if tb:
        checks.append(_tensorboard(Path(tb))[0])
    return checks


# ---------------------------------------------------------------- RLinf


def placement_ranks(placement) -> int | None:
    """How many ranks the actor gets in cluster.component_placement ("2-3" -> 2, "0-3,6" -> 5)."""
    if not isinstance(placement, dict):
        return None
    for key, value in placement.items():
        if "actor" not in str(key).split(","):
            continue
        if isinstance(value, dict):
            value = value.get("placement")
        ranks = set()
        for part in str(value).split(","):
            low, sep, high = part.strip().partition("-")
            if not low.isdigit() or (sep and not high.isdigit()):
                return None
            ranks.update(range(int(low), int(high if sep else low) + 1))
        return len(ranks) or None
    return None


def check_distcp(dcp_dir: Path, expected_ranks: int) -> dict:
    """torch.distributed.checkpoint: .metadata plus __R_T.distcp files covering every actor rank."""
    name = "actor checkpoint shards"
    if not _nonempty(dcp_dir / ".metadata"):
        return check(name, False, f"{dcp_dir / '.metadata'} missing or empty")
    shards = [p for p in dcp_dir.glob("*.distcp") if _nonempty(p)]
    ranks = {int(m.group(1)) for p in shards if (m := re.match(r"__(\d+)_\d+\.distcp$", p.name))}
    if len(shards) < expected_ranks:
        return check(name, False, f"{len(shards)} non-empty *.distcp in {dcp_dir}, expected one per "
                                  f"actor rank ({expected_ranks})")
    missing = [r for r in range(expected_ranks) if ranks and r not in ranks]
    if missing:
        return check(name, False, f"no shard for actor rank {missing[0]} in {dcp_dir}")
    return check(name, True, f"{len(shards)} *.distcp shards for {expected_ranks} actor ranks + .metadata")


def _rlinf_requested(spec: dict, requested_path: Path) -> tuple[dict | None, str]:
    """What the job asked RLinf for: the rendered config the job kept in plan/, else the adapter's
    config for this spec; (None, why) when neither can be had."""
    if requested_path.is_file():
        return _read_yaml(requested_path), str(requested_path)
    try:
        from ..frameworks import rlinf

        return rlinf.ADAPTER.config(spec), "the spec (no rendered config in the run's plan/)"
    except Exception as err:  # noqa: BLE001 - a copied run without its plan and a partial spec
        return None, f"no {requested_path} and the spec does not render ({type(err).__name__}: {err})"


def check_rlinf_request(spec: dict, cfg: dict | None, config_path: Path, requested_path: Path) -> list[dict]:
    """Placement, output_dir and experiment_name as resolved, against what the job requested."""
    requested, source = _rlinf_requested(spec, requested_path)
    if requested is None:
        return [check("resolved placement", False, f"requested placement unknown: {source}")]
    placement = {"cluster.component_placement": _dig(requested, "cluster.component_placement")}
    outputs = {key: _dig(requested, key) for key in ("runner.output_dir", "runner.experiment_name")}
    return [check_topology(cfg, config_path, placement, required=True, name="resolved placement",
                           wants=f"requested in {source}:"),
            check_topology(cfg, config_path, outputs, required=True, name="resolved outputs",
                           wants=f"requested in {source}:")]


def check_rlinf(spec: dict, run_dir: Path, where: dict, facts: dict) -> list[dict]:
    checks = []
    target = _target_steps(spec)
    logs = [Path(where["main_log"])] + layouts.log_files(run_dir, [Path(where["log_dir"])])
    limits = [int(n) for p in dict.fromkeys(logs) if p.is_file() for n in re.findall(layouts.RLINF_STEP, _text(p))]
    if not limits:
        checks.append(check("step target", False, f"no 'Step limit given by max_steps=N reached' in "
                                                   f"{where['main_log']} or the run's logs"))
    else:
        checks.append(check_step_target(max(limits), target, "step-limit line"))
    steps = target or (max(limits) if limits else None)
    facts.update(steps=max(limits, default=None), target_steps=target)

    tb_check, scalars = _tensorboard(Path(where["tensorboard"]), layouts.RLINF_TAGS)
    checks.append(tb_check)
    lr = scalars.get(layouts.RLINF_TAGS["lr"], [])
    checks.append(check_lr(lr, layouts.RLINF_TAGS["lr"]))
    facts["metrics"] = {tag: points[-1][1] for tag, points in scalars.items()
                        if tag in layouts.RLINF_TAGS.values() and points}

    config_path = Path(where["resolved_config"])
    cfg = _read_yaml(config_path) if config_path.is_file() else None
    expected = {"cluster.num_nodes": spec["cluster"]["nodes"]}
    if target:
        expected["runner.max_steps"] = target
    checks.append(check_topology(cfg, config_path, expected, required=True))
    checks += check_rlinf_request(spec, cfg, config_path, Path(where["requested_config"]))

    ckpt_dir = Path(where["ckpt_dir"])
    if steps is None:
        saved = [int(m.group(1)) for p in ckpt_dir.glob("global_step_*")
                 if (m := re.fullmatch(r"global_step_(\d+)", p.name))]
        steps = max(saved, default=0)
    step_dir = ckpt_dir / f"global_step_{steps}"
    cluster = spec["cluster"]
    # Without a readable placement: one actor rank per GPU is unknowable; demand at least 2 when the
    # cluster has them, as the two-worker preset does.
    ranks = placement_ranks(_dig(cfg, "cluster.component_placement") if cfg else None) or \
        (2 if cluster["nodes"] * cluster["gpus_per_node"] >= 2 else 1)
    checks.append(check_distcp(step_dir / "actor" / "dcp_checkpoint", ranks))
    data = step_dir / "data" / "data.pt"
    checks.append(check("dataloader state", _nonempty(data),
                        f"{data} " + ("present" if _nonempty(data) else "missing or empty")))
    facts["checkpoint"] = str(step_dir)
    return checks


FRAMEWORKS = {"trl": check_trl, "verl": check_verl, "areal": check_areal, "rlinf": check_rlinf}


# ---------------------------------------------------------------- entry points


def run(spec: dict, run_dir: Path, report_path: Path, *, exit_code: int | None,
        paths: dict[str, str] | None = None) -> dict:
    """Check a finished run's outputs; write and return the verification report."""
    name = spec["framework"]["name"]
    if name not in FRAMEWORKS:
        raise UsageError(f"framework.name={name!r}: postflight knows {', '.join(FRAMEWORKS)}")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: not a directory")
    where = layouts.resolve(spec, run_dir, paths)
    facts: dict = {}
    checks = [check_exit_code(exit_code, run_dir, Path(where["log_dir"])),
              check_logs(run_dir, [Path(where["log_dir"])])]
    checks += FRAMEWORKS[name](spec, run_dir, where, facts)
    report = {
        "passed": all_passed(checks),
        "framework": name,
        "run_dir": str(run_dir),
        "exit_code": exit_code,
        "checks": checks,
        "facts": facts,
        "paths": {k: str(v) for k, v in where.items()},
    }
    write_json(Path(report_path), report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("Usage:")[1])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--spec", type=Path)
    parser.add_argument("--exit-code", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--path", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec or args.run_dir / "spec.json")
        out = args.out or args.run_dir / "verification.json"
        report = run(spec, args.run_dir, out, exit_code=args.exit_code,
                     paths=layouts.parse_path_args(args.path))
    except UsageError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(checks_table(report["checks"]))
    failed = first_failure(report["checks"])
    if failed:
        print(failure_line(PROG, failed), file=sys.stderr)
        return EXIT_FAILED
    print(f"{PROG}: passed ({report['framework']}, {len(report['checks'])} checks); report {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

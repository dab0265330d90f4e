"""Postflight: prove from a run's own outputs that it trained, for every framework.

A platform's "succeeded" proves nothing: postflight reads what the framework wrote (logs, metrics,
TensorBoard, checkpoints, the resolved config) and checks, for every framework, that no node was lost
during the last attempt (rlaunch.job.nodewatch's record in attempts.jsonl: IP, rank, when Ray's GCS
declared it dead, why), that the storage is not full, that no log holds a fatal marker (traceback,
CUDA OOM, RayTaskError, ActorDiedError, ActorUnavailableError, NCCL error, no space left) and that
the exit code is 0; a resumed run's logs are read from its last attempt's mark on, and its earlier
attempts are facts (resumed from, steps lost, nodes lost). Then the framework's own checks
(frameworks/<name>/postflight.py: where it writes, and what proves it trained: step target, finite
metrics, one metrics history, complete checkpoints for every rank, ...). This module holds the
readers and checks they share.

Usage:
  python -m rlaunch.verify.postflight --run-dir DIR [--spec SPEC.json] [--exit-code N]
                                      [--out REPORT.json] [--path KEY=VALUE ...]
  --spec       default: DIR/spec.json (as every launch renders it)
  --exit-code  the framework's exit code; default: the number in DIR/logs/exit_code (as the job
               scripts record it) or DIR/exit_code, if one exists
  --out        default: DIR/verification.json
  --path       override one location (the keys are the framework's layout), e.g. ckpt_dir=/data/ckpt
Thresholds: the spec's `verify` (reward_last_min, reward_gain_min, greedy_min).
Exit: 0 passed, 1 a check failed (the last stderr line names it), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import dotted
from rlaunch.errors import UsageError
from rlaunch.job import attempts as _attempts
from rlaunch.job import layouts
from rlaunch.job.files import (  # noqa: F401 - the frameworks' checks read them from here too
    ANSI, head_bytes, is_finite, log_text, nonempty, read_json, read_jsonl, read_scalars, read_yaml,
    safetensors_problem)
from rlaunch.registry import frameworks
from rlaunch.verify.report import all_passed, check, load_spec, skipped, stage_main, write_json

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROG = "postflight"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def hf_checkpoint_problems(ckpt: Path, tokenizer: bool) -> list[str]:
    """What is missing from a Hugging Face model directory: config, weights, tokenizer files."""
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        return [f"{ckpt} does not exist"]
    problems = []
    if read_json(ckpt / "config.json") is None:
        problems.append("config.json missing or not JSON")
    index = ckpt / "model.safetensors.index.json"
    if index.exists():
        weight_map = (read_json(index) or {}).get("weight_map", {})
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
                     if not nonempty(ckpt / n)]
    return problems


# ---------------------------------------------------------------- shared checks


def target_steps(spec: Spec) -> int | None:
    steps = spec.train.smoke_steps if spec.train.smoke else spec.train.steps
    return steps if steps > 0 else None


def thresholds(spec: Spec) -> dict[str, float]:
    verify = spec.verify
    return {"reward_last_min": verify.reward_last_min, "reward_gain_min": verify.reward_gain_min,
            "greedy_min": verify.greedy_min}


RAY_FORWARDED = re.compile(r"^\(\w+ pid=\d+")


def check_exit_code(exit_code: int | None, run_dir: Path, log_dir: Path) -> dict[str, Any]:
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


def _since_last_attempt(lines: list[str]) -> tuple[int, int]:
    """(index of the line after the last attempt's mark, number of marks); (0, 0) in an unmarked log."""
    marks = [i for i, line in enumerate(lines) if ANSI.sub("", line).startswith(_attempts.MARK)]
    return (marks[-1], len(marks)) if marks else (0, 0)


def check_logs(run_dir: Path, extra_dirs: list[Path]) -> dict[str, Any]:
    """The first fatal marker in any log, by file and line; a clean log is evidence, not proof. In a
    log with attempt marks (job.log, train.log of a resumed run), only the last attempt counts: what
    ended the earlier ones is recorded in attempts.jsonl."""
    files = layouts.log_files(run_dir, extra_dirs)
    forwarded, earlier = 0, 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
        first, marks = _since_last_attempt(lines)
        earlier = max(earlier, marks - 1)
        for lineno, line in enumerate(lines[first:], first + 1):
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
    note += f"; read from the last attempt's mark on ({earlier} earlier attempt(s))" if earlier else ""
    return check("fatal log markers", True, f"none in {len(files)} log file(s){note}")


def check_nodes(run_dir: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """No node lost during the last attempt, as rlaunch.job.nodewatch recorded it from Ray's GCS."""
    records = _attempts.read(run_dir)
    if not records:
        return skipped("nodes stayed up", f"no {_attempts.FILE} (the job did not record its attempts)")
    history = _attempts.summary(records)["attempts"]
    facts["attempts"] = history
    last = history[-1]
    if last["nodes_lost"]:
        return check("nodes stayed up", False, "node lost: " + "; ".join(
            _attempts.describe_loss(loss) for loss in last["nodes_lost"]), node=last["nodes_lost"][0].get("ip"))
    earlier = [f"attempt {a['attempt']}: " + "; ".join(_attempts.describe_loss(x) for x in a["nodes_lost"])
               for a in history[:-1] if a["nodes_lost"]]
    resumed = "" if last.get("resume_step") in (None, 0) else f", resumed from step {last['resume_step']}"
    return check("nodes stayed up", True, f"attempt {last['attempt']}: every node stayed up{resumed}"
                 + (f" (earlier, {'; '.join(earlier)})" if earlier else ""))


def check_progress(run_dir: Path) -> dict[str, Any]:
    """No stall during the last attempt, as the stall watch (rlaunch.job.stall) recorded it: the step,
    the timeout and where its evidence (every node's stacks) is."""
    history = _attempts.summary(_attempts.read(run_dir))["attempts"]
    if not history:
        return skipped("progress", f"no {_attempts.FILE} (the job did not record its attempts)")
    last = history[-1]
    if last.get("stalled"):
        return check("progress", False, "stalled " + _attempts.describe_stall(last["stalled"]))
    seen = [r for r in _attempts.read(run_dir) if r.get("event") == "progress" and r.get("attempt") == last["attempt"]]
    if not seen:
        return check("progress", True, f"attempt {last['attempt']}: no stall")
    watch = seen[-1]
    closest = ""
    if watch.get("worst_gap_s"):
        closest = (f"; the gap nearest its timeout {watch['worst_gap_s']:.1f} s after step {watch.get('worst_at_step')} "
                   f"of {watch.get('worst_timeout_s'):.0f} s ({watch.get('margin')}x margin)")
    return check("progress", True, f"attempt {last['attempt']}: no stall in {watch.get('steps_seen')} steps "
                                   f"(median step {watch.get('median_step_s')} s){closest}")


STORAGE_FULL_BYTES = 1 << 20  # less than this free on the run directory's filesystem is full


def storage_full(path: Path) -> str | None:
    """`<mount> is full: N KiB free of M MiB` when the filesystem holding path is (nearly) full."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    if usage.free >= min(STORAGE_FULL_BYTES, usage.total // 100 + 1):
        return None
    mount = path.resolve()
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return (f"the storage at {mount} is full: {usage.free // 1024} KiB free of "
            f"{usage.total / 2**20:.1f} MiB")


def check_storage(run_dir: Path, exit_check: dict[str, Any]) -> dict[str, Any]:
    """After a failed run: was its filesystem full (a checkpoint that could not be written)? Full
    now, or full when the framework failed: it may have freed what it could not finish, and
    recorded so in attempts.jsonl (the rehearsal's trainer does)."""
    if exit_check["passed"]:
        return skipped("storage space", "the framework exited 0")
    full = storage_full(run_dir)
    if not full:
        records = _attempts.read(run_dir)
        attempt = _attempts.current(run_dir)
        full = next((r.get("detail") for r in reversed(records)
                     if r.get("event") == "storage_full" and r.get("attempt") == attempt), None)
    if full:
        return check("storage space", False, f"{full} (the run's checkpoints and logs could not all be written)")
    return check("storage space", True, "not full")


def check_series(name: str, rows: Sequence[tuple[Any, dict[str, Any]]],
                 aliases: tuple[str, ...]) -> tuple[dict[str, Any], str | None]:
    """Every logged value of the first alias present is finite; returns (check, key used)."""
    key = next((a for a in aliases if any(a in data for _, data in rows)), None)
    if key is None:
        return check(f"metric {name}", False, f"none of {', '.join(aliases)} logged"), None
    values = [(step, data[key]) for step, data in rows if key in data]
    bad = next(((s, v) for s, v in values if not is_finite(v)), None)
    if bad:
        return check(f"metric {name}", False, f"{key}={bad[1]} at step {bad[0]} is not finite"), key
    return check(f"metric {name}", True, f"{key}: {len(values)} finite values, last {values[-1][1]:.4g}"), key


def check_lr(values: Sequence[tuple[Any, Any]], key: str) -> dict[str, Any]:
    """lr > 0: none negative and positive at some step (a linear schedule ends at exactly 0)."""
    if not values:
        return check("lr > 0", False, f"{key} not logged")
    negative = next(((s, v) for s, v in values if v < 0), None)
    if negative:
        return check("lr > 0", False, f"{key}={negative[1]} at step {negative[0]} is negative")
    peak = max(v for _, v in values)
    return check("lr > 0", peak > 0, f"{key} max {peak:.3g} over {len(values)} steps")


def check_step_target(last: int | None, target: int | None, source: str) -> dict[str, Any]:
    if last is None:
        return check("step target", False, f"no step recorded in {source}")
    if target is None:
        return check("step target", True, f"reached step {last} ({source}; no target: train.steps=0)")
    return check("step target", last >= target,
                 f"reached step {last} of {target} ({source})" if last >= target
                 else f"stopped at step {last} of {target} ({source})")


def _same(got: object, want: object) -> bool:
    """Equal as the framework reads them: scalars by their text (RLinf str()s every placement value,
    so rank 0 and "0" are one placement), mappings key by key."""
    if isinstance(want, dict):
        return isinstance(got, dict) and {str(k): str(v) for k, v in got.items()} == \
            {str(k): str(v) for k, v in want.items()}
    return got is not None and str(got) == str(want)


def check_topology(cfg: dict[str, Any] | None, path: Path, expected: Mapping[str, object], required: bool,
                   name: str = "resolved topology", wants: str = "spec wants") -> dict[str, Any]:
    """The resolved config asks for what the spec (or the rendered config) asked for."""
    if cfg is None:
        if required:
            return check(name, False, f"resolved config {path} missing or unreadable")
        return skipped(name, f"no resolved config at {path}")
    wrong, unresolved = [], []
    for key, want in expected.items():
        got = dotted.get(cfg, key, None)
        if isinstance(got, str) and "${" in got:
            unresolved.append(key)  # Hydra keeps interpolations in .hydra/config.yaml
        elif not _same(got, want):
            wrong.append(f"{key}={got} ({wants} {want})")
    if wrong:
        return check(name, False, f"{path}: " + "; ".join(wrong))
    note = f" ({', '.join(unresolved)} unresolved, not compared)" if unresolved else ""
    return check(name, True,
                 ", ".join(f"{k}={v}" for k, v in expected.items() if k not in unresolved) + note)


def check_tensorboard(scalars: dict[str, Any], root: Path, required: dict[str, str] | None = None) -> dict[str, Any]:
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


def tensorboard_check(root: Path, required: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    root = Path(root)
    if not root.is_dir() or not any(root.rglob("events.out.tfevents.*")):
        return check("tensorboard", False, f"no event files under {root}"), {}
    scalars = read_scalars(root)
    return check_tensorboard(scalars, root, required), scalars


# ---------------------------------------------------------------- entry points


def run(spec: Spec, run_dir: Path, report_path: Path, *, exit_code: int | None,
        paths: dict[str, str] | None = None) -> dict[str, Any]:
    """Check a finished run's outputs; write and return the verification report."""
    name = spec.framework.name
    if name not in frameworks.names():
        raise UsageError(f"framework.name={name!r}: postflight knows {', '.join(frameworks.names())}")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: not a directory")
    where = layouts.resolve(spec, run_dir, paths)
    facts: dict[str, Any] = {}
    exit_check = check_exit_code(exit_code, run_dir, Path(where["log_dir"]))
    # What ended the run first: a lost node, a stall, then a full disk, then the framework's exit code.
    checks = [check_nodes(run_dir, facts), check_progress(run_dir), check_storage(run_dir, exit_check), exit_check,
              check_logs(run_dir, [Path(where["log_dir"])])]
    checks += frameworks.descriptor(name).postflight.checks(spec, run_dir, where, facts)
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
    def stage(args: argparse.Namespace) -> tuple[dict[str, Any] | None, list[str], str]:
        spec = load_spec(args.spec or args.run_dir / "spec.json")
        out = args.out or args.run_dir / "verification.json"
        report = run(spec, args.run_dir, out, exit_code=args.exit_code, paths=layouts.parse_path_args(args.path))
        return report, [], f"{PROG}: passed ({report['framework']}, {len(report['checks'])} checks); report {out}"

    return stage_main(PROG, __doc__, [(("--run-dir",), {"required": True, "type": Path}), (("--spec",), {"type": Path}),
                                      (("--exit-code",), {"type": int}), (("--out",), {"type": Path}),
                                      (("--path",), {"action": "append", "default": [], "metavar": "KEY=VALUE"})],
                      stage, argv)


if __name__ == "__main__":
    sys.exit(main())

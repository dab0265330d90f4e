"""Every start of a run is an attempt: a SkyPilot managed-job recovery, a RayJob retry, or
`make launch RUN_ID=<id> RESUME=1`. job.sh records each in <run_dir>/attempts.jsonl, one JSON object
per line, which postflight, the closing summary and the benchmarks read:

  {"event": "start", "attempt": 2, "at": ISO, "host": ..., "resume_step": 40, "checkpoint": PATH,
   "last_step_before": 47, "steps_lost": 7, "save_freq": 20, "skipped": [...], "quarantined": [...]}
  {"event": "node_lost", "attempt": 1, "ip": ..., "rank": 1, "node_id": ..., "declared_dead_at": ISO,
   "reason": ..., "detected_at": ISO}                                      (rlaunch.job.nodewatch)
  {"event": "stalled", "attempt": 1, "step": 100, "idle_s": 121.3, "median_step_s": 0.31, "timeout_s": 120,
   "timeout_from": "floor", "detected_at": ISO, "stacks": DIR, "nodes": 2, "processes": 5, ...}
                                                                           (rlaunch.job.nodewatch's stall watch)
  {"event": "progress", "attempt": 2, "steps_seen": ..., "median_step_s": ..., "longest_gap_s": ...,
   "timeout_then_s": ..., "margin": ...}    what the stall watch saw, when the framework exited
  {"event": "end", "attempt": 2, "at": ISO, "exit_code": 0}

`start` also prints the attempt's first line, which marks job.log and train.log: postflight reads the
logs from the last attempt's mark on (the failure that ended an earlier attempt is in this file).

Usage (job.sh runs these on the head):
  python -m rlaunch.job.attempts start --spec SPEC --run-dir DIR
  python -m rlaunch.job.attempts end --run-dir DIR --exit-code N
Exit: 0; 2 bad arguments.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import cmdline
from rlaunch.config import specjson
from rlaunch.job import checkpoints
from rlaunch.job.files import read_jsonl

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

FILE = "attempts.jsonl"
MARK = "rlaunch-job: attempt "  # the first line of every attempt in job.log and train.log
MARKED_LOGS = ("logs/job.log", "logs/train.log")


def now_iso(epoch: float | None = None) -> str:
    when = _dt.datetime.now(_dt.timezone.utc) if epoch is None else \
        _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of the run (a half-written last line is skipped)."""
    try:
        return read_jsonl(Path(run_dir) / FILE)[0]
    except OSError:
        return []


def append(run_dir: Path, record: dict[str, Any]) -> None:
    # One write of one line: appends from the head stay whole on shared storage.
    with open(Path(run_dir) / FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def current(run_dir: Path) -> int:
    """The attempt now running (the last `start`), 0 before the first."""
    return max((r.get("attempt", 0) for r in read(run_dir) if r.get("event") == "start"), default=0)


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per attempt: how it began (resumed from, steps lost), what ended it (exit code, nodes lost)."""
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        n = r.get("attempt")
        if not isinstance(n, int):
            continue
        entry = out.setdefault(n, {"attempt": n, "nodes_lost": []})
        if r.get("event") == "start":
            entry.update({k: r.get(k) for k in ("at", "resume_step", "steps_lost", "last_step_before",
                                                 "checkpoint")})
        elif r.get("event") == "node_lost":
            entry["nodes_lost"].append({k: r.get(k) for k in ("ip", "rank", "declared_dead_at", "reason",
                                                               "detected_at", "node_id")})
        elif r.get("event") == "stalled":
            entry["stalled"] = {k: r.get(k) for k in ("step", "idle_s", "median_step_s", "timeout_s", "timeout_from",
                                                       "detected_at", "stacks", "nodes", "processes", "error")}
        elif r.get("event") == "end":
            entry["exit_code"] = r.get("exit_code")
            entry["ended_at"] = r.get("at")
    return {"attempts": [out[k] for k in sorted(out)]}


def describe_loss(loss: dict[str, Any]) -> str:
    """`10.1.2.2 (rank 1), declared dead at 12:00:03Z by Ray's GCS: <reason>`."""
    rank = loss.get("rank")
    where = f"{loss.get('ip')} ({'rank ' + str(rank) if rank is not None else 'rank unknown'})"
    when = loss.get("declared_dead_at") or loss.get("detected_at")
    return f"{where}, {'declared dead at ' + when if when else 'lost'}: {loss.get('reason') or 'no reason given'}"


def describe_stall(stall: dict[str, Any]) -> str:
    """`at step 100: no step for 121 s (median step 0.31 s, timeout 120 s); stacks of 5 processes on
    2 nodes in DIR`."""
    median = stall.get("median_step_s")
    text = (f"at step {stall.get('step')}: no step for {stall.get('idle_s') or 0:.0f} s (median step "
            f"{'%.2f s' % median if median is not None else 'not known yet'}, timeout "
            f"{stall.get('timeout_s') or 0:.0f} s)")
    if stall.get("error"):
        return f"{text}; the evidence is incomplete ({stall['error']}): {stall.get('stacks')}"
    return f"{text}; stacks of {stall.get('processes')} processes on {stall.get('nodes')} nodes in {stall.get('stacks')}"


def start(spec: Spec, run_dir: Path) -> dict[str, Any]:
    """Record the attempt that starts now; print its mark (and append it to train.log)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    attempt = current(run_dir) + 1
    quarantined = checkpoints.quarantine(spec, run_dir) if attempt > 1 else []
    found, skipped = checkpoints.latest(spec, run_dir)
    before = checkpoints.last_logged_step(spec, run_dir) if attempt > 1 else None
    resume = found.step if found else 0
    record = {"event": "start", "attempt": attempt, "at": now_iso(), "host": socket.gethostname(),
              "resume_step": resume, "checkpoint": found.path if found else None,
              "last_step_before": before, "steps_lost": None if before is None else max(before - resume, 0),
              "save_freq": spec.train.save_freq, "skipped": skipped,
              "quarantined": quarantined}
    append(run_dir, record)
    if found:
        what = f"resuming from step {resume} ({found.path})"
        if record["steps_lost"]:
            what += f"; {record['steps_lost']} step(s) after it are done again"
    else:
        what = "no checkpoint: starting at step 0" + (f" ({before} step(s) logged before are lost)" if before else "")
    line = f"{MARK}{attempt} of run {spec.run.id}: {what}"
    print(line, flush=True)
    for note in quarantined:
        print(f"rlaunch-job: set aside an incomplete checkpoint: {note}", flush=True)
    log = run_dir / "logs" / "train.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return record


def end(run_dir: Path, exit_code: int) -> None:
    append(run_dir, {"event": "end", "attempt": current(run_dir), "at": now_iso(), "exit_code": exit_code})


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("rlaunch.job.attempts", __doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "end"))
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--spec", type=Path)
    parser.add_argument("--exit-code", type=int)
    args = parser.parse_args(argv)
    if args.action == "start":
        spec_path = args.spec or args.run_dir / "spec.json"
        try:
            spec = specjson.read(spec_path)
        except (OSError, ValueError) as err:
            print(f"rlaunch.job.attempts: --spec {spec_path}: {err}", file=sys.stderr)
            return 2
        start(spec, args.run_dir)
        return 0
    if args.exit_code is None:
        print("rlaunch.job.attempts: end needs --exit-code", file=sys.stderr)
        return 2
    end(args.run_dir, args.exit_code)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

"""Where a launch's seconds go. Each phase boundary is one JSON line in <run_dir>/phases.jsonl:

  {"event": "launch", "t": T, "started": T0, "plan": [T0, T1], "formation": [T2, T3], "submitted": T4}
      the launcher's own phases (RLAUNCH_LAUNCH_PHASES, passed in the job's env by a backend that
      forms the cluster itself: local), written by job.sh as the job starts
  {"phase": "job", "event": "start", "t": T}              job.sh's first line: one per attempt
  {"phase": "inputs" | "preflight" | "framework" | "postflight", "event": "start" | "end", "t": T}
  {"phase": "first_step", "event": "end", "t": T}         the framework's first metrics row (`first-step`)
  {"phase": "evaluation", "event": "start" | "end", "t": T}   written by a trainer that evaluates (TRL's)
  {"phase": "down", "event": "start" | "end", "t": T}     `make down` of a local run (its cluster taken down)
  {"phase": "inputs_gpu", "event": "check", "t": T, "s": S, "bytes": B, "what": "model"}
      a GPU node's check of one input before the job (SkyPilot's inputs-check.sh, rlaunch.job.data
      --phases): its seconds and the bytes it read to verify (0 when the stamp matched)

T is the epoch in seconds (job.sh takes bash's EPOCHREALTIME: no process is started for a mark).
`report` turns the last attempt's lines into seconds per phase, in order: plan, formation, job_start
(submit to the job's first line: the job's upload and the driver's start), inputs, preflight,
first_step (the framework's start to its first step), training, evaluation, framework_exit (after
the last step or evaluation, until the framework exited), postflight, down (local); and
to_first_step_s, from the launch's start (or the job's, without a launch record) to the first step;
and inputs_gpu_s and inputs_gpu_bytes, the GPU nodes' checks of the inputs before this attempt.
It adds them to verification.json as "phases" and prints one line; the closing summary reads them.

Usage (job.sh runs these on the head):
  python -m rlaunch.job.phases first-step --run-dir DIR --metrics FILE [--deadline-s S]
  python -m rlaunch.job.phases report --run-dir DIR
Exit: 0; 2 bad arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.job.files import read_jsonl

FILE = "phases.jsonl"
ENV = "RLAUNCH_LAUNCH_PHASES"  # the launcher's phases, as JSON, in the job's env
ORDER = ("plan", "formation", "job_start", "inputs", "preflight", "first_step", "training", "evaluation",
         "framework_exit", "postflight", "down")
POLL_S = 0.2  # first-step: how often the metrics file is looked at (a stat, nothing read)


def mark(run_dir: Path, phase: str, event: str, t: float | None = None) -> None:
    """One boundary, from Python (a trainer's evaluation, `make down`); job.sh writes the same line itself."""
    with open(Path(run_dir) / FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"phase": phase, "event": event, "t": round(time.time() if t is None else t, 3)}) + "\n")


def process_start() -> float:
    """This process's start, in epoch seconds (Linux's /proc; else now): where `make launch`'s own
    seconds begin, the interpreter's start and imports included."""
    try:
        # Field 22, the start in clock ticks after boot; /proc/uptime has the same 10 ms resolution.
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def launch_env(started: float, plan_end: float, formation: tuple[float, float] | None,
               submitted: float) -> str:
    """RLAUNCH_LAUNCH_PHASES for the job: the launcher's clock, as job.sh writes it into FILE."""
    entry = {"started": round(started, 3), "plan": [round(started, 3), round(plan_end, 3)],
             "submitted": round(submitted, 3)}
    if formation:
        entry["formation"] = [round(formation[0], 3), round(formation[1], 3)]
    return json.dumps(entry, separators=(",", ":"))


def last_attempt(records: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The launch record of the last attempt (None when it had none) and that attempt's marks.
    A launch record counts only if it is newer than every earlier attempt's marks: a retried RayJob
    or a managed job's recovery starts job.sh again with the same env."""
    starts = [i for i, r in enumerate(records) if r.get("phase") == "job" and r.get("event") == "start"]
    if not starts:
        return None, []
    begin = starts[-1]
    earlier = [r.get("t", 0) for r in records[:begin] if r.get("event") != "launch"]
    launch = next((r for r in reversed(records[:begin]) if r.get("event") == "launch"), None)
    if launch and earlier and launch.get("submitted", 0) <= max(earlier):
        launch = None
    return launch, records[begin:]


def gpu_checks(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPU nodes' input checks of the last attempt: after the previous attempt's last mark, before
    this attempt's job start (SkyPilot runs a task's setup, then its run)."""
    starts = [i for i, r in enumerate(records) if r.get("phase") == "job" and r.get("event") == "start"]
    before = records[:starts[-1]] if starts else records
    done = max((float(r.get("t", 0)) for r in before if r.get("phase") not in ("inputs_gpu", None)), default=0.0)
    return [r for r in before if r.get("phase") == "inputs_gpu" and float(r.get("t", 0)) > done]


def durations(records: list[dict[str, Any]]) -> dict[str, Any]:
    """{"phases": {name: seconds, in ORDER, only those measured}, "to_first_step_s", "total_s"[,
    "inputs_gpu_s", "inputs_gpu_bytes"]}."""
    launch, marks = last_attempt(records)
    if not marks:
        return {}
    checks = gpu_checks(records)
    gpu = {"inputs_gpu_s": round(sum(float(r.get("s", 0)) for r in checks), 2),
           "inputs_gpu_bytes": sum(int(r.get("bytes", 0)) for r in checks)} if checks else {}
    at: dict[tuple[str, str], float] = {}
    for r in marks:
        at.setdefault((r.get("phase", ""), r.get("event", "")), float(r.get("t", 0)))

    def span(a: float | None, b: float | None) -> float | None:
        return round(b - a, 2) if a is not None and b is not None and b >= a else None

    job0 = at[("job", "start")]
    first = at.get(("first_step", "end"))
    evaluation = at.get(("evaluation", "start"))
    framework_end = at.get(("framework", "end"))
    out: dict[str, float | None] = {}
    if launch:
        out["plan"] = span(*launch["plan"])
        if "formation" in launch:
            out["formation"] = span(*launch["formation"])
        out["job_start"] = span(launch["submitted"], job0)
    for name in ("inputs", "preflight"):
        out[name] = span(at.get((name, "start")), at.get((name, "end")))
    out["first_step"] = span(at.get(("framework", "start")), first)
    if evaluation is not None and first is not None and evaluation >= first:
        evaluated = at.get(("evaluation", "end"))
        out["training"] = span(first, evaluation)
        out["evaluation"] = span(evaluation, evaluated)
        # After the evaluation: the framework saving its last files and shutting its workers down.
        out["framework_exit"] = span(evaluated, framework_end)
    else:
        out["training"] = span(first, framework_end)
    out["postflight"] = span(at.get(("postflight", "start")), at.get(("postflight", "end")))
    out["down"] = span(at.get(("down", "start")), at.get(("down", "end")))
    origin = launch["started"] if launch else job0
    last = max(float(r.get("t", 0)) for r in marks)
    return {"phases": {k: out[k] for k in ORDER if out.get(k) is not None},
            "to_first_step_s": span(origin, first), "total_s": span(origin, last),
            "from": "the launch's start" if launch else "the job's start", **gpu}


def line(result: dict[str, Any]) -> str:
    if not result:
        return "no phases recorded"
    parts = [f"{name} {s:.1f} s" for name, s in result["phases"].items()]
    first = result.get("to_first_step_s")
    head = f"first step {first:.1f} s after {result['from']}" if first is not None else "no first step recorded"
    gpu = (f"; inputs on the GPU nodes {result['inputs_gpu_s']:.1f} s, {result['inputs_gpu_bytes']} bytes read"
           if "inputs_gpu_s" in result else "")
    return f"{head}; " + ", ".join(parts) + gpu


def first_step(run_dir: Path, metrics: Path, deadline_s: float) -> int:
    """Mark the moment the metrics file gains its first complete line of this attempt (it may hold
    an earlier attempt's); gives up silently after deadline_s or once its parent (job.sh) is gone
    (the framework's own failure is postflight's to name)."""
    def size() -> int:
        try:
            return metrics.stat().st_size
        except OSError:
            return 0

    base, end, parent = size(), time.monotonic() + deadline_s, os.getppid()
    # A job stopped under it (ray job stop, a killed pod) leaves no watcher polling: its parent is gone.
    while time.monotonic() < end and os.getppid() == parent:
        now = size()
        if now > base:
            with open(metrics, "rb") as fh:
                fh.seek(base)
                if b"\n" in fh.read(now - base):
                    mark(run_dir, "first_step", "end")
                    return 0
        time.sleep(POLL_S)
    return 0


def report(run_dir: Path, quiet: bool = False) -> int:
    """The last attempt's phases into verification.json (and printed, unless quiet)."""
    result = durations(read_jsonl(run_dir / FILE)[0] if (run_dir / FILE).is_file() else [])
    if not quiet:
        print(f"rlaunch-job: phases: {line(result)}", flush=True)
    path = run_dir / "verification.json"
    try:
        verification = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0  # postflight names why it wrote none
    verification["phases"] = result
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(verification, indent=2) + "\n")
    os.replace(tmp, path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("rlaunch.job.phases", __doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    fs = sub.add_parser("first-step")
    fs.add_argument("--run-dir", type=Path, required=True)
    fs.add_argument("--metrics", type=Path, required=True)
    fs.add_argument("--deadline-s", type=float, default=6 * 3600)
    rp = sub.add_parser("report")
    rp.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "first-step":
        return first_step(args.run_dir, args.metrics, args.deadline_s)
    return report(args.run_dir)


if __name__ == "__main__":
    sys.exit(main())

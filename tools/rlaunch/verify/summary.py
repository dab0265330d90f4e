"""The closing summary a person reads after a launch: what ran, what it learned, where the files are.

The same facts two ways: the text `make launch` prints, and Markdown with the verification table
for a CI job's summary page (`make summary` appends it to $GITHUB_STEP_SUMMARY in a GitHub job).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlaunch.job import attempts, phases
from rlaunch.verify.smoke import lines as smoke_lines


def _read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _facts(run_dir: Path | None, out: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """(label, value) rows in the order people read them, and verification.json (or {}). No run
    directory: a run known by its id alone, whose launch left no handle here."""
    if run_dir is None:
        return [("verification", "not on this machine: no handle of its launch here says where its run "
                                 "directory is"), ("artifacts", str(out))], {}
    train = _read(run_dir / "train_summary.json")
    evaluation = _read(run_dir / "eval.json")
    verification = _read(run_dir / "verification.json")
    preflight = _read(run_dir / "preflight.json")
    rows = []
    history = attempts.summary(attempts.read(run_dir))["attempts"]
    if len(history) > 1 or (history and history[-1].get("resume_step")):
        last = history[-1]
        lost = f", {last['steps_lost']} step(s) done again" if last.get("steps_lost") else ""
        rows.append(("attempt", f"{last['attempt']}: resumed from step {last.get('resume_step') or 0}{lost}"))
    for entry in history:
        rows += [("node lost", f"attempt {entry['attempt']}: {attempts.describe_loss(loss)}")
                 for loss in entry["nodes_lost"]]
        if entry.get("stalled"):
            rows.append(("stalled", f"attempt {entry['attempt']}: {attempts.describe_stall(entry['stalled'])}"))
    if preflight:
        rows.append(("preflight", f"{'passed' if preflight.get('passed') else 'FAILED'} on "
                                  f"{len(preflight.get('nodes', []))} nodes"))
    if train:
        rows.append(("nodes used", f"{train.get('num_workers')} ({', '.join(train.get('worker_nodes', []))})"))
        rows.append(("steps", f"{train.get('steps')}/{train.get('target_steps')}"))
        if "reward_first" in train:
            rows.append(("reward", f"{train['reward_first']:.2f} -> {train['reward_last']:.2f}"))
    if evaluation:
        rows.append(("greedy score", f"{evaluation.get('greedy_correct')}/{evaluation.get('greedy_total')}"))
    smoke = _read(run_dir / "smoke.json")
    if smoke:
        rows += [("smoke", line.removeprefix("smoke: ")) for line in smoke_lines(smoke)]
    if verification:
        failed = [c["name"] for c in verification.get("checks", []) if not c.get("passed")]
        rows.append(("verification", "passed" if verification.get("passed") else "FAILED: " + ", ".join(failed)))
    elif run_dir.is_dir():
        rows.append(("verification", "no report (the job did not reach postflight)"))
    else:
        rows.append(("verification", "not on this machine: the reports are in the run directory on the "
                                     "run's shared storage (`make verify RUN_DIR=...` where it is mounted)"))
    if verification.get("phases"):
        rows.append(("seconds", phases.line(verification["phases"])))
    rows.append(("run dir", str(run_dir)))
    rows.append(("artifacts", str(out)))
    return rows, verification


def _title(run_id: str, framework: str, infra: str) -> str:
    return f"run {run_id} ({framework} on {infra})"


def closing_summary(run_id: str, framework: str, infra: str, run_dir: Path | None, out: Path) -> str:
    rows, _ = _facts(run_dir, out)
    return "\n".join([_title(run_id, framework, infra), *(f"  {label:<13} {value}" for label, value in rows)])


def _cell(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def markdown_summary(run_id: str, framework: str, infra: str, run_dir: Path | None, out: Path) -> str:
    """GitHub-flavoured Markdown: the facts, then one row per verification check."""
    rows, verification = _facts(run_dir, out)
    lines = [f"### rlaunch: {_title(run_id, framework, infra)}", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {_cell(value)} |" for label, value in rows]
    checks = verification.get("checks") or []
    if checks:
        with_node = any(c.get("node") for c in checks)
        lines += ["", "#### Verification", "",
                  "| | check |" + (" node |" if with_node else "") + " detail |",
                  "|---|---|" + ("---|" if with_node else "") + "---|"]
        for c in checks:
            mark = "ok" if c.get("passed") else "**FAIL**"
            node = f" {_cell(c.get('node', ''))} |" if with_node else ""
            lines.append(f"| {mark} | {_cell(c.get('name', '?'))} |{node} {_cell(c.get('detail', ''))} |")
    return "\n".join(lines) + "\n"

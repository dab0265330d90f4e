"""The closing summary a person reads after a launch: what ran, what it learned, where the files are."""

from __future__ import annotations

import json
from pathlib import Path


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def closing_summary(spec: dict, run_dir: Path, out: Path) -> str:
    train = _read(run_dir / "train_summary.json")
    evaluation = _read(run_dir / "eval.json")
    verification = _read(run_dir / "verification.json")
    preflight = _read(run_dir / "preflight.json")
    lines = [f"run {spec['run']['id']} ({spec['framework']['name']} on {spec['infra']['name']})"]
    if preflight:
        lines.append(f"  preflight     {'passed' if preflight.get('passed') else 'FAILED'} on "
                     f"{len(preflight.get('nodes', []))} nodes")
    if train:
        nodes = ", ".join(train.get("worker_nodes", []))
        lines.append(f"  nodes used    {train.get('num_workers')} ({nodes})")
        lines.append(f"  steps         {train.get('steps')}/{train.get('target_steps')}")
        if "reward_first" in train:
            lines.append(f"  reward        {train['reward_first']:.2f} -> {train['reward_last']:.2f}")
    if evaluation:
        lines.append(f"  greedy score  {evaluation.get('greedy_correct')}/{evaluation.get('greedy_total')}")
    if verification:
        failed = [c["name"] for c in verification.get("checks", []) if not c.get("passed")]
        lines.append("  verification  " + ("passed" if verification.get("passed")
                                           else "FAILED: " + ", ".join(failed)))
    else:
        lines.append("  verification  no report (the job did not reach postflight)")
    lines.append(f"  run dir       {run_dir}")
    lines.append(f"  artifacts     {out}")
    return "\n".join(lines)

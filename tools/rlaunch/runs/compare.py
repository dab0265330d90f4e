"""Runs side by side: one PNG of their reward curves and a table of how each went.

Each run is read from its run directory (rlaunch.runs.lookup): the reward per step from the framework's
own metrics (rlaunch.job.layouts says where), the verdict from verification.json, the config
from the spec.json job.sh copied there. Curves are labelled with the run id and the config keys
whose values differ between the runs, so the picture says what was changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.config.load import _flat as flatten  # dotted key -> value, as SET names keys
from rlaunch.job import files, layouts
from rlaunch.progress import seconds
from rlaunch.registry import frameworks
from rlaunch.rehearsal.plot import moving_average
from rlaunch.runs.lookup import RunDir, require_local
from rlaunch.verify import postflight
from rlaunch.verify.report import table as fixed_table

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# Keys that differ between any two runs and say nothing about the experiment.
NOT_CONFIG = ("run.id", "run.out", "paths.")
MAX_LABEL_KEYS = 4  # a legend entry stays one line; the table lists every differing key


@dataclasses.dataclass
class Row:
    run: RunDir
    steps: list[int]
    rewards: list[float]
    target: int | None
    verification: str
    wall_s: float | None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file; a half-written last line (a running job) is skipped."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


def reward_series(spec: Spec, run_dir: Path) -> list[tuple[int, float]]:
    """(step, mean reward) per step from the framework's own metrics (its package's postflight says
    where); else any TensorBoard reward tag under the run directory; [] when none were written."""
    where = layouts.defaults(spec, run_dir)
    points = frameworks.descriptor(spec.framework.name).postflight.rewards(where, run_dir)
    if not points:
        scalars = files.read_scalars(run_dir) if any(run_dir.rglob("events.out.tfevents.*")) else {}
        tag = next((t for t in sorted(scalars) if t.rsplit("/", 1)[-1] in ("reward", "reward_scores")), None)
        points = scalars.get(tag, []) if tag else []
    return sorted((int(s), float(v)) for s, v in points if math.isfinite(v))


def verification(run_dir: Path) -> str:
    try:
        report = json.loads((run_dir / "verification.json").read_text())
    except (OSError, ValueError):
        return "no report"
    if report.get("passed"):
        return "passed"
    failed = [c["name"] for c in report.get("checks", []) if not c.get("passed")]
    return "FAILED: " + ", ".join(failed)


def wall_seconds(run_dir: Path) -> float | None:
    """From the job's start (it copies spec.json into the run directory first) to its end
    (postflight writes verification.json last); None for a run that has not ended."""
    start, end = run_dir / "spec.json", run_dir / "verification.json"
    if not (start.is_file() and end.is_file()):
        return None
    return max(0.0, end.stat().st_mtime - start.stat().st_mtime)


def read(run: RunDir) -> Row:
    run_dir = require_local(run)
    points = reward_series(run.spec, run_dir)
    target = run.data.get("train", {}).get("steps") or None
    return Row(run, [s for s, _ in points], [v for _, v in points], target, verification(run_dir),
               wall_seconds(run_dir))


def differing(specs: list[dict[str, Any]]) -> list[str]:
    """Config keys whose values are not the same in every spec.json (a key missing in one counts):
    the files as the runs wrote them, of whichever rlaunch, compared key by key."""
    flat = [flatten(spec) for spec in specs]
    keys = sorted(set().union(*flat))
    return [k for k in keys if not k.startswith(NOT_CONFIG) and not any(p.startswith("_") for p in k.split("."))
            and len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]


def _value(data: dict[str, Any], key: str) -> str:
    value = flatten(data).get(key)
    return json.dumps(value) if isinstance(value, (list, dict)) or value is None else str(value)


def label(row: Row, keys: list[str]) -> str:
    """`id: key=value, ...  [verification]`: what was changed, and whether the run passed."""
    shown = ", ".join(f"{k}={_value(row.run.data, k)}" for k in keys[:MAX_LABEL_KEYS])
    more = f", +{len(keys) - MAX_LABEL_KEYS} more (see the table)" if len(keys) > MAX_LABEL_KEYS else ""
    verdict = row.verification if len(row.verification) <= 40 else row.verification[:37] + "..."
    empty = "" if row.steps else "  (no reward logged)"
    return f"{row.run.id}" + (f": {shown}{more}" if shown else "") + f"   [{verdict}]{empty}"


def _tenth_means(values: list[float]) -> tuple[float | None, float | None]:
    """Mean of the first and of the last 10% of steps, as the closing summary and postflight count."""
    if not values:
        return None, None
    tenth = max(1, len(values) // 10)
    return sum(values[:tenth]) / tenth, sum(values[-tenth:]) / tenth


def smoothing_window(rows: list[Row]) -> int:
    """One window for every curve (a fair comparison): about a twentieth of the longest run."""
    return max(1, max((len(r.steps) for r in rows), default=0) // 20)


def plot(rows: list[Row], keys: list[str], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = smoothing_window(rows)
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, row in enumerate(rows):
        color = colors[i % len(colors)]
        ax.plot(row.steps, row.rewards, color=color, alpha=0.25, linewidth=1)
        ax.plot(row.steps, moving_average(row.rewards, window), color=color, linewidth=2.2,
                label=label(row, keys))
        if row.steps:  # the run's id at its curve's end: readable without the legend
            ax.annotate(row.run.id, (row.steps[-1], moving_average(row.rewards, window)[-1]),
                        xytext=(4, 0), textcoords="offset points", color=color, fontsize=8, va="center")
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    presets = {r.run.data.get("preset", "") for r in rows}
    what = f"{presets.pop()}: " if len(presets) == 1 and "" not in presets else ""
    ax.set_title(f"{what}reward per step, {len(rows)} run{'s' if len(rows) > 1 else ''}\n(bold: moving average over {window} "
                 f"step{'s' if window > 1 else ''}; faint: every step)", fontsize=10)
    ax.grid(alpha=0.3)
    low = min((min(r.rewards) for r in rows if r.rewards), default=0.0)
    high = max((max(r.rewards) for r in rows if r.rewards), default=1.0)
    pad = 0.05 * ((high - low) or 1.0)
    ax.set_ylim(low - pad, high + pad)
    longest = max((r.steps[-1] for r in rows if r.steps), default=1)
    ax.set_xlim(0, longest * 1.12)  # room for the end labels
    # Below the axes: inside, it would hide the start of the curves (or their end).
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.12), fontsize=9, frameon=False,
              title="run: config that differs between the runs   [verification]" if keys else
              "run   [verification]", title_fontsize=9, alignment="left")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[Row], keys: list[str]) -> str:
    lines = []
    cells = []
    for row in rows:
        first, last = _tenth_means(row.rewards)
        steps = f"{row.steps[-1] if row.steps else 0}/{row.target or '?'}"
        cells.append([row.run.id, steps, f"{_fmt(first)} -> {_fmt(last)}", row.verification,
                      "-" if row.wall_s is None else seconds(row.wall_s)])
    lines.append(fixed_table(["run", "steps", "reward first -> last", "verification", "wall"], cells,
                             max_width=80))
    lines.append("reward first/last: mean of the first/last 10% of steps; wall: the job, "
                 "preflight to postflight")
    if keys:
        lines.append("")
        lines.append(fixed_table(["config", *[r.run.id for r in rows]],
                                 [[k, *[_value(r.run.data, k) for r in rows]] for k in keys], max_width=50))
    return "\n".join(lines)


def default_out(runs: list[RunDir]) -> Path:
    name = "-vs-".join(r.id for r in runs)
    if len(name) > 120:
        name = f"{runs[0].id}-and-{len(runs) - 1}-more-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return ROOT / "build" / "compare" / f"{name}.png"


def compare(runs: list[RunDir], out: Path | None = None) -> tuple[Path, str]:
    rows = [read(run) for run in runs]
    keys = differing([r.run.data for r in rows])
    path = plot(rows, keys, Path(out) if out else default_out(runs))
    return path, table(rows, keys)

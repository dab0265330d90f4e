"""Reward per optimizer step as a PNG, from a rehearsal's metrics.jsonl.

Usage: python -m rlaunch.rehearsal.plot METRICS_JSONL OUT_PNG
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rlaunch import cmdline


def _rows(metrics_path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in Path(metrics_path).read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


def moving_average(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, val in enumerate(values):
        total += val
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def preload() -> Any:
    """matplotlib's pyplot on the Agg backend (no display on cluster nodes); imported here, on first
    use, as it takes a second or two: the driver calls this early, from a thread, while it waits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_reward(metrics_path: Path | str, out_path: Path | str) -> Path:
    """Raw per-step mean reward plus a moving average (single steps are noisy at 16 samples)."""
    plt = preload()

    rows = [r for r in _rows(Path(metrics_path)) if r.get("reward") is not None]
    steps = [r["step"] for r in rows]
    rewards = [r["reward"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(steps, rewards, color="tab:blue", alpha=0.35, linewidth=1, label="reward (step mean)")
    if rows:
        window = max(1, len(rows) // 20)
        ax.plot(steps, moving_average(rewards, window), color="tab:blue", linewidth=2,
                label=f"moving average ({window} steps)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean reward")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("rehearsal: GRPO reward per step")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.rehearsal.plot", __doc__.split("\n\n")[0])
    parser.add_argument("metrics", metavar="METRICS_JSONL")
    parser.add_argument("out", metavar="OUT_PNG")
    args = parser.parse_args(argv)
    plot_reward(args.metrics, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SMOKE=1's report: how long the run took, its steady speed, each node's peak memory, and what the
full run would take at that speed. job.sh runs it after postflight in a smoke run; it writes
<run_dir>/smoke.json and prints the numbers.

Where the numbers come from: the framework's package (frameworks/<name>/postflight.py `smoke`:
steps, s/step after step 1, peak memory per node, wall time); a framework without one reports none.
The full run: train.steps steps (the config without SMOKE) x s/step, plus this run's time outside its
steady steps (startup, step 1, saving); unknown when the config counts epochs instead of steps.

Usage: python -m rlaunch.verify.smoke --spec SPEC.json --run-dir DIR
Exit: 0 (the numbers are a report, never a verdict: postflight gives that); 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import cmdline
from rlaunch.errors import EXIT_USAGE, UsageError
from rlaunch.registry import frameworks
from rlaunch.verify.report import load_spec, write_json

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROG = "smoke"
REPORT = "smoke.json"


def measure(spec: Spec, run_dir: Path) -> dict[str, Any]:
    own = getattr(frameworks.descriptor(spec.framework.name).postflight, "smoke", None)
    got = own(spec, run_dir) if own else {"steps": None, "s_per_step": None, "peak_memory": {}, "duration_s": None}
    full = spec.train.steps
    rate, wall, steps = got.get("s_per_step"), got.get("duration_s"), got.get("steps")
    if rate and full > 0:
        outside = max(0.0, (wall or 0) - rate * max(0, (steps or 1) - 1))
        got["full_run"] = {"steps": full, "s": round(full * rate + outside, 1),
                           "how": f"{full} steps x {rate:.3g} s/step + {outside:.0f} s outside the steady steps"}
    else:
        got["full_run"] = {"steps": full or None, "s": None,
                           "how": "unknown: " + ("no s/step measured" if not rate else
                                                 "the config counts epochs (set train.steps to extrapolate)")}
    got["smoke_steps"] = spec.train.smoke_steps
    return got


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


def lines(got: dict[str, Any]) -> list[str]:
    rate = got.get("s_per_step")
    out = [f"smoke: {got.get('steps')}/{got['smoke_steps']} steps in {_duration(got.get('duration_s'))} wall, "
           f"{'n/a' if rate is None else f'{rate:.3g}'} s/step (steady, after step 1)"]
    for node, peak in sorted((got.get("peak_memory") or {}).items()):
        parts = [f"RSS {peak['rss_mb']:.0f} MB"] if "rss_mb" in peak else []
        parts += [f"GPU {peak['gpu_mb']:.0f} MB"] if "gpu_mb" in peak else []
        out.append(f"smoke: peak memory on {node}: {', '.join(parts)}")
    if not got.get("peak_memory"):
        out.append("smoke: peak memory: not recorded by this framework")
    full = got["full_run"]
    out.append(f"smoke: the full run ({full['steps'] or '?'} steps) would take about {_duration(full['s'])} "
               f"({full['how']})" if full["s"] is not None else f"smoke: the full run: {full['how']}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser(PROG, __doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--run-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        if not args.run_dir.is_dir():
            raise UsageError(f"--run-dir {args.run_dir}: not a directory")
    except UsageError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return EXIT_USAGE
    got = measure(spec, args.run_dir)
    write_json(args.run_dir / REPORT, got)
    print("\n".join(lines(got)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Seed 003's log markers, which its users grep AIStudio's task log for, printed from rlaunch's own
reports in the run directory beside rlaunch's status line (RLAUNCH_RUN_STATUS):

  WORKER_TOPOLOGY=rank=N role=Ray Head|Ray Worker host=H gpu_count=G gpu=MODEL   (preflight.json)
  NVIDIA_DRIVER_VERSION_NODE_N=VERSION                                        (preflight.json)
  RLINF_PREFLIGHT_STATUS=passed|failed                                        (preflight.json)
  RLINF_VERIFICATION_STATUS=passed|failed                                     (verification.json)
  STARTUP_EXIT_CODE=RC                                                        (the run script's exit code)

Rank 0 is the Ray head, the others follow by node IP, as the seed numbers them. A report that was
never written (preflight skipped, the framework never started) gives no marker of its own: the seed
never prints a status it did not reach.

Usage: python -m rlaunch.verify.markers --run-dir DIR --exit-code RC
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlaunch import cmdline


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return None


def lines(run_dir: Path, exit_code: int) -> list[str]:
    out = []
    pre = _load(run_dir / "preflight.json")
    if pre is not None:
        nodes = sorted(pre.get("nodes") or [], key=lambda n: (not n.get("is_head"), str(n.get("node_ip", ""))))
        for rank, node in enumerate(nodes):
            gpu = node.get("gpu") or {}
            out.append(f"WORKER_TOPOLOGY=rank={rank} role={'Ray Head' if node.get('is_head') else 'Ray Worker'} "
                       f"host={node.get('hostname', '?')} gpu_count={gpu.get('count', 0)} "
                       f"gpu={', '.join(gpu.get('models') or []) or 'none'}")
            out.append(f"NVIDIA_DRIVER_VERSION_NODE_{rank}={', '.join(gpu.get('drivers') or []) or 'none'}")
        out.append(f"RLINF_PREFLIGHT_STATUS={'passed' if pre.get('passed') else 'failed'}")
    post = _load(run_dir / "verification.json")
    if post is not None:
        out.append(f"RLINF_VERIFICATION_STATUS={'passed' if post.get('passed') else 'failed'}")
    out.append(f"STARTUP_EXIT_CODE={exit_code}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("markers", "seed 003's log markers from a run directory")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--exit-code", type=int, required=True)
    args = parser.parse_args(argv)
    print("\n".join(lines(args.run_dir, args.exit_code)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

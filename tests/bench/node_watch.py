#!/usr/bin/env python3
"""The GCS's node-lost verdicts, as the recovery benchmark counts them: run in the head's namespace,
it asks the head's GCS for its node table every 0.1 s (scripts/ray_up.py's client: no driver, no
job) and prints, on stdout, one JSON object when it ends:
  {"dead": {"<node ip>": <epoch s of the first poll that saw it DEAD>}, "polls": N, "errors": N}
A node the GCS declared lost stays in its table as DEAD: a verdict is never missed between polls.

Usage: node_watch.py HOST PORT SECONDS [--until-dead IP]
  SECONDS       watch this long (the false-alarm windows)
  --until-dead  stop as soon as IP is DEAD (the detection runs); SECONDS is then the deadline
Exit: 0 done (with --until-dead: IP was declared lost); 3 --until-dead and the deadline passed;
  2 bad arguments; 5 this python cannot use Ray's GCS client.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import ray_up  # noqa: E402 - scripts/, just put on the path

POLL_S = 0.1


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 5) or not argv[1].isdigit() or not argv[2].replace(".", "", 1).isdigit() or (
            len(argv) == 5 and argv[3] != "--until-dead"):
        print("node_watch.py: bad arguments: HOST PORT SECONDS [--until-dead IP]", file=sys.stderr)
        return 2
    host, port, seconds = argv[0], int(argv[1]), float(argv[2])
    until = argv[4] if len(argv) == 5 else None
    try:
        ray = ray_up.load_ray(with_cli=False)
        from ray.core.generated.gcs_pb2 import GcsNodeInfo
    except (ImportError, AttributeError) as err:
        print(f"node_watch.py: this python cannot use Ray's GCS client: {err}", file=sys.stderr)
        return 5
    dead_state = GcsNodeInfo.GcsNodeState.Value("DEAD")
    client = None
    dead: dict[str, float] = {}
    polls = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            client = client or ray.connect(f"{host}:{port}")
            nodes = client.get_all_node_info(timeout=ray_up.RPC_S).values()
            polls += 1
        except Exception:  # noqa: BLE001 - a slow GCS under stress: count it, connect again, ask again
            client, nodes = None, []
            errors += 1
        now = time.time()
        for n in nodes:
            if n.state == dead_state:
                dead.setdefault(n.node_manager_address, round(now, 3))
        if until and until in dead:
            break
        time.sleep(POLL_S)
    print(json.dumps({"dead": dead, "polls": polls, "errors": errors}))
    return 3 if until and until not in dead else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

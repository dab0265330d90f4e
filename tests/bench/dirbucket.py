#!/usr/bin/env python3
"""A GCS stand-in over the benchmark's "bucket" (a directory every namespace node shares), for the two
listings rlaunch.job.objects makes of it: `gcloud storage objects list gs://B/P** --format=json` on the
CPU step's node (this file run as `gcloud`), and google-cloud-storage's Client on the launcher
(`Client`: list_blobs, bucket().get_blob(), download_as_bytes()). An object's generation is its file's
mtime in ns, as the issue defines a filesystem's version: a rewritten file is a new generation.

MAP: the JSON file of "<bucket>[/<sub path>]" -> directory, from the task's file_mounts (`mapping`).
Usage: gcloud storage objects list gs://BUCKET/PREFIX** --format=json   (env DIRBUCKET_MAP=MAP)
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace


def mapping(file_mounts: dict) -> dict[str, str]:
    """"<bucket>[/<sub path>]" -> its mount path, for every bucket mount of a SkyPilot task."""
    found = {}
    for path, entry in file_mounts.items():
        if isinstance(entry, dict) and entry.get("name"):
            sub = str(entry.get("_bucket_sub_path") or "").strip("/")
            found[f"{entry['name']}/{sub}".rstrip("/")] = path
    return found


def objects(dirs: dict[str, str], bucket: str, prefix: str) -> list[SimpleNamespace]:
    """Every file under gs://bucket/prefix, as (name, generation, size), through the longest mount."""
    key = f"{bucket}/{prefix}".rstrip("/")
    mount = max((m for m in dirs if key == m or key.startswith(m + "/")), key=len, default=None)
    if mount is None:
        return []
    top = Path(dirs[mount])
    sub = mount.partition("/")[2]
    found = []
    for path in sorted(p for p in top.rglob("*") if p.is_file()):
        name = "/".join(x for x in (sub, path.relative_to(top).as_posix()) if x)
        if name.startswith(prefix):
            st = path.stat()
            found.append(SimpleNamespace(name=name, generation=str(st.st_mtime_ns), size=st.st_size, path=path))
    return found


def install_gcloud(bin_dir: Path) -> Path:
    """`gcloud` in bin_dir: this file under this Python (put bin_dir first on the node's PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    stub = bin_dir / "gcloud"
    stub.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} \"$@\"\n")
    stub.chmod(0o755)
    return stub


class Client:
    """google.cloud.storage.Client's part that rlaunch.job.objects.listing calls."""

    def __init__(self, dirs: dict[str, str]):
        self.dirs = dirs

    def list_blobs(self, bucket: str, prefix: str = "", timeout: float = 60) -> list[SimpleNamespace]:
        return objects(self.dirs, bucket, prefix)

    def bucket(self, name: str) -> SimpleNamespace:
        def get_blob(key: str, timeout: float = 60) -> SimpleNamespace | None:
            hit = [o for o in objects(self.dirs, name, key) if o.name == key]
            return SimpleNamespace(download_as_bytes=lambda timeout=60: hit[0].path.read_bytes()) if hit else None
        return SimpleNamespace(get_blob=get_blob)


def main(argv: list[str]) -> int:
    if argv[:3] != ["storage", "objects", "list"] or len(argv) < 4 or not argv[3].startswith("gs://"):
        print(f"gcloud (dirbucket stand-in): not emulated: {' '.join(argv)}", file=sys.stderr)
        return 2
    bucket, _, prefix = argv[3][len("gs://"):].removesuffix("**").partition("/")
    dirs = json.loads(Path(os.environ["DIRBUCKET_MAP"]).read_text())
    print(json.dumps([{"name": o.name, "generation": o.generation, "size": str(o.size)}
                      for o in objects(dirs, bucket, prefix)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""CODE=<url>@<commit> fetched on the cluster (KubeRay's inputs Job, when its pack is over the ConfigMap's
limit: rlaunch.config.code.by_fetch), then checked and staged as the plan's pack would be.

    python3 -m rlaunch.job.codefetch --url=URL --commit=40HEX --hash=SHA256 --dest=DIR [--cache=DIR]

The commit is fetched alone (rlaunch.config.code.checkout: `git init`, `git fetch --depth=1 URL COMMIT`,
checkout; no submodules) into --cache (default: $TMPDIR/rlaunch-code), packed by rlaunch.config.code.pack
(git's file list; .git, caches and virtual environments out), and its content hash must be --hash, the
plan's: a mismatch exits 1 naming both. Then it is staged at --dest (code.stage: beside it, then renamed;
MANIFEST in it, which preflight checks on every node). A --dest already there is that hash by its name:
kept, nothing fetched. Reads no environment of its own; git runs without a terminal prompt, so a private
repository fails at once (the Job carries no git credentials).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rlaunch.config import code
from rlaunch.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codefetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--hash", required=True, help="the plan's content hash (spec pins.code.hash)")
    parser.add_argument("--dest", required=True, help="paths.code_dir")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "rlaunch-code"))
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    if dest.is_dir():
        print(f"codefetch: {dest} is there (named by its hash): kept")
        return 0
    if shutil.which("git") is None:
        print(f"codefetch: git is not in this image, and CODE={args.url}@{args.commit} is fetched with it: "
              "use an image with git, or a CODE small enough for the ConfigMap", file=sys.stderr)
        return 1
    try:
        root = code.checkout(args.url, args.commit, Path(args.cache))
        packed = code.pack(root, f"{args.url}@{args.commit}")
    except ConfigError as err:
        print(f"codefetch: {err}", file=sys.stderr)
        return 1
    if packed.hash != args.hash:
        print(f"codefetch: {args.url} at {args.commit} packs to content hash {packed.hash} here, the plan "
              f"pinned {args.hash}: the files differ from what the plan hashed (git filters such as git-lfs "
              "or eol attributes that act differently here, or an image built from another rlaunch than "
              "the plan's): rebuild the image from this rlaunch, or give a CODE the ConfigMap carries",
              file=sys.stderr)
        return 1
    code.stage(packed, dest)
    print(f"codefetch: {args.url} at {args.commit[:12]} -> {dest} ({len(packed.entries)} files, "
          f"hash {packed.hash[:12]} as planned)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

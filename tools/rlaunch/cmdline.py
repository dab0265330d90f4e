"""The command line of rlaunch's tools besides rlaunch's own: the job's steps on the nodes (accel,
preflight, postflight, smoke, the attempts record, the node watch), the pins and knobs on a bare
python3, the image helpers scripts/image calls, SkyPilot's extras and the rehearsal's pieces.

One function, `parser`: argparse, whose usage error is one line on stderr, `PROG: what is wrong`,
and exit 2 (argparse prints its whole usage first); --help prints the usage and exits 0. rlaunch's
own command line (`make VERB`, `python -m rlaunch VERB`) is fire's: rlaunch.firecli.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from rlaunch.errors import EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def parser(prog: str, doc: str = "", epilog: str | None = None) -> argparse.ArgumentParser:
    """An argument parser for PROG whose usage errors are one line and exit 2 (its subcommands' too);
    `doc` (the tool's docstring, or its first paragraph) is its description, as written."""
    return _Parser(prog=prog, description=doc or None, epilog=epilog,
                   formatter_class=argparse.RawDescriptionHelpFormatter)


__all__ = ["parser"]

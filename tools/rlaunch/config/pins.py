"""Read pins (versions, image tags, commits, revisions) from configs/versions.yaml.

configs/versions.yaml is the only place a pin is written; scripts, Dockerfile build args and
templates read it through this module. It depends on pyyaml only, so it runs inside the images
and in a bare CI step before the full environment exists.

CLI:
    python -m rlaunch.config.pins get images.verl.official     # prints one value
    python -m rlaunch.config.pins keys images                  # prints the keys under a mapping
    python -m rlaunch.config.pins constraints                  # pip constraints: ray + python.*

Env:
    RLAUNCH_VERSIONS  path of the versions file (default: <repo>/configs/versions.yaml)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.errors import EXIT_USAGE

# tools/rlaunch/config/pins.py -> the repository (or /opt/rlaunch inside an image).
ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PATH = ROOT / "configs" / "versions.yaml"


class PinError(ValueError):
    """A key that does not exist, or a value of the wrong kind, in the versions file."""


def versions_path() -> Path:
    return Path(os.environ.get("RLAUNCH_VERSIONS") or DEFAULT_PATH)


def load_versions(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Parse the versions file; a missing file or a non-mapping top level is an error."""
    import yaml  # the only dependency; imported here so `--help` needs nothing

    p = Path(path) if path is not None else versions_path()
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PinError(f"versions file {p} not found (set RLAUNCH_VERSIONS to another path)") from None
    if not isinstance(data, dict):
        raise PinError(f"versions file {p}: top level must be a mapping, got {type(data).__name__}")
    return data


def get(dotted_key: str, versions: dict[str, Any] | None = None) -> Any:
    """Return the value at `a.b.c`; an unknown key names the keys that do exist at that level."""
    node: Any = load_versions() if versions is None else versions
    walked: list[str] = []
    for part in dotted_key.split("."):
        if node is None and walked:  # `key:` with nothing under it: YAML's null, an empty mapping here
            node = {}
        if not isinstance(node, dict):
            raise PinError(f"pin '{dotted_key}': '{'.'.join(walked)}' is a value, not a mapping")
        if part not in node:
            where = ".".join(walked) or "the top level"
            allowed = ", ".join(sorted(map(str, node))) or "(none)"
            raise PinError(f"pin '{dotted_key}': no key '{part}' under {where}; allowed: {allowed}")
        node = node[part]
        walked.append(part)
    return node


def get_str(dotted_key: str, versions: dict[str, Any] | None = None) -> str:
    """Like get(), for the scalar pins a shell or a build arg needs; empty and mappings are errors."""
    value = get(dotted_key, versions)
    if isinstance(value, (dict, list)):
        raise PinError(f"pin '{dotted_key}' is a {type(value).__name__}, not a single value")
    if value is None or str(value) == "":
        raise PinError(f"pin '{dotted_key}' is empty in {versions_path()}")
    # YAML turns unquoted 2.60 into a float and true into a bool: print what the file says.
    return str(value).lower() if isinstance(value, bool) else str(value)


def leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every (dotted_key, scalar) pair; the lint tests use it to find pins written twice."""
    if isinstance(node, dict):
        out: list[tuple[str, Any]] = []
        for key, value in node.items():
            out.extend(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return [(prefix, node)]


def constraints(versions: dict[str, Any] | None = None) -> str:
    """pip constraints (`name==version` lines) for Ray and every package under `python:`.

    The launcher's environment and the images' run-time packages are pinned by this one text.
    """
    versions = load_versions() if versions is None else versions
    lines = [f"ray=={get_str('ray', versions)}"]
    python = get("python", versions)
    if not isinstance(python, dict):
        raise PinError("pin 'python' must be a mapping of package name to version")
    lines += [f"{name}=={get_str(f'python.{name}', versions)}" for name in python]
    return "\n".join(lines) + "\n"


USAGE = """commands:
  get DOTTED.KEY      print one pin, e.g. images.verl.official
  keys [DOTTED.KEY]   list the keys of a mapping
  constraints         pip constraints for ray and python.*
env: RLAUNCH_VERSIONS (default: configs/versions.yaml)"""


# Not fire (rlaunch.firecli): scripts/setup reads the pins to build .venv, so this runs on a bare
# python3 with pyyaml alone, where fire is not installed.
def main(argv: list[str]) -> int:
    parser = cmdline.parser("pins", "The pins of configs/versions.yaml, for scripts.", epilog=USAGE)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("get").add_argument("key", metavar="DOTTED.KEY")
    commands.add_parser("keys").add_argument("key", metavar="DOTTED.KEY", nargs="?")
    commands.add_parser("constraints")
    args = parser.parse_args(argv)
    try:
        if args.command == "get":
            print(get_str(args.key))
        elif args.command == "constraints":
            sys.stdout.write(constraints())
        else:
            node = get(args.key) if args.key else load_versions()
            if not isinstance(node, dict):
                raise PinError(f"pin '{args.key}' is a value, not a mapping")
            print("\n".join(map(str, node)))
    except PinError as err:
        print(f"pins: {err}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

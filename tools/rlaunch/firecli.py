"""The one way rlaunch's command lines run: python-fire, as the design card names.

A command returns its exit code (None is 0) or raises SystemExit; fire never prints that code. An
RlaunchError is one line on stderr, `PREFIX: message`, and its exit code; Ctrl-C is 130. A command
that needs a value as given (not as fire would parse it) takes it as str(value) itself."""

from __future__ import annotations

import sys
from typing import Any

from rlaunch.errors import RlaunchError


def run(component: object, name: str, prefix: str, argv: list[str] | None = None) -> int:
    import fire

    code: list[int] = []

    def keep(result: Any) -> Any:
        # An int (not a bool) is the exit code; anything else fire shows as it would (a group: its help).
        if result is None or (isinstance(result, int) and not isinstance(result, bool)):
            code.append(int(result or 0))
            return None
        return result

    try:
        fire.Fire(component, command=sys.argv[1:] if argv is None else argv, name=name, serialize=keep)
    except RlaunchError as err:
        print(f"{prefix}: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:  # a verb that acts handles Ctrl-C itself; any other just stops
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    return code[-1] if code else 0

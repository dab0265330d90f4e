"""Runs one framework's config loader in its validator environment (standard library only: it runs
with .venv-<framework>'s python, where rlaunch is not importable).

    <venv>/bin/python -P loader_main.py frameworks/<name>/loader.py < {"requests": [...]}

The loader module defines name() (what loaded it: the framework's version and loader) and
answer(request, tmp) -> {"ok": True, "summary": ...} or {"ok": False, "error": ..., "key": ...}, in a
fresh temp directory of its own. This prints one JSON line, {"results": [...]}: a loader that raises
(Hydra exits through SystemExit) answers {"ok": False} with the framework's own message and, where
the message names one, the config key.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
from typing import Any

KEY_PATTERNS = (r"Could not override '([^']+)'", r"full_key: (\S+)", r"Key '([^']+)'",
                r"Could not append to config. An item is already at '([^']+)'")
MAX_ERROR = 600


def error_key(text: str) -> str:
    """The config key a framework's (Hydra's, OmegaConf's) error message names, or ""."""
    for pattern in KEY_PATTERNS:
        match = re.search(pattern, text)
        if match:
            return match.group(1)
    return ""


def failure(err: BaseException, what: str = "") -> dict[str, Any]:
    text = f"{what}{type(err).__name__}: {err}".replace("\n", " ")
    return {"ok": False, "key": error_key(str(err)), "error": text[:MAX_ERROR]}


def main(argv: list[str]) -> None:
    spec = importlib.util.spec_from_file_location("rlaunch_loader", argv[1])
    if spec is None or spec.loader is None:
        raise ImportError(f"{argv[1]}: not a loader module")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    requests = json.load(sys.stdin)["requests"]
    name = loader.name()
    results = []
    with tempfile.TemporaryDirectory(prefix="rlaunch-loader-") as tmp:
        for i, request in enumerate(requests):
            try:
                result = loader.answer(request, os.path.join(tmp, str(i)))
            except BaseException as err:  # noqa: BLE001 - the framework's own error is the answer
                result = failure(err)
            result["loader"] = name
            results.append(result)
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main(sys.argv)

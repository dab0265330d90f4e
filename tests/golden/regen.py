"""Golden files: every rendered artifact of every case, path-independent.

    make golden            # regenerate tests/golden/<case>/...
    tests/unit/test_golden.py fails when a rendered file differs from its golden copy.

Cases live in tests/golden/cases_*.py (one file per backend), each a list CASES of
(case_name, preset, knobs) tuples; knobs are Make variables (INFRA, NODES, ..., SET). RUN_ID is fixed.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tools"))

RUN_ID = "golden"
REPO_TOKEN = "<repo>"
COMMIT_TOKEN = "<commit>"


def cases() -> list[tuple[str, str, dict]]:
    found = []
    for path in sorted(HERE.glob("cases_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.extend(module.CASES)
    names = [c[0] for c in found]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"duplicate golden case names: {dupes}"
    return found


def render_case(preset: str, knobs: dict) -> dict[str, str]:
    """Render like `make render`, in memory; the repository's path is replaced by <repo>."""
    from rlaunch.registry import backends
    from rlaunch.plan import artifacts
    from rlaunch.config import load as config

    import os

    knobs = dict(knobs)
    sets = knobs.pop("SET", "")
    # The inputs bucket is named after SkyPilot's user hash: one fixed user, not the machine's.
    was = os.environ.get("SKYPILOT_USER_ID")
    os.environ["SKYPILOT_USER_ID"] = "golden-user"
    try:
        spec = config.load(preset, {"RUN_ID": RUN_ID, **knobs}, sets)
        files = artifacts.finish(spec, backends.get(spec.infra.name).render(spec))
    finally:
        if was is None:
            del os.environ["SKYPILOT_USER_ID"]
        else:
            os.environ["SKYPILOT_USER_ID"] = was
    # CODE= of a fixture in this repository: its commit is this repository's, which every commit moves.
    commit = str(spec.pins.code.get("commit", ""))
    out = {rel: text.replace(str(ROOT), REPO_TOKEN) for rel, text in files.items()}
    return {rel: text.replace(commit, COMMIT_TOKEN) for rel, text in out.items()} if commit else out


def main() -> int:
    for name, preset, knobs in cases():
        target = HERE / name
        if target.exists():
            shutil.rmtree(target)
        for rel, text in render_case(preset, knobs).items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        print(f"golden: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

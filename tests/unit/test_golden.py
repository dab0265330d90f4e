"""Rendered artifacts match tests/golden (regenerate with `make golden`), and no stale golden dirs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
_spec = importlib.util.spec_from_file_location("regen", GOLDEN / "regen.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)
CASES = regen.cases()


@pytest.mark.parametrize(("name", "preset", "knobs"), CASES, ids=[c[0] for c in CASES])
def test_rendered_matches_golden(name, preset, knobs):
    rendered = regen.render_case(preset, knobs)
    golden_dir = GOLDEN / name
    assert golden_dir.is_dir(), f"no golden files for {name}: run `make golden`"
    on_disk = {str(p.relative_to(golden_dir)) for p in golden_dir.rglob("*") if p.is_file()}
    assert on_disk == set(rendered), f"{name}: files differ from golden; run `make golden` and review"
    for rel, text in rendered.items():
        assert (golden_dir / rel).read_text() == text, f"{name}/{rel} is stale: run `make golden`"


def test_no_orphan_golden_dirs():
    names = {c[0] for c in CASES}
    dirs = {p.name for p in GOLDEN.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert dirs <= names, f"golden dirs without a case: {sorted(dirs - names)}"

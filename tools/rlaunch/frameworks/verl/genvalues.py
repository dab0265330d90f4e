"""Writes rlaunch.frameworks.verl.values from the pinned verl's own registry.

rlaunch's config knows verl's advantage estimators without verl (.venv-verl has no torch, and the config
is validated in rlaunch's own environment): they are read from the source of the verl installed in
.venv-verl (`make setup-validators`: verl at configs/versions.yaml's pin), never imported, from
verl/trainer/ppo/core_algos.py: the names registered with `register_adv_est` (an AdvantageEstimator
member or a string), in the order they are registered. tests/unit/test_frameworks_verl.py holds
values.py to it.

    python -m rlaunch.frameworks.verl.genvalues [--write]     # prints the list read (--write: into values.py)
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

from rlaunch import cmdline
from rlaunch.validate import loaders

CORE_ALGOS = Path("verl") / "trainer" / "ppo" / "core_algos.py"


def registered_estimators(source: str) -> tuple[str, ...]:
    """The names core_algos.py registers with @register_adv_est, its AdvantageEstimator members resolved."""
    tree = ast.parse(source)
    members: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "AdvantageEstimator":
            for item in stmt.body:
                if (isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant)
                        and isinstance(item.targets[0], ast.Name)):
                    members[item.targets[0].id] = str(item.value.value)
    names = []
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    for function in functions:
        for deco in function.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name)
                    and deco.func.id == "register_adv_est" and deco.args):
                continue
            arg = deco.args[0]
            if isinstance(arg, ast.Constant):
                names.append(str(arg.value))
            elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) \
                    and arg.value.id == "AdvantageEstimator":
                names.append(members[arg.attr])
    return tuple(dict.fromkeys(names))


def site_packages(venv: Path) -> Path:
    """The venv's site-packages holding verl (.venv-verl/lib/python3.X/site-packages)."""
    found = sorted(venv.resolve().glob(f"lib/python3*/site-packages/{CORE_ALGOS}"))
    if not found:
        raise FileNotFoundError(f"no {CORE_ALGOS} under {venv}: run `make setup-validators`")
    return found[0].parents[len(CORE_ALGOS.parts) - 1]


def installed_version(packages: Path) -> str:
    """verl's version in that site-packages, from its dist-info's name."""
    dists = sorted(packages.glob("verl-*.dist-info"))
    return dists[0].name[len("verl-"):-len(".dist-info")] if dists else ""


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.verl.genvalues", __doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the list read into values.py")
    args = parser.parse_args(argv)
    packages = site_packages(loaders.venv_python("verl").parents[1])
    names = registered_estimators((packages / CORE_ALGOS).read_text(encoding="utf-8"))
    print(f"verl {installed_version(packages)}: {', '.join(names)}")
    if args.write:
        path = Path(__file__).with_name("values.py")
        text = path.read_text(encoding="utf-8")
        body = textwrap.fill(", ".join(f'"{n}"' for n in names), 100, subsequent_indent=" " * 18)
        new = re.sub(r"# verl [^\n]*\nADV_ESTIMATORS = \([^)]*\)",
                     f"# verl {installed_version(packages)}, verl/{CORE_ALGOS.relative_to('verl')}\n"
                     f"ADV_ESTIMATORS = ({body})", text)
        path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

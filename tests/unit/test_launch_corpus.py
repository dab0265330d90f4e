"""The launch corpus (issue 47, Must show): published verl, AReaL and RLinf launches, each given as CODE
(a small tree written here with the framework's checkout markers at the pin, every file and module
the command names in the published layout, and the keys of the YAML it names that place the run) and
CMD (the published command). Each plans, at the size its command places, with the user's entry and
arguments in the rendered command and what the workers import importing from CODE, or is refused for
the reason tests/fixtures/import/launches.yaml says is true of that run. A `gap` is refused today by a
rule of rlaunch's that issue 47 changes (its `why`): asserted as refused, so the change that lifts it
turns the entry into `plans` here.

In-process and without the validator venvs: the import checks run validate/import_loader.py here on
the CODE tree (its modules are stdlib-only stand-ins), so the corpus costs about a second a launch."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.validate import import_loader, imports

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
CORPUS: list[dict[str, Any]] = yaml.safe_load((FIXTURES / "launches.yaml").read_text())
PRESET = {"verl": "verl-grpo-math-7b", "areal": "areal-grpo-gsm8k", "rlinf": "rlinf-grpo-pipeline-1.5b"}
CHECKOUT = {  # the files that make CODE a checkout of the framework at its pin (rlaunch.validate.imports)
    "verl": {"verl/__init__.py": "", "verl/version/version": "0.9.1\n"},
    "areal": {"areal/__init__.py": "", "areal/version.py": "", "pyproject.toml": 'version = "1.0.4"\n'},
    "rlinf": {"rlinf/__init__.py": "", "pyproject.toml": 'version = "0.4.0"\n'},
}
GUARD = "import sys\n\n\ndef main(argv):\n    raise SystemExit('trains')\n\n\nif __name__ == '__main__':\n    main(sys.argv[1:])\n"


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or not text:
        path.write_text(text)
    else:
        path.write_text(path.read_text() + text)


def _module(root: Path, dotted: str, text: str = "") -> None:
    """dotted's file under CODE, with an __init__.py in each package above it."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        init = root / "/".join(parts[:i]) / "__init__.py"
        if not init.exists():
            _write(root, init.relative_to(root).as_posix(), "")
    _write(root, "/".join(parts) + ".py", text)


def _defines(attr: str) -> str:
    return f"\n\nclass {attr}:\n    pass\n" if attr[:1].isupper() else f"\n\ndef {attr}(*args, **kwargs):\n    return 0.0\n"


def code_tree(entry: dict[str, Any], root: Path) -> Path:
    """CODE for one launch: the checkout's markers, the entry, the files its arguments and config name."""
    for rel, text in CHECKOUT[entry["framework"]].items():
        _write(root, rel, text)
    argv = shlex.split(entry["cmd"])
    if argv[1] == "-m":
        _module(root, argv[2], GUARD)
    else:
        _write(root, argv[1], GUARD)
    args = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
    config = yaml.safe_dump(entry.get("config", {}))  # the published YAML's keys that place the run
    for i, arg in enumerate(argv):
        if arg == "--config" and argv[i + 1] not in entry.get("missing", []):
            _write(root, argv[i + 1], config)
        if arg.startswith("--config-path"):
            where = arg.split("=", 1)[1] if "=" in arg else argv[i + 1]
            name = next(a.split("=", 1)[1] if "=" in a else argv[j + 1]
                        for j, a in enumerate(argv) if a.startswith("--config-name"))
            _write(root, f"{where.rstrip('/')}/{name.removesuffix('.yaml')}.yaml", config)
    for key, value in args.items():
        value = value.strip("'\"")
        if value.startswith(("/", "$", "pkg:")) or not value.endswith((".py", ".yaml", ".json")):
            continue
        name = args.get(key.rsplit(".", 1)[0] + ".name", "") if key.endswith(".path") else ""
        _write(root, value, _defines(name) if value.endswith(".py") and name else ("" if value.endswith(".py") else "{}\n"))
    for rel, text in entry.get("code", {}).items():  # lines of the published file that decide the entry
        _write(root, rel, text)
    script = argv[1] if argv[1].endswith(".py") else ""
    if entry.get("imports"):  # the entry script hands them to the trainer, as AReaL's examples do
        calls = ", ".join(f"{key}={dotted!r}" for key, dotted in entry["imports"].items())
        _write(root, script, f"\n\ndef train(trainer):\n    trainer.train({calls})\n")
    for dotted in entry.get("imports", {}).values():
        module, _, attr = dotted.rpartition(".")
        if script and module == script[:-3].replace("/", "."):
            _write(root, script, _defines(attr))
        else:
            _module(root, module, _defines(attr))
    return root


def _under_code(arg: str, argv: list[str], spec: Any) -> bool:
    """arg (a path relative to CODE, or option=path, key=path) as the rendered command gives it: under
    CODE's directory."""
    option, _, path = arg.partition("=") if "=" in arg else ("", "", arg)
    rendered = os.path.normpath(f"{spec.paths.code_dir}/{path}")
    return (f"{option}={rendered}" if option else rendered) in argv


def _absent_from_the_pinned_verl(module: str) -> None:
    """The module an entry is refused for is not in the pinned verl (.venv-verl, where it is built), so the
    stand-in tree's lack of it is the pin's."""
    from rlaunch.frameworks.verl.genvalues import site_packages
    from rlaunch.validate import loaders

    try:
        packages = site_packages(loaders.venv_python("verl").parents[1])
    except FileNotFoundError:
        return
    rel = module.replace(".", "/")
    assert not (packages / f"{rel}.py").exists() and not (packages / rel).is_dir(), module


def _cases() -> list[Any]:
    return [pytest.param(e, id=e["id"]) for e in CORPUS]


def test_the_corpus_holds_at_least_25_launches_each_cited_in_the_readme():
    readme = (FIXTURES / "README.md").read_text()
    assert len(CORPUS) >= 25 and len({e["id"] for e in CORPUS}) == len(CORPUS)
    assert {e["framework"] for e in CORPUS} == {"verl", "areal", "rlinf"}
    for e in CORPUS:
        assert e["id"] in readme and e["source"] in readme, e["id"]
        assert e["expect"] in ("plans", "refused", "gap") and (e["expect"] == "plans" or e["why"])


@pytest.mark.parametrize("entry", _cases())
def test_a_published_launch_plans_with_its_entry_and_arguments_or_is_refused_for_its_reason(entry, tmp_path):
    from rlaunch.registry import frameworks

    root = code_tree(entry, tmp_path / "code")
    knobs = {"RUN_ID": "corpus", "INFRA": "gcp", "CODE": str(root), "CMD": entry["cmd"], **entry.get("knobs", {})}
    if entry.get("stage") == "imports":  # refused by the plan's import check: what verl's workers import
        from rlaunch.frameworks.verl.adapter import import_targets

        spec = config.load(PRESET[entry["framework"]], knobs)
        answer = import_loader.answer(imports.request(spec, import_targets(spec)), "")
        assert not answer["ok"] and entry["needle"] in str(answer), (entry["why"], answer)
        assert entry["key"] in str(answer), answer
        _absent_from_the_pinned_verl(entry["needle"])
        return
    if entry["expect"] in ("refused", "gap"):  # gap: rlaunch's rule, said in `why`; fixed, it plans: say so there
        with pytest.raises(ConfigError) as err:
            config.load(PRESET[entry["framework"]], knobs)
        assert err.value.key == entry["key"] and entry["needle"] in str(err.value), entry["why"]
        return
    spec = config.load(PRESET[entry["framework"]], knobs)
    if entry.get("gpus"):  # the size the launch runs at: every GPU its command places
        assert [spec.cluster.nodes, spec.cluster.gpus_per_node] == entry["gpus"]
    fw = frameworks.get(entry["framework"])
    argv = fw.command(spec)
    given = shlex.split(entry["cmd"])
    assert given[1:3] == argv[1:3] if given[1] == "-m" else given[1] in " ".join(argv)  # the user's entry
    owned = set(fw.owned)
    for arg in given[3:]:  # each argument reaches the command as given, or as the rlaunch key it sets,
        # or, a path in CODE, as that path under CODE's directory on the nodes
        assert arg in argv or arg.partition("=")[0].lstrip("+") in owned or _under_code(arg, argv, spec), arg
    assert imports.checkout_lines(spec)[0].startswith(f"code: CODE is a {entry['framework']} checkout")
    if entry["framework"] == "verl":
        from rlaunch.frameworks.verl.adapter import import_targets

        targets = import_targets(spec)
        answer = import_loader.answer(imports.request(spec, targets), "")
        assert answer["ok"], answer


AREAL = [pytest.param(e, id=e["id"]) for e in CORPUS if e.get("imports")]


@pytest.mark.parametrize("entry", AREAL)
def test_areals_workflows_and_rewards_import_from_code_as_its_workers_import_them(entry, tmp_path):
    """The dotted paths each launch's entry script names import from CODE,
    the script's directory on the path as AReaL's launcher gives its workers (areal/infra/utils/launcher.py)."""
    root = code_tree(entry, tmp_path / "code")
    argv = shlex.split(entry["cmd"])
    targets = imports.script_targets(root, argv[1], "code.command", argv[argv.index("--config") + 1])
    assert sorted(t.dotted for t in targets) == sorted(set(entry["imports"].values()))  # found in the script
    got = import_loader.answer({"code": str(root), "entry": argv[1], "path": [str(root / Path(argv[1]).parent)],
                                "targets": [t.request() for t in targets]}, "")
    assert got["ok"], got

"""Every command in README.md and docs/*.md is one a test runs (issue 43), and the pages hold together.

The fenced ```bash blocks are read by bash itself, with nothing on PATH: each simple command is
recorded as bash would run it (quotes, `\\` continuations, `;` and `&&`, a `VAR=value` prefix) and
nothing runs. Then each is checked by what it is:
- `make plan ...` and `scripts/rlaunch plan ...` are planned here, in this process, as `make plan`
  plans (rlaunch.cli.commands.Cli.plan) with this test's own OUT and RUN_ID. The framework loaders and
  SkyPilot's parser run once over every plan, as the plan benchmark runs them; the REHEARSE=1 and DATA= plans
  (each calls the reward function in verl's CPU environment) are a test of their own, so the two can
  run side by side. Each plan exits as its comment says: `# exit N: TEXT` is rlaunch's code N with
  TEXT in its one-line error (a `make` line says 2, make's code for any failure); no `exit` is 0.
- `make import ...` imports the script into this test's own copy of configs/presets, where the plans
  after it find the preset.
- every other `make X ...`: X is a target the Makefile documents (`make -n` knows it), each NAME=value
  a knob it declares whose value passes rlaunch's rule for that knob, a `make launch` line's config
  loads, and the scripts the recipe runs answer --help, naming each variable the line sets.
- `scripts/X ...` answers --help (and `scripts/rlaunch VERB` names a verb it takes); `sudo apt-get
  install P ...` names packages that rlaunch's own scripts tell the user to install;
  `.venv/bin/python -m rlaunch config ...` runs and exits 0.
Anything else is a command no test runs: a defect of the page, not of this test.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.config import knobs as knob_rules
from rlaunch.config import load as config
from rlaunch.errors import RlaunchError

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
# What `make help` lists: the documented targets and the declared knobs.
TARGETS = set(re.findall(r"^([a-z][a-z0-9-]*):.*## ", MAKEFILE, re.M))
MAKE_KNOBS = set(re.findall(r"^([A-Z][A-Z0-9_]*) *\?=.*## ", MAKEFILE, re.M))
SCRIPTS = sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file() and os.access(p, os.X_OK))
# The knobs a verb of rlaunch's command line reads (cli._with_env: make exports them all).
PLAN_KNOBS = {"PRESET", "SET", "OUT", *config.KNOBS}
EXPECT = re.compile(r"\bexit (\d+)\b(?::\s*(.*))?")

# Sourced by bash (BASH_ENV) before a block: every command becomes a record, nothing runs.
RECORDER = r"""
set -u
declare -A _base=()
for _name in $(compgen -e); do _base[${_name}]=1; done
_rec() {
  local line=$1 name env=()
  shift
  for name in $(compgen -e); do [[ -n "${_base[${name}]:-}" ]] || env+=("${name}=${!name}"); done
  printf '%s\0' "${line}" "${#env[@]}" "${env[@]}" "$#" "$@" >>"${RLAUNCH_DOCS_RECORD}"
}
command_not_found_handle() { _rec "${BASH_LINENO[0]}" "$@"; }
"""


@dataclass(frozen=True)
class Command:
    page: str              # README.md, docs/x.md
    line: int              # in the page
    argv: tuple[str, ...]
    env: tuple[str, ...]   # VAR=value set before it on the line
    comment: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join([*self.env, *self.argv])}"

    @property
    def expected(self) -> tuple[int, str]:
        found = EXPECT.search(self.comment)
        return (int(found.group(1)), (found.group(2) or "").strip()) if found else (0, "")

    @property
    def words(self) -> tuple[list[str], dict[str, str], list[str]]:
        """make's or scripts/rlaunch's arguments: (targets or verbs, NAME=value knobs, anything else)."""
        targets, knobs, other = [], {}, []
        for arg in self.argv[1:]:
            name, eq, value = arg.partition("=")
            if eq and re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                knobs[name] = value
            elif re.fullmatch(r"[a-z][a-z0-9_-]*", arg):
                targets.append(arg)
            else:
                other.append(arg)
        return targets, knobs, other


def fenced(text: str, lang: str | None = "bash") -> list[tuple[int, str]]:
    """(line of the block's first line, its text) of each fenced block in `lang` (None: any)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opened = re.match(r"^```(\w*)\s*$", lines[i])
        if opened:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if lang is None or opened.group(1) == lang:
                out.append((i + 2, "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return out


def comment_of(block: str, line: int) -> str:
    """The comments on the logical line that starts at `line` (1-based) of the block."""
    lines, found = block.splitlines(), []
    for text in lines[line - 1:]:
        hit = re.search(r"(?:^|\s)#\s(.*)$", text)
        if hit:
            found.append(hit.group(1))
        if not text.rstrip().endswith("\\"):
            break
    return " ".join(found)


def record(page: Path, tmp: Path) -> list[Command]:
    prelude = tmp / "record.sh"
    functions = "".join(f'{p.relative_to(ROOT)}() {{ _rec "${{BASH_LINENO[0]}}" {p.relative_to(ROOT)} "$@"; }}\n'
                        for p in [*SCRIPTS, ROOT / ".venv" / "bin" / "python"])
    prelude.write_text(RECORDER + functions, encoding="utf-8")
    name = str(page.relative_to(ROOT))
    commands = []
    for start, block in fenced(page.read_text(encoding="utf-8")):
        script, rec = tmp / "block.sh", tmp / "block.rec"
        script.write_text(block, encoding="utf-8")
        rec.unlink(missing_ok=True)
        proc = subprocess.run([_bash(), str(script)], cwd=tmp, capture_output=True, text=True, timeout=30,
                              env={"PATH": str(tmp / "no-commands"), "BASH_ENV": str(prelude),
                                   "RLAUNCH_DOCS_RECORD": str(rec)})
        assert proc.returncode == 0 and not proc.stderr, (
            f"{name}:{start}: bash cannot read this block as commands rlaunch has: {proc.stderr.strip()}")
        fields = rec.read_bytes().decode().split("\0")[:-1] if rec.exists() else []
        i = 0
        while i < len(fields):
            line, n = int(fields[i]), int(fields[i + 1])
            env, i = tuple(fields[i + 2:i + 2 + n]), i + 2 + n
            argc = int(fields[i])
            argv, i = tuple(fields[i + 1:i + 1 + argc]), i + 1 + argc
            commands.append(Command(name, start + line - 1, argv, env, comment_of(block, line)))
    return commands


def _bash() -> str:
    for where in ("/bin/bash", "/usr/bin/bash"):
        if os.access(where, os.X_OK):
            return where
    raise AssertionError("bash is not installed")


@pytest.fixture(scope="module")
def commands(tmp_path_factory) -> list[Command]:
    tmp = tmp_path_factory.mktemp("docs-record")
    (tmp / "no-commands").mkdir()
    return [c for page in PAGES for c in record(page, tmp)]


def _is(command: Command, verb: str) -> bool:
    return (command.argv[0] == "make" and verb in command.words[0]) or command.argv[:2] == ("scripts/rlaunch", verb)


# --- what each command is ------------------------------------------------------------------------

def test_the_readme_opens_with_the_two_commands(commands):
    first = [c.argv for c in commands if c.page == "README.md"][:3]
    assert first == [("make", "launch"), ("make", "down"), ("make", "test")], first


def test_every_command_is_one_a_test_runs(commands):
    """A make line names documented targets and declared knobs with allowed values; a script line an
    executable that answers --help; anything else is a defect of the page."""
    assert len(commands) >= 40, f"only {len(commands)} commands in the pages' bash blocks"
    scripts = {str(p.relative_to(ROOT)) for p in SCRIPTS}
    apt_hints = set(re.findall(r"apt-get install (?:-\S+ )*([a-z0-9][a-z0-9.+-]*)",
                               "".join(p.read_text(encoding="utf-8") for p in SCRIPTS)))
    problems = []
    for c in commands:
        targets, knobs, other = c.words
        code, _ = c.expected
        if c.argv[0] == "make":
            problems += [f"{c}: `{t}` is not a documented make target" for t in targets if t not in TARGETS]
            problems += [f"{c}: {arg!r} is neither a target nor NAME=value" for arg in other]
            if not targets:
                problems.append(f"{c}: no target")
            if code not in (0, 2):
                problems.append(f"{c}: make exits 2 on any failure, not {code}: show rlaunch's code with "
                                "scripts/rlaunch")
        elif c.argv[0] == "scripts/rlaunch":
            verbs = re.search(r"^\s+(render \|[^)]*)\)", (ROOT / "scripts" / "rlaunch").read_text(), re.M)
            allowed = set(re.split(r"\s*\|\s*", verbs.group(1).strip())) if verbs else set()
            if c.argv[1:2] != ("--help",) and (not targets or targets[0] not in allowed):
                problems.append(f"{c}: not a verb of scripts/rlaunch ({', '.join(sorted(allowed))})")
        elif c.argv[0] in scripts:
            pass  # --help below
        elif c.argv[:3] == ("sudo", "apt-get", "install"):
            problems += [f"{c}: no rlaunch script tells the user to install {pkg!r}"
                         for pkg in c.argv[3:] if not pkg.startswith("-") and pkg not in apt_hints]
            continue
        elif c.argv[:4] == (".venv/bin/python", "-m", "rlaunch", "config"):
            continue  # run below
        else:
            problems.append(f"{c}: no test runs this command; show one that `make`, scripts/ or "
                            "rlaunch's own command line runs")
            continue
        for name, value in knobs.items():
            if name not in MAKE_KNOBS:
                problems.append(f"{c}: {name} is not a knob of the Makefile")
            elif code == 0 and name in knob_rules.RULES and value and (why := knob_rules.RULES[name](value)):
                problems.append(f"{c}: {name}={value!r}: {why}")
    assert not problems, "\n".join(problems)


def _recipes() -> dict[str, str]:
    """Each target's recipe, as the Makefile writes it (its tab-indented lines)."""
    out, target = {}, None
    for line in MAKEFILE.splitlines():
        rule = re.match(r"^([a-z][a-z0-9-]*):", line)
        if rule:
            target = rule.group(1)
            out[target] = ""
        elif line.startswith("\t") and target:
            out[target] += line + "\n"
        elif line.strip() and not line.startswith("\t"):
            target = None
    return out


def test_make_knows_every_target_and_its_scripts_answer_help(commands):
    """`make -n` of every target the pages name (nothing runs); each script a recipe calls answers
    --help, and names every variable a page sets in front of that target."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "RLAUNCH_KNOB_")) and k != "MFLAGS"}
    named = sorted({t for c in commands if c.argv[0] == "make" for t in c.words[0]})
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), *named], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    assert proc.returncode == 0, f"make -n {' '.join(named)}: {proc.stderr.strip()}"
    helped: dict[str, str] = {}

    def help_of(script: str) -> str:
        if script not in helped:
            run = subprocess.run([str(ROOT / script), "--help"], capture_output=True, text=True, timeout=30,
                                 env=env, check=False)
            assert run.returncode == 0 and run.stdout + run.stderr, f"{script} --help: exit {run.returncode}"
            helped[script] = run.stdout + run.stderr
        return helped[script]

    recipes, scripts = _recipes(), {str(p.relative_to(ROOT)) for p in SCRIPTS}
    problems = []
    for c in commands:
        if c.argv[0] in scripts:
            help_of(c.argv[0])
        if c.argv[0] != "make":
            continue
        for target in c.words[0]:
            called = sorted(set(re.findall(r"(?:^|[\s@;&|(])(scripts/[\w-]+)", recipes.get(target, ""))))
            texts = [help_of(s) for s in called]
            for assignment in c.env:
                name = assignment.split("=", 1)[0]
                if not any(name in text for text in texts):
                    problems.append(f"{c}: {name} is not among what {', '.join(called) or target} reads "
                                    "(its --help)")
    assert not problems, "\n".join(problems)


def test_the_config_command_prints_the_merged_config(commands, offline, capsys):
    from rlaunch.cli import commands as cli

    ran = [c for c in commands if c.argv[:4] == (".venv/bin/python", "-m", "rlaunch", "config")]
    for c in ran:
        assert cli.main(list(c.argv[3:])) == 0, str(c)
        assert '"cluster":' in capsys.readouterr().out, str(c)
    assert ran, "no page shows `python -m rlaunch config`"


# --- the plans -------------------------------------------------------------------------------------

def _mirror_configs(tmp: Path) -> Path:
    """configs/ as the plans read it, with presets/ a folder of this test's own (for `make import`)."""
    mirror = tmp / "configs"
    (mirror / "presets").mkdir(parents=True)
    for entry in (ROOT / "configs").iterdir():
        if entry.name != "presets":
            (mirror / entry.name).symlink_to(entry)
    for preset in (ROOT / "configs" / "presets").iterdir():
        (mirror / "presets" / preset.name).symlink_to(preset)
    return mirror


def _outcome(call) -> tuple[int, str]:
    try:
        call()
    except RlaunchError as err:
        return err.exit_code, f"rlaunch: {err}"
    except SystemExit as err:
        return int(err.code or 0), ""
    return 0, ""


@pytest.fixture()
def offline(monkeypatch):
    """No hub, no user knobs: the plans read the committed facts (tests/conftest.py) and nothing else."""
    for name in [k for k in os.environ if k.startswith("RLAUNCH_KNOB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", "http://127.0.0.1:9")  # refused at once


@pytest.mark.parametrize("rehearsals", [False, True], ids=["plans", "rehearsals"])
def test_the_plans_exit_as_the_pages_say(commands, offline, tmp_path, monkeypatch, rehearsals):
    """Every plan line, planned: the REHEARSE=1 and DATA= ones (each calls the reward function in verl's
    CPU environment) apart, so the two halves can run side by side."""
    from rlaunch.cli import commands as cli

    monkeypatch.setattr(config, "CONFIGS", _mirror_configs(tmp_path))
    problems = [] if rehearsals else _imports(commands)
    # One plan per distinct line, each with its own OUT and RUN_ID (a fixed id: the loaders' cache key).
    plans: dict[tuple, list[Command]] = {}
    for c in commands:
        if _is(c, "plan") and (c.words[1].get("REHEARSE") == "1" or "DATA" in c.words[1]) == rehearsals:
            plans.setdefault(tuple(sorted(c.words[1].items())), []).append(c)
    runs = []
    for i, (key, same) in enumerate(plans.items()):
        knobs = {k: v for k, v in key if k in PLAN_KNOBS}
        knobs.setdefault("RUN_ID", f"docs-{i}")
        knobs["OUT"] = str(tmp_path / "plans" / str(i))
        runs.append((knobs, same))
    assert runs, "no plan lines"
    if not rehearsals:
        _prefetch([knobs for knobs, _ in runs], monkeypatch)
    outcomes = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for i, (knobs, _) in enumerate(runs):
            given = dict(knobs)
            outcomes[i] = _outcome(lambda: cli.Cli().plan(PRESET=given.pop("PRESET", ""), SET=given.pop("SET", ""),
                                                          OUT=given.pop("OUT"), **given))
    missing = []
    for i, (_, same) in enumerate(runs):
        code, error = outcomes[i]
        for c in same:
            want, text = c.expected
            ok = code == want or (c.argv[0] == "make" and want == 2 and code != 0)
            if code == 3 and want == 0 and "missing" in error:
                missing.append(f"{c}: {error}")
            elif not ok or (text and text not in error):
                problems.append(f"{c}: exit {code}, the page says {want}{': ' + text if text else ''}"
                                f"{chr(10) + '    ' + error if error else ''}")
    if not rehearsals:
        # A `make launch` line is not run, but its knobs and SET load as a config, as launch loads them.
        for c in [c for c in commands if _is(c, "launch")]:
            knobs = {k: v for k, v in c.words[1].items() if k in PLAN_KNOBS - {"OUT"}}
            code, error = _outcome(lambda: cli._spec("", "", str(tmp_path / "launch"), knobs))
            if code:
                problems.append(f"{c}: its config does not load: {error}")
    assert not problems, "\n".join(problems)
    if missing:
        import needs

        # Only the KubeRay CRDs are fetched from where a machine may not reach (GitHub): those skip
        # everywhere when `make crds` recorded that, as the tests taking the crds fixture do.
        _, _, offline = needs.crd_gaps(*needs.kuberay_kinds())
        needs.missing("; ".join(missing), unreachable=offline and all(" CRD" in m for m in missing))


def _imports(commands: list[Command]) -> list[str]:
    """`make import` lines, into the mirror's presets/ (config.CONFIGS): the problems."""
    from rlaunch.cli import importer

    problems = []
    for c in [c for c in commands if _is(c, "import")]:
        _, knobs, _ = c.words
        argv = [str(ROOT / knobs["SCRIPT"]), f"--name={knobs.get('NAME', '')}",
                f"--out={config.CONFIGS / 'presets'}", f"--accelerator={knobs.get('ACCELERATOR') or 'H100'}"]
        with contextlib.redirect_stdout(io.StringIO()):
            code = importer.main(argv)
        if code != 0:
            problems.append(f"{c}: exit {code}")
    return problems


def _prefetch(runs: list[dict[str, str]], monkeypatch) -> None:
    """The heavy checks of every plan at once, as the plan benchmark does: each framework's loader over
    all its requests (one process per framework, side by side) and SkyPilot's parser over every task
    (one process); each plan then finds its answers (the loaders' cache; SkyPilot's by task text)."""
    from rlaunch.cli import commands as cli
    from rlaunch.registry import frameworks
    from rlaunch.validate import loaders
    from rlaunch.validate import skypilot as sky_validate

    requests: dict[str, list[dict]] = {}
    tasks: list[str] = []
    for knobs in runs:
        try:
            spec = cli._spec("", "", "", dict(knobs))
            _, files = cli._render(spec)
        except RlaunchError:
            continue  # refused before any check: its plan says so again, at once
        fw = frameworks.get(spec.framework.name)
        request = fw.loader_request(spec) if hasattr(fw, "loader_request") else None
        if request is not None:
            requests.setdefault(fw.name, []).append(request)
        if "task.yaml" in files and files["task.yaml"] not in tasks:
            tasks.append(files["task.yaml"])
    real_facts = sky_validate.skypilot_facts
    parsed: dict[str, dict] = {}

    def sky_batch() -> None:
        if tasks:
            named = {f"task{i}.yaml": text for i, text in enumerate(tasks)}
            facts = real_facts(named)
            for name, text in named.items():
                parsed[text] = {**facts, "tasks": {"task.yaml": facts["tasks"][name]}}

    with ThreadPoolExecutor(max_workers=2) as pool:
        for done in [pool.submit(loaders.prefetch_all, requests), pool.submit(sky_batch)]:
            done.result()

    def cached_facts(named: dict[str, str]) -> dict:
        if list(named) == ["task.yaml"] and named["task.yaml"] in parsed:
            return copy.deepcopy(parsed[named["task.yaml"]])
        return real_facts(named)

    monkeypatch.setattr(sky_validate, "skypilot_facts", cached_facts)


# --- the pages hold together -----------------------------------------------------------------------

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    for _, block in fenced(text, None):
        text = text.replace(block, "")
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_resolves():
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for _, block in fenced(text, None):
            text = text.replace(block, "")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                problems.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor and anchor not in _anchors(linked):
                problems.append(f"{page.relative_to(ROOT)}: {target}: no heading #{anchor} in "
                                f"{linked.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_front_door_to_pages_that_each_answer_a_question():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail to docs/"
    text = "\n".join(lines)
    problems = [f"README.md does not link {p.relative_to(ROOT)}" for p in PAGES[1:]
                if f"]({p.relative_to(ROOT)})" not in text]
    for page in PAGES[1:]:
        body = [line for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not (body[0].startswith("# ") and re.fullmatch(r"\*\*.+\?\*\*", body[1])):
            problems.append(f"{page.relative_to(ROOT)} does not open with its question (**...?**) "
                            f"under its title: {body[1]!r}")
    assert not problems, "\n".join(problems)

#!/usr/bin/env python3
"""The floor plan (issue 32): move rlaunch's flat modules into packages by stage, and rewrite every
reference to them in a checkout. Run as `python3 docs/floorplan/apply.py <checkout> [--no-golden]`.

Idempotent and tolerant: a file someone added since (under an old name or using old names) is
rewritten too; a module under tools/rlaunch that the table does not place is reported. Steps:
  1. relative imports inside tools/rlaunch become absolute (computed from where the file is now);
  2. `git mv` each old module to its new place; package __init__.py files get their docstring;
  3. every reference in every tracked (and untracked, not ignored) text file is rewritten: Python
     from-imports (regenerated statement by statement), dotted names (`import rlaunch.x`,
     `python -m rlaunch.x`, "rlaunch.x.attr" in mock.patch / monkeypatch / import_module strings,
     PROG names), and file paths `rlaunch/x.py`;
  4. a few exact fix-ups that are not renames (the backend registry's import_module path, a moved
     file's `parents[N]`), each reported when it neither applies nor is already applied;
  5. goldens regenerated (tests/golden/regen.py) unless --no-golden.
Stdlib only.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

# old module (under rlaunch.) -> new module. Data-flow order: config < plan < backends < job/verify <
# runs < cli; errors, firecli and progress stay at the top level (every stage uses them).
MOVES = {
    "config": "config.load",
    "spec": "config.spec",
    "knobs": "config.knobs",
    "dotted": "config.dotted",
    "pins": "config.pins",
    "images": "config.images",
    "render": "plan.render",
    "artifacts": "plan.artifacts",
    "memory": "plan.memory",
    "inputs": "plan.inputs",
    "imagecheck": "plan.imagecheck",
    "pipindex": "plan.pipindex",
    "tracking": "plan.tracking",
    "attempts": "job.attempts",
    "checkpoints": "job.checkpoints",
    "nodewatch": "job.nodewatch",
    "data": "job.data",
    "runref": "runs.lookup",
    "runs": "runs.listing",
    "board": "runs.board",
    "compare": "runs.compare",
    "summary": "runs.summary",
    "cli": "cli.commands",
    "forward": "backends.local.forward",
    "jobs": "backends.local.jobs",
    "skyextras": "backends.skypilot.extras",
    "registry": "backends.kuberay.registry",
    "backends.gke": "backends.kuberay.gke",
    "backends.monitoring": "backends.kuberay.monitoring",
    "backends.local": "backends.local.backend",
    "backends.skypilot": "backends.skypilot.backend",
    "backends.kuberay": "backends.kuberay.backend",
    "backends.aistudio": "backends.aistudio.backend",
}
MOVES = {f"rlaunch.{k}": f"rlaunch.{v}" for k, v in MOVES.items()}

# Modules that stay where they are (besides whole packages that do not move: frameworks, verify,
# validate, rehearsal). A flat module under tools/rlaunch in neither table is reported.
STAY = {"rlaunch.errors", "rlaunch.firecli", "rlaunch.progress", "rlaunch.__main__", "rlaunch.backends.base"}
STAY_PACKAGES = ("rlaunch.frameworks", "rlaunch.verify", "rlaunch.validate", "rlaunch.rehearsal")
# Dotted names that start with "rlaunch." and are no module: a label domain, a .pth file name, the
# package's own constants.
NOT_MODULES = {"rlaunch.io", "rlaunch.pth", "rlaunch.standin", "rlaunch.ROOT", "rlaunch.CONFIGS",
               "rlaunch.TEMPLATES", "rlaunch.SCRIPTS", "rlaunch.main"}

PACKAGES = {
    "config": """The experiment's inputs, loaded and checked as data: load (configs/ layers + overrides ->
the spec dict, the config checks), spec (the typed, frozen Spec), knobs (the env/flag knobs), dotted
(dotted-key helpers), pins (configs/versions.yaml), images (the image recipes and build args). It
may import only rlaunch.errors and the standard library/pydantic/yaml; pins and knobs must still run
on a bare python3, so this __init__ imports nothing.""",
    "plan": """What a launch will be, derived from the spec and nothing outside it: render (Jinja2,
pure), artifacts (the files a launch writes), memory (GPU memory bounds), inputs (where the model
and data live), imagecheck and pipindex (will the image install what the job needs), tracking (one
tracker run per rlaunch run). It may import config and the frameworks' facts; never backends, job,
verify, runs or cli.""",
    "job": """What runs on the cluster head inside the job: attempts (one record per attempt),
checkpoints (what a run saved), nodewatch (a lost node ends the attempt), data (dataset
preparation). It may import config and verify's file readers; never plan, backends, runs or cli.""",
    "runs": """Operator tools over runs that exist: lookup (a run id or directory -> its spec and run
directory), listing (every run the infrastructures know), board, compare, summary. It may import
everything below it (config, plan, backends, job, verify); never cli.""",
    "cli": """The top-level command line (`python -m rlaunch`, fire): commands dispatches the verbs
to plan, backends and runs. Nothing imports cli.""",
    "backends/local": """The local backend (network namespaces on this machine): backend (the verbs),
forward (port forwards into a namespace), jobs (the local job table). Its modules may import config,
plan, job, verify and backends.base; no other backend and never runs or cli.""",
    "backends/skypilot": """The SkyPilot backend (every cloud and SkyPilot's Kubernetes): backend (the
verbs), extras (SkyPilot's per-cloud pip extras). Its modules may import config, plan, job, verify
and backends.base; no other backend and never runs or cli.""",
    "backends/kuberay": """The KubeRay backend (RayJob/RayCluster on Kubernetes): backend (the verbs),
gke (GKE specifics), monitoring (PodMonitor), registry (can the cluster pull the image). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.""",
    "backends/aistudio": """The AIStudio backend (a managed-job form): backend (the verbs). Its modules
may import config, plan, job, verify and backends.base; no other backend and never runs or cli.""",
}

# Exact fix-ups that are not renames: (path, old text, new text).
FIXUPS = [
    ("tools/rlaunch/backends/__init__.py",
     'importlib.import_module(f"rlaunch.backends.{_MODULES[infra]}", __name__)',
     'importlib.import_module(f"rlaunch.backends.{_MODULES[infra]}.backend")'),
    ("tools/rlaunch/backends/__init__.py",
     'importlib.import_module(f".{_MODULES[infra]}", __name__)',
     'importlib.import_module(f"rlaunch.backends.{_MODULES[infra]}.backend")'),
    # a place is named file:stem.function; config.py's stem is now load
    ("tests/unit/test_spec.py", '"rlaunch/config/load.py:config.nccl_env"', '"rlaunch/config/load.py:load.nccl_env"'),
]

TEXT_SUFFIXES = {".py", ".sh", ".bash", ".bats", ".yml", ".yaml", ".md", ".txt", ".j2", ".toml", ".cfg",
                 ".ini", ".json", ".jinja", ".tmpl", ".service", ".env", ""}
NAME = re.compile(r"(?<![\w.])rlaunch(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w])rlaunch/((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*)\.py\b")

REPORT: list[str] = []


def run(repo: Path, *args: str) -> str:
    return subprocess.run(args, cwd=repo, check=True, capture_output=True, text=True).stdout


def module_files(repo: Path) -> dict[str, tuple[Path, bool]]:
    tools = repo / "tools"
    out = {}
    for p in sorted((tools / "rlaunch").rglob("*.py")):
        parts = list(p.relative_to(tools).with_suffix("").parts)
        ispkg = parts[-1] == "__init__"
        if ispkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, ispkg)
    return out


# ---- step 1: relative imports -> absolute -------------------------------------------------------

def absolute_imports(repo: Path) -> None:
    for mod, (path, ispkg) in module_files(repo).items():
        text = path.read_text()
        try:
            tree = ast.parse(text)
        except SyntaxError as err:
            REPORT.append(f"cannot parse {path.relative_to(repo)}: {err}")
            continue
        lines = text.splitlines(keepends=True)
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = mod.split(".") if ispkg else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                i = node.lineno - 1
                new, n = re.subn(r"from\s+\.+[\w.]*\s+import", f"from {target} import", lines[i], count=1)
                if n:
                    lines[i] = new
                    changed = True
                else:
                    REPORT.append(f"{path.relative_to(repo)}:{node.lineno}: relative import not rewritten")
        if changed:
            path.write_text("".join(lines))


# ---- step 2: moves -------------------------------------------------------------------------------

def mod_path(repo: Path, mod: str) -> Path:
    return repo / "tools" / (mod.replace(".", "/") + ".py")


def move(repo: Path) -> None:
    for pkg, doc in PACKAGES.items():
        init = repo / "tools/rlaunch" / pkg / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{doc}\n"""\n')
            run(repo, "git", "add", str(init))
    # Longest first: backends.kuberay before a package of the same name exists in its place.
    for old, new in sorted(MOVES.items(), key=lambda kv: -len(kv[0])):
        src, dst = mod_path(repo, old), mod_path(repo, new)
        if src.exists() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            run(repo, "git", "mv", str(src), str(dst))
            fix_depth(dst, new.count(".") - old.count("."))
        elif src.exists() and dst.exists():
            REPORT.append(f"both {src.relative_to(repo)} and {dst.relative_to(repo)} exist: merge them by hand")
    known = set(MOVES.values()) | STAY | {"rlaunch", "rlaunch.backends"}
    placed = tuple(f"rlaunch.{p.replace('/', '.')}." for p in PACKAGES) + tuple(f"{p}." for p in STAY_PACKAGES)
    for mod in module_files(repo):
        if mod in known or mod.startswith(placed) or mod in STAY_PACKAGES or mod in {
                f"rlaunch.{p.replace('/', '.')}" for p in PACKAGES}:
            continue
        REPORT.append(f"module {mod} is in no table (MOVES/STAY): placed nowhere, left where it is")


def fix_depth(path: Path, delta: int) -> None:
    """A moved file that finds the repository by Path(__file__).parents[N]: N grows by the depth moved."""
    if not delta:
        return
    text = path.read_text()
    new = re.sub(r"(Path\(__file__\)\.resolve\(\)\.parents\[)(\d+)\]",
                 lambda m: f"{m.group(1)}{int(m.group(2)) + delta}]", text)
    new = re.sub(r"(# tools/rlaunch/)[\w/]+\.py( -> the repository)",
                 lambda m: m.group(1) + str(path).split("tools/rlaunch/", 1)[1] + m.group(2), new)
    if new != text:
        path.write_text(new)


# ---- step 3: references --------------------------------------------------------------------------

class Names:
    def __init__(self, repo: Path):
        mods = module_files(repo)
        self.new = set(mods) | set(MOVES.values())
        self.packages = {m for m, (_, ispkg) in mods.items() if ispkg} | {
            "rlaunch." + p.replace("/", ".") for p in PACKAGES}
        self.unknown: set[str] = set()

    def is_new_child(self, pkg: str, name: str) -> bool:
        return f"{pkg}.{name}" in self.new and pkg in self.packages

    def dotted(self, name: str, where: str) -> str:
        """rlaunch.a.b.c -> its new spelling. The longest prefix decides: a module of the new layout
        keeps the name; an old module (also one that is now a package of the same name) is renamed."""
        parts = name.split(".")
        for k in range(len(parts), 1, -1):
            prefix = ".".join(parts[:k])
            if prefix in MOVES:
                return MOVES[prefix] + name[len(prefix):]
            if prefix in self.new:
                return name
            if prefix in NOT_MODULES:
                return name
        self.unknown.add(f"{where}: {name}")
        return name

    def from_import(self, node: ast.ImportFrom, where: str) -> list[tuple[str, list[ast.alias]]]:
        """One from-import -> [(module, names)], old modules among the names split out."""
        mod = node.module or ""
        if mod in MOVES and not all(self.is_new_child(mod, a.name) for a in node.names):
            # `from rlaunch.config import check`: the old module (its names are no submodules)
            return [(MOVES[mod], node.names)]
        if mod in MOVES or mod in self.new or mod == "rlaunch":
            out: list[tuple[str, list[ast.alias]]] = []
            keep: list[ast.alias] = []
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in MOVES and not (mod in self.packages and full in self.new and full not in MOVES):
                    target = MOVES[full]
                    parent, leaf = target.rsplit(".", 1)
                    asname = a.asname or a.name
                    out.append((parent, [ast.alias(name=leaf, asname=None if asname == leaf else asname)]))
                else:
                    keep.append(a)
            return ([(mod, keep)] if keep else []) + out
        return [(self.dotted(mod, where), node.names)]


def spell(mod: str, names: list[ast.alias], indent: str) -> str:
    parts = [a.name if not a.asname else f"{a.name} as {a.asname}" for a in names]
    line = f"{indent}from {mod} import {', '.join(parts)}"
    if len(line) <= 120:
        return line
    body = "".join(f"{indent}    {p},\n" for p in parts)
    return f"{indent}from {mod} import (\n{body}{indent})"


FROM_TEXT = re.compile(r"(?<![\w.])from (rlaunch(?:\.\w+)*) import (\w+(?: as \w+)?(?:, *\w+(?: as \w+)?)*)")


def rewrite_text(text: str, names: Names, where: str) -> str:
    """Text: a one-line `from rlaunch... import a, b` (in a string, `python -c`, a heredoc) is
    regenerated like a Python one (several statements joined by '; '); then dotted names and paths."""
    out, pos = [], 0
    for m in FROM_TEXT.finditer(text):
        aliases = [ast.alias(name=n.split(" as ")[0].strip(), asname=(n.split(" as ")[1].strip() if " as " in n else None))
                   for n in m.group(2).split(",")]
        node = ast.ImportFrom(module=m.group(1), names=aliases, level=0)
        groups = names.from_import(node, where)
        out.append(rewrite_plain(text[pos:m.start()], names, where))
        out.append("; ".join(spell(mod, ns, "") for mod, ns in groups))
        pos = m.end()
    out.append(rewrite_plain(text[pos:], names, where))
    return "".join(out)


def rewrite_plain(text: str, names: Names, where: str) -> str:
    def name(m: re.Match) -> str:
        return names.dotted(m.group(0), where)

    def path(m: re.Match) -> str:
        mod = "rlaunch." + m.group(1).replace("/", ".")
        new = MOVES.get(mod)
        return m.group(0) if new is None else new.replace(".", "/") + ".py"

    return PATH.sub(path, NAME.sub(name, text))


def rewrite_python(text: str, names: Names, where: str) -> str:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        REPORT.append(f"{where}: not valid Python, rewritten as text")
        return rewrite_text(text, names, where)
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def offset(lineno: int, col: int) -> int:
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))

    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "rlaunch":
            groups = names.from_import(node, where)
            same = len(groups) == 1 and groups[0][0] == node.module and [
                (a.name, a.asname) for a in groups[0][1]] == [(a.name, a.asname) for a in node.names]
            a, b = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
            if same:  # kept as it is: the text rewrite must not touch it either
                spans.append((a, b, text[a:b]))
                continue
            indent = " " * node.col_offset
            new = "\n".join(spell(m, ns, indent) for m, ns in groups).lstrip(" ")
            if text[a:b].count("#"):
                REPORT.append(f"{where}:{node.lineno}: comments inside a rewritten import were dropped")
            spans.append((a, b, new))
    out, pos = [], 0
    for a, b, new in sorted(spans):
        out.append(rewrite_text(text[pos:a], names, where))
        out.append(new)
        pos = b
    out.append(rewrite_text(text[pos:], names, where))
    return "".join(out)


def text_files(repo: Path) -> list[Path]:
    listed = run(repo, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    out = []
    for rel in listed:
        p = repo / rel
        if not rel or not p.is_file() or p.is_symlink():
            continue
        if p.suffix not in TEXT_SUFFIXES and p.name not in {"Makefile", "Dockerfile"} and not p.name.endswith(
                ".j2"):
            continue
        out.append(p)
    return out


def rewrite_all(repo: Path) -> list[str]:
    names = Names(repo)
    changed = []
    for p in text_files(repo):
        try:
            text = p.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if "rlaunch" not in text:
            continue
        rel = str(p.relative_to(repo))
        new = rewrite_python(text, names, rel) if p.suffix == ".py" else rewrite_text(text, names, rel)
        if new != text:
            p.write_text(new)
            changed.append(rel)
    for u in sorted(names.unknown):
        REPORT.append(f"unknown rlaunch name (no module old or new): {u}")
    return changed


def fixups(repo: Path) -> None:
    for rel, old, new in FIXUPS:
        p = repo / rel
        text = p.read_text() if p.exists() else ""
        if old in text:
            p.write_text(text.replace(old, new))
    for rel, new in {(r, n) for r, _, n in FIXUPS}:
        p = repo / rel
        if not p.exists() or new not in p.read_text():
            REPORT.append(f"fix-up not applied in {rel}: expected `{new}` (do it by hand)")


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    repo = Path(argv[0]).resolve()
    if not (repo / "tools/rlaunch/__init__.py").exists():
        print(f"apply.py: {repo} is no rlaunch checkout (tools/rlaunch/__init__.py missing)", file=sys.stderr)
        return 2
    absolute_imports(repo)
    move(repo)
    changed = rewrite_all(repo)
    fixups(repo)
    run(repo, "git", "add", "-A", "tools")
    print(f"apply.py: {len(changed)} files rewritten")
    if "--no-golden" not in argv:
        py = repo / ".venv/bin/python"
        env = dict(os.environ)
        proc = subprocess.run([str(py if py.exists() else sys.executable), "tests/golden/regen.py"], cwd=repo,
                              env=env, capture_output=True, text=True)
        print("apply.py: goldens regenerated" if proc.returncode == 0 else
              f"apply.py: tests/golden/regen.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        if proc.returncode:
            REPORT.append("golden regeneration failed (see above)")
    for line in REPORT:
        print("apply.py: REPORT:", line)
    return 1 if REPORT else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

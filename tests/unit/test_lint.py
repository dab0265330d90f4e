"""Lint as tests: shellcheck, hadolint, the GitHub-workflow schema, zizmor, yamllint, mypy, and the
rule that a pin (image tag, commit) is written only in configs/versions.yaml.

Every check runs once on the repository (it must pass) and once on a deliberately broken fixture
in tests/fixtures/lint/ (it must fail, naming the problem), so none of them can pass by accident:
a linter that is missing, misconfigured or pointed at no files fails here too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "lint"
sys.path.insert(0, str(ROOT / "tools"))

from rlaunch.config import images
from rlaunch.config import pins  # noqa: E402  (after the path tweak, like the CLI's PYTHONPATH)

YAMLLINT_CONFIG = ROOT / ".yamllint"


def tool(name: str) -> str:
    """The linter from this interpreter's environment (requirements.txt), else from PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: run `make setup` (it is in requirements.txt)")
    return found


def lint(*argv: str | Path, cwd: Path = ROOT, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def shell_scripts() -> list[Path]:
    """Every file in scripts/ and .ci/ but the Python ones (bash, with or without an extension)."""
    files = sorted(p for top in ("scripts", ".ci") for p in (ROOT / top).rglob("*")
                   if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts)
    assert any(p.parent.name == "scripts" for p in files), "scripts/ has no files to check"
    return files


def bats_files() -> list[Path]:
    return sorted((ROOT / "tests" / "bats").rglob("*.bats")) + sorted(
        (ROOT / "tests" / "bats").rglob("*.bash")
    )


def dockerfiles() -> list[Path]:
    files = sorted((ROOT / "docker").glob("*/Dockerfile"))
    assert {p.parent.name for p in files} >= {"verl", "areal", "rlinf"}, files
    return files


def workflows() -> list[Path]:
    files = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert {p.name for p in files} >= {"ci.yml", "launch.yml", "down.yml"}, files
    return files


# ---------------------------------------------------------------- shellcheck


def test_shellcheck_scripts_and_bats():
    files = shell_scripts() + bats_files()
    result = lint(tool("shellcheck"), "--external-sources", "--format=gcc", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_catches_broken_script():
    result = lint(tool("shellcheck"), "--format=gcc", FIXTURES / "broken.sh")
    assert result.returncode != 0
    assert "SC2164" in result.stdout and "SC2086" in result.stdout, result.stdout


# The helpers every script takes from scripts/lib.sh instead of defining its own.
SHARED = ("die", "log", "usage", "find_python", "rlaunch_py", "pin", "state_get", "ray_pids")
SOURCE_LIB = 'source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"'


def test_every_script_sources_lib_sh_and_defines_none_of_its_helpers():
    scripts = [p for p in shell_scripts() if p.parent.name == "scripts" and p.name != "lib.sh"]
    assert {"ray-up", "image", "setup", "test"} <= {p.name for p in scripts}
    for path in scripts:
        text = path.read_text()
        assert SOURCE_LIB in text, f"{path.name} does not source lib.sh"
        defined = re.findall(rf"^\s*({'|'.join(SHARED)})\(\)", text, re.MULTILINE)
        assert defined == [], f"{path.name} defines its own {defined}"
    lib = (ROOT / "scripts" / "lib.sh").read_text()
    assert [n for n in SHARED if len(re.findall(rf"^{n}\(\) {{", lib, re.MULTILINE)) != 1] == []


def test_every_die_names_its_exit_code_first():
    """One signature, `die CODE MSG`: a call without a code would exit 1 whatever the case."""
    calls = []
    for path in shell_scripts():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
            calls += [f"{path.name}:{n}: {line.strip()}" for m in re.finditer(r"(?:^|[\s;|&])die\s+(\S+)", code)
                      if not re.fullmatch(r'[0-9]+|"\$\{rc\}"', m.group(1))]
    assert calls == []


# ---------------------------------------------------------------- hadolint


def test_hadolint_dockerfiles():
    result = lint(tool("hadolint"), "--no-color", *dockerfiles())
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_broken_dockerfile():
    result = lint(tool("hadolint"), "--no-color", FIXTURES / "Dockerfile.broken")
    assert result.returncode != 0
    for code in ("DL3008", "DL3003"):
        assert code in result.stdout, result.stdout


# ---------------------------------------------------------------- pins written once


def pin_values(versions: dict) -> dict[str, str]:
    """The pins worth searching for: image references (pinned, and the rlaunch images' names made
    from the pins) and commit SHAs (a bare "2.60.0" would match unrelated text, so plain versions
    are checked where they are used instead)."""
    out = {}
    for key, value in pins.leaves(versions):
        text = str(value) if value is not None else ""
        is_image = key.startswith("images.") and ":" in text
        is_commit = re.fullmatch(r"[0-9a-f]{40}", text) is not None
        if is_image or is_commit:
            out[text] = key
    for fw in versions.get("images", {}):
        out[images.rlaunch_ref(fw, versions)] = f"the rlaunch image of {fw}"
        for ref in (versions["images"][fw].get("known") or {}):  # known by name: keys, not values
            out[ref] = f"images.{fw}.known"
    return out


def dockerfile_pin_problems(text: str, versions: dict) -> list[str]:
    """Why a Dockerfile's pins do not all come from versions.yaml (empty when they do)."""
    problems = []
    instructions = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    froms = [ln for ln in instructions if ln.upper().startswith("FROM ")]
    if not froms or froms[0].split()[1] not in ("${BASE_IMAGE}", "$BASE_IMAGE"):
        problems.append("the first FROM must be ${BASE_IMAGE} (the build arg scripts/image fills)")
    for line in instructions:
        if line.upper().startswith("ARG ") and "=" in line:
            problems.append(f"ARG with a default written here: {line!r}")
        if re.search(r"\b[\w.-]+==\d", line):
            problems.append(f"a version written here instead of the constraints: {line!r}")
    for value, key in pin_values(versions).items():
        if value in text:
            problems.append(f"pin {key} ({value}) written here; it belongs in versions.yaml only")
    return problems


def test_dockerfiles_take_every_pin_from_versions():
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    for path in dockerfiles():
        assert dockerfile_pin_problems(path.read_text(), versions) == [], path


def test_pin_check_catches_broken_dockerfile():
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    problems = dockerfile_pin_problems((FIXTURES / "Dockerfile.broken").read_text(), versions)
    joined = "\n".join(problems)
    assert "first FROM must be ${BASE_IMAGE}" in joined
    assert "pin images.verl.official" in joined and "pin images.areal.official" in joined
    assert "ARG with a default" in joined
    assert "pyyaml==6.0.4" in joined


# Source folders where a copied pin would drift from versions.yaml. Golden files and fixtures are
# outputs or deliberate copies; the versions file itself is the one allowed place.
PIN_SCAN = ["docker", "scripts", "templates", "tools", ".github", "configs", "Makefile"]


def repo_pin_copies(versions: dict, root: Path = ROOT) -> list[str]:
    wanted = pin_values(versions)
    found = []
    for top in PIN_SCAN:
        base = root / top
        paths = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in paths:
            if not path.is_file() or path.name == "versions.yaml" or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            rel = path.relative_to(root)
            found += [f"{rel}: {key} ({value})" for value, key in wanted.items() if value in text]
    return found


def test_no_image_tag_or_commit_written_twice():
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    assert pin_values(versions), "versions.yaml has no image pins: the scan would check nothing"
    assert repo_pin_copies(versions) == []


def test_pin_scan_finds_a_copied_tag(tmp_path):
    versions = pins.load_versions(ROOT / "configs" / "versions.yaml")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x").write_text(f"image={pins.get('images.rlinf.official', versions)}\n")
    assert repo_pin_copies(versions, tmp_path) == [
        f"scripts/x: images.rlinf.official ({pins.get('images.rlinf.official', versions)})"
    ]


# ---------------------------------------------------------------- GitHub workflows


def test_workflows_match_github_schema():
    result = lint(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *workflows())
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_catches_broken_workflow():
    result = lint(
        tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", FIXTURES / "workflow-schema.yml"
    )
    assert result.returncode != 0
    assert "'stepz' was unexpected" in result.stdout, result.stdout


def test_zizmor_finds_nothing_in_workflows():
    result = lint(tool("zizmor"), "--offline", "--no-progress", ROOT / ".github" / "workflows")
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_catches_injected_input_and_unpinned_action():
    fixture = FIXTURES / "workflow-injection.yml"
    # The fixture is schema-valid: only zizmor can catch what is wrong with it.
    schema = lint(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", fixture)
    assert schema.returncode == 0, schema.stdout
    result = lint(tool("zizmor"), "--offline", "--no-progress", fixture)
    assert result.returncode != 0
    for audit in ("template-injection", "unpinned-uses", "artipacked"):
        assert audit in result.stdout, result.stdout


# ---------------------------------------------------------------- yamllint


def yamllint(*paths: Path) -> subprocess.CompletedProcess[str]:
    return lint(tool("yamllint"), "--strict", "-f", "parsable", "-c", YAMLLINT_CONFIG, *paths)


def test_yamllint_configs_and_workflows():
    files = sorted((ROOT / "configs").rglob("*.y*ml")) + workflows() + [YAMLLINT_CONFIG]
    result = yamllint(*files)
    assert result.returncode == 0, result.stdout + result.stderr


def yaml_outputs() -> list[Path]:
    """YAML templates that parse as they are, and the rendered YAML kept as golden files."""
    templates = []
    for path in sorted((ROOT / "templates").rglob("*")):
        if path.is_file() and re.search(r"\.ya?ml(\.j2)?$", path.name):
            try:
                yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                continue  # Jinja blocks make it YAML only after rendering: its golden is linted
            templates.append(path)
    goldens = sorted(p for p in (ROOT / "tests" / "golden").rglob("*") if re.search(r"\.ya?ml$", p.name))
    return templates + goldens


def test_yamllint_templates_and_rendered_outputs():
    files = yaml_outputs()
    assert files, "no YAML templates or rendered YAML golden files found"
    result = yamllint(*files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_yamllint_catches_broken_yaml(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text((FIXTURES / "broken.yaml").read_text())
    result = yamllint(broken)
    assert result.returncode != 0
    assert "(key-duplicates)" in result.stdout and "(indentation)" in result.stdout, result.stdout


# ---------------------------------------------------------------- mypy


def mypy(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy as mypy.ini says, reading this interpreter's packages (the launcher's .venv). A cold run
    (no build/mypy cache) takes about a minute on two cores."""
    return lint(tool("mypy"), "--python-executable", sys.executable, "--no-color-output",
                "--config-file", ROOT / "mypy.ini", *args, cwd=cwd, timeout=600)


def test_mypy_finds_nothing_in_rlaunch():
    result = mypy()
    assert result.returncode == 0, result.stdout + result.stderr
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    assert checked and int(checked.group(1)) > 100, result.stdout  # the whole of tools/rlaunch


def test_mypy_catches_a_wrong_type_and_an_untyped_def_in_a_strict_module(tmp_path):
    # A copy of config/dotted.py, a strict module (mypy.ini), under its own name in a tree of its own.
    package = tmp_path / "tools" / "rlaunch" / "config"
    package.mkdir(parents=True)
    for init in (package / "__init__.py", package.parent / "__init__.py"):
        init.write_text("")
    source = (ROOT / "tools" / "rlaunch" / "config" / "dotted.py").read_text()
    lines = len(source.splitlines())
    (package / "dotted.py").write_text(source + (
        "\n\n"
        "def depth(key):\n"  # strict: an unannotated function
        "    return len(key.split('.'))\n"
        "\n\n"
        "flat({}, prefix=3)\n"  # prefix: str
    ))
    result = mypy(cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    where = "tools/rlaunch/config/dotted.py"
    assert f"{where}:{lines + 3}: error: Function is missing a type annotation  [no-untyped-def]" in result.stdout
    assert (f'{where}:{lines + 7}: error: Argument "prefix" to "flat" has incompatible type "int"; '
            'expected "str"  [arg-type]') in result.stdout, result.stdout
    assert "Found 2 errors in 1 file" in result.stdout, result.stdout

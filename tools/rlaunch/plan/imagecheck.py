"""The plan's image check: does the image a run uses fit its framework, before any GPU is paid for.

Three parts, each one line of `make plan` (`lines`):
  (a) resolve  the framework's install (its wheel metadata, plus the extras the run installs)
               resolves with pip's own resolver (`pip install --dry-run --report`, the image's
               python and architecture) with the image's torch, rollout engines, flash-attn and ray
               held at the image's versions: a conflict means the install would replace them.
  (b) rollout  the engine the config asks for (rollout.backend) is in the image.
  (c) ray      the Ray the nodes run (the image's, or the pin where the run installs it) equals
               the `ray` pin: job submission needs the same Ray on both ends.

The image and its facts: images.<framework> (by_accelerator.<GPU> where the accelerator has its
own image) in configs/versions.yaml, or framework.image_ref (IMAGE=) with framework.image_facts, or,
for an IMAGE= that images.<framework>.known names, that row's facts (framework.image_facts win).
An IMAGE= without facts is not checked, and the plan says so (a warning, never a pass).

A failed check raises ImageMismatch (exit 2): the image, the package, both versions, and a
pinned image that fits. Resolutions are cached by (image, facts, requirements, pins) under
build/imagecheck/ (the metadata pip read in index/, each result in results/): a repeated plan is
fast and offline. Where the index cannot be reached and nothing is cached, (a) says it was not
run, and why.

Env: RLAUNCH_IMAGECHECK_CACHE (default build/imagecheck), RLAUNCH_IMAGECHECK_INDEX (a metadata
directory in pipindex's layout, read offline: the tests' recorded fixture), RLAUNCH_IMAGECHECK=off
(skip (a) with a warning line; (b) and (c) still run).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.config import images, pins
from rlaunch.config.knobs import SKY_INFRAS
from rlaunch.errors import RlaunchError
from rlaunch.plan.pipindex import MetadataIndex
from rlaunch.registry import frameworks
from rlaunch.registry.frameworks import Images

if TYPE_CHECKING:
    from rlaunch.config.spec import FrameworkSettings, Spec

# Held at the image's version in the resolution: replacing one breaks the image's CUDA build.
PROTECTED = ("torch", "torchvision", "torchaudio", "vllm", "sglang", "flash-attn", "ray")
ENGINES = ("vllm", "sglang")          # rollout backends that are packages (hf is transformers)
ARCH_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}
RESOLVE_TIMEOUT_S = 900
# The pinned presets' resolutions, committed (`python -m rlaunch.plan.imagelock lock`): a plan from a
# fresh clone is offline and instant for them, and a change in what they resolve shows in review.
LOCK_DIR = ROOT / "configs" / "locks" / "imagecheck"
class ImageMismatch(RlaunchError):
    """The image does not fit the framework: exit 2, nothing launched."""

    def __init__(self, image: str, problems: list[str], fits: str, warning: str = "", where: str = ""):
        self.image, self.problems = image, problems
        source = f" (facts from {where})" if where else ""  # what to correct if a fact is wrong
        hint = f"; an image that fits: {fits}" if fits else ""
        # The entry's warning too: a refusal for one reason should not hide another difference.
        note = f"; warning: {warning}" if warning else ""
        super().__init__(f"image check: {image}{source}: " + "; ".join(problems) + hint + note)


def cache_dir() -> Path:
    return Path(os.environ.get("RLAUNCH_IMAGECHECK_CACHE") or ROOT / "build" / "imagecheck")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------- the image and its facts

def image_of(spec: Spec, versions: dict[str, Any] | None = None) -> tuple[str, dict[str, Any] | None, str]:
    """(image ref, its facts or None, where the facts come from) for the run."""
    versions = pins.load_versions() if versions is None else versions
    fw = spec.framework
    if fw.image_ref:
        if _facts_given(fw):
            facts = fw.image_facts.dump()
            return fw.image_ref, {**facts, "arch": facts.get("arch") or "amd64"}, "framework.image_facts"
        row, where = known_image(fw.name, fw.image_ref, versions)
        if row:
            return fw.image_ref, row.get("facts") or None, where + ".facts"
        return fw.image_ref, None, "framework.image_facts"
    entry, where = pinned_image(fw.name, spec.cluster.accelerator, versions)
    return spec.pins.image, entry.get("facts"), where + ".facts"


def _facts_given(framework: FrameworkSettings) -> bool:
    """framework.image_facts describe the IMAGE= (its python or packages are set)."""
    return bool(framework.image_facts.python or framework.image_facts.packages)


def known_image(framework: str, ref: str, versions: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """images.<framework>.known[<ref>] and its name, or ({}, "") where no row names `ref`."""
    # Not pins.get: a reference has dots of its own, which a dotted key would split.
    rows = (pins.get(f"images.{framework}", versions) or {}).get("known") or {}
    return (rows[ref], f"images.{framework}.known[{ref}]") if ref in rows else ({}, "")


def pinned_image(framework: str, accelerator: str, versions: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """images.<framework>, or its by_accelerator.<accelerator> entry where there is one."""
    entry = pins.get(f"images.{framework}", versions) or {}
    by_acc = entry.get("by_accelerator") or {}
    if accelerator in by_acc:
        return by_acc[accelerator], f"images.{framework}.by_accelerator.{accelerator}"
    return entry, f"images.{framework}"


def _packages(facts: dict[str, Any]) -> dict[str, str]:
    """name -> version: versions.yaml's mapping, or the config's "name==version" list."""
    given = facts.get("packages") or {}
    if isinstance(given, list):
        given = dict(item.split("==", 1) if "==" in item else (item, "") for item in given)
    return {_norm(k): str(v).strip() for k, v in given.items()}


def _images(framework: str) -> Images:
    """The framework descriptor's image facts (frameworks/<name>/__init__.py: Images)."""
    return frameworks.descriptor(framework).images


def _entry(spec: Spec, versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """The image entry the run uses: the pinned one, the known row of an IMAGE= without
    framework.image_facts, else {} (an IMAGE= the user describes)."""
    versions = pins.load_versions() if versions is None else versions
    fw = spec.framework
    if fw.image_ref:
        return {} if _facts_given(fw) else known_image(fw.name, fw.image_ref, versions)[0]
    return pinned_image(fw.name, spec.cluster.accelerator, versions)[0]


def requirement(spec: Spec, versions: dict[str, Any] | None = None) -> str:
    """The framework requirement resolved against the image ("" where there is none): the image
    entry's `requirement` where it gives one (an image whose engine is not the extra's pin), else
    the descriptor's."""
    return _requirement(spec.framework.name, _entry(spec, versions), spec.rollout.backend,
                        spec.pins.framework_version)


def _requirement(framework: str, entry: dict[str, Any], rollout: str, version: str) -> str:
    template = entry.get("requirement") or _images(framework).requirement
    if not template:
        return ""
    req = template.format(version=version, rollout=rollout)
    return str(req.replace(",hf]", "]") if rollout not in ENGINES else req)


def installs(spec: Spec, versions: dict[str, Any] | None = None) -> list[str]:
    """What the run installs over the image, one requirement each: the framework where the image
    lacks it, and the `ray` pin where the image's Ray is another. Only where something installs:
    docker/<framework> (framework.image=rlaunch) and SkyPilot's install step on the official image
    (Framework.install). KubeRay and AIStudio run the official image as it is, and so any IMAGE=."""
    versions = pins.load_versions() if versions is None else versions
    kind = spec.framework.image
    if spec.framework.image_ref or (kind == "official" and spec.infra.name not in SKY_INFRAS):
        return []
    return _installs(spec.framework.name, spec.cluster.accelerator, spec.rollout.backend,
                     spec.pins.framework_version, versions)


def _installs(framework: str, accelerator: str, rollout: str, version: str, versions: dict[str, Any]) -> list[str]:
    """`installs` on framework's pinned image for accelerator, with that rollout engine and version."""
    entry, _ = pinned_image(framework, accelerator, versions)
    req = _requirement(framework, entry, rollout, version)
    desc = _images(framework)
    out = [req] if req and desc.installs else []
    out += [f"{name}=={versions['python'][name]}" for name in desc.adds
            if name not in _packages(entry.get("facts") or {})]
    ray = str(versions["ray"])
    if _packages(entry.get("facts") or {}).get("ray") != ray:
        out.append(f"ray[default]=={ray}")
    return out


def install_lines(spec: Spec, versions: dict[str, Any] | None = None) -> list[str]:
    """Idempotent shell lines run on EVERY node before Ray starts, when the image lacks the framework
    or the Ray pin (SkyPilot nodes on an upstream image): pip of `installs`, which leaves a requirement
    the image already satisfies at that exact version alone, without a download. None on an rlaunch
    image: it was built with them (docker/<framework>: FRAMEWORK_INSTALL)."""
    if spec.framework.image != "official":
        return []
    reqs = installs(spec, versions)
    return ["python3 -m pip install --no-cache-dir " + " ".join(shlex.quote(r) for r in reqs)] if reqs else []


# ---------------------------------------------------------------- (b) and (c)

def rollout_problem(spec: Spec, facts: dict[str, Any], versions: dict[str, Any]) -> str:
    engine = spec.rollout.backend
    if engine not in ENGINES:
        return ""
    return "" if engine in _packages(facts) else f"rollout.backend={engine}: {engine} is not in the image"


def ray_line(spec: Spec, facts: dict[str, Any], versions: dict[str, Any]) -> tuple[str, str]:
    """((c)'s line, a problem or "")."""
    pin = str(versions["ray"])
    have = _packages(facts).get("ray", "")
    if have == pin:
        return f"ray {pin} = the pin", ""
    if f"ray[default]=={pin}" in installs(spec, versions):
        return f"ray: the image has {have or 'no pinned Ray'}, the run installs the pin {pin}", ""
    if not have:
        return f"warning: ray not checked: the image's facts give no Ray version (the pin is {pin})", ""
    return "", f"ray: the image has {have}, the cluster's pin is {pin} (job submission needs the same Ray)"


def framework_problem(spec: Spec, facts: dict[str, Any], versions: dict[str, Any]) -> str:
    """The framework is in the image, or the run installs it (else nothing would run)."""
    fw = spec.framework.name
    req = requirement(spec, versions)
    if not req or fw in _packages(facts) or req in installs(spec, versions) or spec.framework.image_ref:
        return ""
    return (f"{fw} is not in the image and a framework.image={spec.framework.image} run on "
            f"{spec.infra.name} installs nothing: framework.image=rlaunch runs docker/{fw}, which has it")


# ---------------------------------------------------------------- (a) the resolution

def resolution_inputs(spec: Spec, facts: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    pkgs = dict(_packages(facts))
    extra = installs(spec, versions)
    if any(r.startswith("ray[") for r in extra):
        pkgs["ray"] = str(versions["ray"])  # what the nodes run after the install step
    held = [f"{name}=={pkgs[name]}" for name in PROTECTED if name in pkgs]
    req = requirement(spec, versions)
    # The framework's requirement unless the image has the framework; then what the run installs.
    more = [r for r in dict.fromkeys(([req] if req else []) + extra)
            if r.startswith("ray[") or _norm(re.split(r"[\[=]", r, maxsplit=1)[0]) not in pkgs]
    # What the image installed without its dependencies (facts.no_deps) is held as a constraint: its
    # version if something pulls it in, and its own dependencies only then, as pip on the image would.
    no_deps = {_norm(n) for n in facts.get("no_deps") or []}
    constraints = [h for h in held if _norm(h.split("==")[0]) in no_deps]
    inputs = {"python": str(facts.get("python", "")), "arch": str(facts.get("arch", "amd64")),
              "requirements": [h for h in held if h not in constraints] + more, "held": held,
              "pip": str(versions["python"]["pip"])}
    return {**inputs, "constraints": constraints} if constraints else inputs


def _installs_something(inputs: dict[str, Any]) -> bool:
    return not set(inputs["requirements"]) <= set(inputs["held"])


def _key(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


# pip's markers for the image's interpreter: --python-version sets tags and Requires-Python only,
# so platform_machine and python_version markers would otherwise be this machine's.
_BOOT = ("import json, sys; import pip._vendor.packaging.markers as m; env = json.loads(sys.argv[1]); "
         "m.default_environment = lambda: dict(env); from pip._internal.cli.main import main; "
         "sys.exit(main(sys.argv[2:]))")


def _pip_argv(inputs: dict[str, Any], index_url: str, report: Path, target: Path) -> list[str]:
    py, machine = inputs["python"], ARCH_MACHINE.get(inputs["arch"], inputs["arch"])
    markers = {"implementation_name": "cpython", "implementation_version": f"{py}.0", "os_name": "posix",
               "platform_machine": machine, "platform_release": "", "platform_system": "Linux",
               "platform_version": "", "python_full_version": f"{py}.0",
               "platform_python_implementation": "CPython", "python_version": py, "sys_platform": "linux"}
    argv = [sys.executable, "-c", _BOOT, json.dumps(markers), "install", "--dry-run", "--ignore-installed",
            "--target", str(target), "--report", str(report), "--only-binary=:all:",
            "--python-version", py, "--implementation", "cp", "--abi", "cp" + py.replace(".", ""),
            "--no-cache-dir", "--disable-pip-version-check", "--index-url", index_url + "/simple"]
    for plat in [f"manylinux_2_{v}_{machine}" for v in range(17, 40)] + [f"manylinux2014_{machine}",
                                                                          f"linux_{machine}"]:
        argv += ["--platform", plat]
    if inputs.get("constraints"):
        constraints = report.with_name("constraints.txt")
        constraints.write_text("\n".join(inputs["constraints"]) + "\n", encoding="utf-8")
        argv += ["--constraint", str(constraints)]
    return argv + list(inputs["requirements"])


def _index() -> MetadataIndex:
    fixture = os.environ.get("RLAUNCH_IMAGECHECK_INDEX", "")
    return MetadataIndex(Path(fixture) if fixture else cache_dir() / "index", offline=bool(fixture))


def known(inputs: dict[str, Any]) -> dict[str, Any] | None:
    """A result already resolved: the committed lock (configs/locks/imagecheck), else the cache."""
    for path in (LOCK_DIR / f"{_key(inputs)}.json", cache_dir() / "results" / f"{_key(inputs)}.json"):
        if path.exists():
            return {**json.loads(path.read_text(encoding="utf-8")), "cached": True}
    return None


def resolve(inputs: dict[str, Any], index: MetadataIndex | None = None, fresh: bool = False) -> dict[str, Any]:
    """Run pip's resolver; {"status": ok|conflict|unreachable, ...}. Cached by the inputs."""
    got = None if fresh else known(inputs)
    if got:
        return got
    results = cache_dir() / "results"
    path = results / f"{_key(inputs)}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip settings (constraints, indexes) stay out
    print(f"image check: resolving {' '.join(inputs['requirements'])} with pip (once; the metadata it reads "
          f"is cached in {cache_dir()})", file=sys.stderr, flush=True)
    if index is None:  # a resolve of its own: the index lives for it alone
        with _index() as own:
            result = _run_pip(inputs, own, env)
    else:
        result = _run_pip(inputs, index, env)
    if result["status"] == "unreachable":
        return result
    results.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(f".{os.getpid()}")
    tmp_path.write_text(json.dumps({**result, "inputs": inputs}, indent=1, sort_keys=True) + "\n",
                        encoding="utf-8")
    os.replace(tmp_path, path)
    return result


def _run_pip(inputs: dict[str, Any], index: MetadataIndex, env: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlaunch-imagecheck-") as tmp:
        report = Path(tmp) / "report.json"
        try:
            proc = subprocess.run(_pip_argv(inputs, index.url, report, Path(tmp) / "target"), env=env,
                                  capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"status": "unreachable", "why": f"pip's resolver ran past {RESOLVE_TIMEOUT_S} s"}
        if proc.returncode == 0 and report.exists():
            got = json.loads(report.read_text(encoding="utf-8"))
            resolved = {_norm(i["metadata"]["name"]): i["metadata"]["version"] for i in got.get("install", [])}
            return {"status": "ok", "resolved": dict(sorted(resolved.items()))}
        if index.failures or index.misses:
            # Not an answer about the image: the index did not give pip what it asked for.
            why = (index.failures or index.misses)[0]
            index.failures.clear()
            index.misses.clear()
            return {"status": "unreachable", "why": f"{why}"}
        return {"status": "conflict", "conflict": _conflict(proc.stdout + proc.stderr)}


def _conflict(output: str) -> list[str]:
    """pip's own account of a conflict: the lines under 'The conflict is caused by:'."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "The conflict is caused by" in line:
            out = []
            for follow in lines[i + 1:]:
                if not follow.strip():
                    break
                out.append(follow.strip())
            return out
    tail = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(" ")]
    return tail[-3:] or ["pip's resolver failed without saying why"]


def _conflict_problem(inputs: dict[str, Any], conflict: list[str], facts: dict[str, Any]) -> str:
    """'torch: the image has 2.7.0, verl[vllm] 0.9.1 needs ==2.11.0' from pip's conflict lines."""
    pkgs, named, pinned_away = _packages(facts), [], []
    for line in conflict:
        m = re.match(r"(\S+) (\S+) depends on ([A-Za-z0-9_.\-]+)(\[[^]]*\])?([^;]*)", line)
        if not (m and _norm(m.group(3)) in pkgs and m.group(5).strip()):
            continue
        name, spec = _norm(m.group(3)), m.group(5).strip()
        exact = re.fullmatch(r"==\s*([^,\s]+)", spec)
        if exact and exact.group(1) == pkgs[name]:
            continue  # the image's own version: what agrees with the image is not the conflict
        named.append(f"{name}: the image has {pkgs[name]}, {m.group(1)} {m.group(2)} needs {spec}")
        if exact:
            pinned_away.append(named[-1])
    more = f" / ... ({len(conflict) - 4} more)" if len(conflict) > 4 else ""
    # A pin to another version is the conflict for certain; a range (torch>=1.7.0) is named only
    # where there is no such pin, since without a version parser it may be one the image meets.
    return "; ".join(dict.fromkeys(pinned_away or named)) or \
        "the install does not resolve: " + " / ".join(conflict[:4]) + more


def resolution_line(spec: Spec, facts: dict[str, Any], versions: dict[str, Any]) -> tuple[str, str]:
    """((a)'s line, a problem or "")."""
    fw = spec.framework.name
    # The image's own version of the framework where its facts give one (a known row's areal 2.1.0).
    why = _images(fw).why_none.format(version=_packages(facts).get(fw) or spec.pins.framework_version)
    inputs = resolution_inputs(spec, facts, versions)
    if not _installs_something(inputs):
        return f"{why}; the run installs nothing over the image", ""
    if os.environ.get("RLAUNCH_IMAGECHECK", "") == "off":
        return "warning: not resolved (RLAUNCH_IMAGECHECK=off)", ""
    result = resolve(inputs)
    cached = " (cached)" if result.get("cached") else ""
    if result["status"] == "unreachable":
        return (f"warning: NOT CHECKED: the package index gave pip no answer ({result['why']}) and no "
                f"resolution is cached in {cache_dir()}: run `make plan` where PyPI is reachable"), ""
    if result["status"] == "conflict":
        return "", _conflict_problem(inputs, result["conflict"], facts)
    resolved, pkgs = result["resolved"], _packages(facts)
    lacks = [f"{name} {resolved[name]}" for name in PROTECTED
             if name in resolved and name not in pkgs and name not in _install_names(spec, versions)]
    if lacks:
        return "", "the install needs " + ", ".join(lacks) + ", which the image lacks"
    what = " ".join(r for r in inputs["requirements"] if r not in inputs["held"])
    # Allowed, and worth seeing: a package of the image's that the install moves (not torch, the
    # engine or flash-attn: those are held, and the CUDA libraries come pinned by torch).
    moved = [f"{name} {have} -> {resolved[name]}" for name, have in pkgs.items()
             if name in resolved and resolved[name] != have and name not in PROTECTED]
    return ((f"{why}; " if why else "") + f"{what} resolves with pip {inputs['pip']} on the image's "
            + ", ".join(h + (" (without its dependencies, as the image has it)" if h in inputs.get("constraints", ())
                             else "") for h in inputs["held"]) + f" ({len(resolved)} packages{'; moves ' + ', '.join(moved) if moved else ''})"
            + cached), ""


def _install_names(spec: Spec, versions: dict[str, Any]) -> set[str]:
    return {_norm(re.split(r"[\[=<>!~ ]", r, maxsplit=1)[0]) for r in installs(spec, versions)}


# ---------------------------------------------------------------- the plan's lines

def fitting_image(spec: Spec, versions: dict[str, Any], ref: str) -> str:
    """A pinned image of the framework, other than `ref`, with the rollout engine and the Ray the
    run needs (its install is resolved when a plan uses it): the suggestion in the message. For an
    IMAGE=, first the image the plan runs without it (framework.image's, on this accelerator)."""
    fw = spec.framework
    entry = pins.get(f"images.{fw.name}", versions)
    candidates = [(entry, f"images.{fw.name}")]
    candidates += [(e, f"images.{fw.name}.by_accelerator.{acc}")
                   for acc, e in (entry.get("by_accelerator") or {}).items()]
    engine = spec.rollout.backend
    own = None if fw.image_ref else pinned_image(fw.name, spec.cluster.accelerator, versions)[0]
    _, facts, _ = image_of(spec, versions)
    arch = str((facts or {}).get("arch") or "amd64")  # the nodes': an image of another arch cannot run there

    def fits(cand: dict[str, Any]) -> bool:
        cand_facts = cand.get("facts") or {}
        return (engine not in ENGINES or engine in _packages(cand_facts)) \
            and str(cand_facts.get("arch") or "amd64") == arch

    if fw.image_ref:
        # The hint must work as given: on KubeRay that is the rlaunch image, not its upstream base.
        base, where = pinned_image(fw.name, spec.cluster.accelerator, versions)
        pinned = images.ref(fw.name, fw.image, versions, spec.cluster.accelerator, fw.registry)
        if pinned != ref and fits(base):
            built = f"docker/{fw.name} on " if fw.image == "rlaunch" else ""
            return f"{pinned} ({built}{where}), which the plan runs without IMAGE="
    for cand, where in candidates:
        if cand is not own and cand.get("official") != ref and fits(cand):
            return f"{cand['official']} ({where})"
    return ""


def lines(spec: Spec, versions: dict[str, Any] | None = None) -> list[str]:
    """The plan's image-check lines; raises ImageMismatch when the image does not fit."""
    versions = pins.load_versions() if versions is None else versions
    ref, facts, where = image_of(spec, versions)
    if not facts:
        return [f"image {ref}: warning: image check skipped: no facts for it ({where} is not set, and "
                f"images.{spec.framework.name}.known has no row for it; give python, arch, cuda and "
                f"packages in {where} to check it)"]
    problems, out = [], []
    b = rollout_problem(spec, facts, versions)
    problems += [b] if b else []
    c_line, c = ray_line(spec, facts, versions)
    problems += [c] if c else []
    # Not fatal: AIStudio's run script and the job itself stop at once, saying what is missing.
    absent = framework_problem(spec, facts, versions)
    a_line, a = resolution_line(spec, facts, versions) if not absent else (f"warning: {absent}", "")
    problems += [a] if a else []
    warning = _entry(spec, versions).get("warning")
    if problems:
        raise ImageMismatch(ref, problems, fitting_image(spec, versions, ref) or "none pinned",
                            warning or "", where)
    engine = spec.rollout.backend
    out.append(f"image {ref} ({facts.get('arch', 'amd64')}): "
               f"rollout {engine}" + (f" {_packages(facts)[engine]}" if engine in ENGINES else "")
               + f"; {c_line}; {a_line}" + (f"; warning: {warning} ({where.removesuffix('.facts')})" if warning else ""))
    return out


def plan_lines(spec: Spec) -> list[str]:
    """`make plan`'s image-check line(s) for any infrastructure."""
    if spec.infra.name == "local":
        return ["image check: none to check: INFRA=local runs this machine's .venv, not an image"]
    return ["image check: " + line for line in lines(spec)]


def image_installs(framework: str, versions: dict[str, Any] | None = None, accelerator: str = "") -> list[str]:
    """What docker/<framework> installs on its pinned base (framework.image=rlaunch): `installs`
    for a run on that image, whose rollout engine is the image's own (vllm before sglang)."""
    versions = pins.load_versions() if versions is None else versions
    entry, _ = pinned_image(framework, accelerator, versions)
    pkgs = _packages(entry.get("facts") or {})
    engine = next((e for e in ENGINES if e in pkgs), "hf")
    return _installs(framework, accelerator, engine, pins.get_str(f"frameworks.{framework}.version", versions),
                     versions)

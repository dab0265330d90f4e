"""What scripts/image needs from configs/versions.yaml to build an image, as pure functions (the
image's name itself is rlaunch.config.images'):

- build_args: the value each ARG a Dockerfile declares gets, every one from its pin.
- standin: the recipe of a local stand-in for a pinned base image (a Containerfile rendered from
  images.<framework>.facts and .standin, its Debian suite and packages, and an id that changes with
  any of them), for machines that cannot pull the base.
- pip_conf: pip settings for a build's RUN steps, from `pip config list` on this machine.
- dockerfile_problems / tag_problems: where a Dockerfile or an image tag disagrees with the pins
  (the freshness tests run them over docker/*/Dockerfile).

It needs pyyaml (and jinja2 for the stand-in's Containerfile), like the rest of the launcher.

CLI (scripts/image calls these):
    python -m rlaunch.plan.imagebuild ref FRAMEWORK [REGISTRY [TAG]]    the rlaunch image's reference; a
                                                                 non-empty REGISTRY or TAG replaces
                                                                 the pinned registry or the tag
    python -m rlaunch.plan.imagebuild base FRAMEWORK                    the official image it is built on
    python -m rlaunch.plan.imagebuild platform FRAMEWORK                linux/<arch> for a base that is not
                                                                 amd64, else an empty line
    python -m rlaunch.plan.imagebuild build-args FRAMEWORK DOCKERFILE   NAME=VALUE, one per declared ARG
    python -m rlaunch.plan.imagebuild standin FRAMEWORK DIR             writes DIR/Containerfile and
                                                                 DIR/constraints.txt; prints id=,
                                                                 for=, debian=, packages= lines
    python -m rlaunch.plan.imagebuild pip-conf OUT [PIP_CONF]          from PIP_CONF, else `pip config list`
                                                                 on stdin: writes OUT, prints the
                                                                 local paths it names, one a line
Env: RLAUNCH_VERSIONS (default: configs/versions.yaml); ACCELERATOR: a GPU with an image of its own
(images.<framework>.by_accelerator, e.g. GB200's arm64 one) selects it: its base, its build args,
and the rlaunch tag <version>-<arch>
Exit: 0 done; 2 a missing or bad pin, or bad arguments (the message names the key).
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from rlaunch import cmdline
from rlaunch.config import pins
from rlaunch.config.images import platform, ref, rlaunch_ref
from rlaunch.config.pins import PinError
from rlaunch.errors import EXIT_USAGE
from rlaunch.plan import imagecheck
from rlaunch.plan.render import render_template

# Each ARG a Dockerfile may declare, and the pin that fills it ({fw}: the framework).
BUILD_ARG_PINS = {"BASE_IMAGE": "images.{fw}.official", "FRAMEWORK_VERSION": "frameworks.{fw}.version",
                  "FRAMEWORK_INSTALL": "(rlaunch.plan.imagecheck.image_installs)"}


# The label that marks a stand-in, and every image built on one, with the base it stands in for.
STANDIN_LABEL = "io.rlaunch.standin"


STANDIN_RECIPE_LABEL = "io.rlaunch.standin.recipe"


# pip settings a RUN step needs to reach packages the way this machine does; nothing else of the
# machine's pip configuration (constraints, requirements, build options) leaks into an image.
PIP_ACCESS_KEYS = ("index-url", "extra-index-url", "find-links", "cert", "client-cert", "trusted-host",
                   "proxy", "timeout", "default-timeout", "retries")


def declared_args(dockerfile_text: str) -> list[str]:
    return re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)", dockerfile_text, flags=re.MULTILINE)


def build_args(framework: str, dockerfile_text: str, versions: dict[str, Any] | None = None,
               accelerator: str = "") -> dict[str, str]:
    """{ARG: value} for exactly the ARGs the Dockerfile declares; one without a pin is an error
    (a builder would silently build with it empty). FRAMEWORK_INSTALL: what the plan's image check
    resolves the run to install on the base (rlaunch.plan.imagecheck.image_installs)."""
    versions = pins.load_versions() if versions is None else versions
    out = {}
    for arg in declared_args(dockerfile_text):
        if arg not in BUILD_ARG_PINS:
            raise PinError(f"ARG {arg} has no pin in versions.yaml that scripts/image knows; "
                           f"known: {', '.join(BUILD_ARG_PINS)}")
        if arg == "BASE_IMAGE":
            out[arg] = ref(framework, "official", versions, accelerator)
        elif arg == "FRAMEWORK_INSTALL":
            out[arg] = " ".join(imagecheck.image_installs(framework, versions, accelerator))
        else:
            out[arg] = pins.get_str(BUILD_ARG_PINS[arg].format(fw=framework), versions)
    return out


def _constraint_pins(versions: dict[str, Any]) -> dict[str, str]:
    """Normalised package name -> pinned version, from the constraints text itself."""
    out = {}
    for line in pins.constraints(versions).splitlines():
        name, _, version = line.partition("==")
        out[_norm(name)] = version
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
    if not match:
        raise PinError(f"'{req}' is not a package requirement")
    return match.group(0)


def standin(framework: str, versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stand-in's recipe for images.<framework>.official: everything comes from the pins.

    Returns {"for", "containerfile", "constraints", "debian", "packages", "id"}; "id" is a digest of
    all of it, so a changed pin means a new stand-in and an unchanged one means nothing to build."""
    versions = pins.load_versions() if versions is None else versions
    base = f"images.{framework}"
    official = pins.get_str(f"{base}.official", versions)
    pins.get(f"{base}.standin", versions)  # first: every image has facts (the image check's), few a stand-in
    facts = {key: pins.get_str(f"{base}.facts.{key}", versions)
             for key in ("python", "python_prefix", "user", "uid", "gid", "home")}
    env = pins.get(f"{base}.facts.env", versions)
    if not isinstance(env, dict):
        raise PinError(f"pin '{base}.facts.env' must be a mapping of variable to value")
    debian = pins.get_str(f"{base}.standin.debian", versions)
    packages = pins.get(f"{base}.standin.debian_packages", versions)
    requirements = pins.get(f"{base}.standin.pip", versions)
    for key, value in (("debian_packages", packages), ("pip", requirements)):
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise PinError(f"pin '{base}.standin.{key}' must be a non-empty list of names")
    # Versions only from the constraints: a stand-in package without a pin would drift unseen.
    pinned = _constraint_pins(versions)
    pip_args = []
    for req in requirements:
        name = _requirement_name(req)
        if _norm(name) not in pinned:
            raise PinError(f"pin '{base}.standin.pip' names {name}, which has no version in versions.yaml "
                           "(ray, or python.<package>)")
        pip_args.append(f"{req}=={pinned[_norm(name)]}")
    constraints = pins.constraints(versions)
    containerfile = render_template(
        "image/standin.Containerfile.j2", framework=framework, official=official, facts=facts,
        env={str(k): str(v) for k, v in env.items()}, debian=debian, packages=packages, pip_args=pip_args,
        standin_label=STANDIN_LABEL)
    digest = hashlib.sha256(f"{containerfile}\0{constraints}".encode()).hexdigest()[:16]
    return {"for": official, "containerfile": containerfile, "constraints": constraints,
            "debian": debian, "packages": list(packages), "id": digest}


def _local_path(value: str) -> str | None:
    if value.startswith("file:"):
        return unquote(urlparse(value).path) or None
    return value if value.startswith("/") else None


def config_list_of(ini_text: str) -> str:
    """A pip.conf file's settings in `pip config list`'s form, so one reader handles both."""
    parser = configparser.RawConfigParser()
    parser.read_string(ini_text)
    return "\n".join(f"{section}.{key}={value!r}" for section in parser.sections()
                     for key, value in parser.items(section))


def pip_conf(config_list: str) -> tuple[str, list[str]]:
    """A pip.conf for RUN steps from `pip config list` output, and the local paths it names.

    Only PIP_ACCESS_KEYS are kept; the environment's (`:env:`) win over files, as in pip. A local
    index (file: index-url) is left out: its pages link to files outside any path we could name."""
    sections: dict[str, dict[str, str]] = {}
    for line in config_list.splitlines():
        match = re.match(r"^([^=\s]+)\.([a-z0-9-]+)=(.*)$", line.strip())
        if not match:
            continue
        section, key, raw = match.groups()
        if key not in PIP_ACCESS_KEYS:
            continue
        try:
            value = str(ast.literal_eval(raw))
        except (ValueError, SyntaxError):
            value = raw.strip("'\"")
        if key in ("index-url", "extra-index-url"):
            value = " ".join(v for v in value.split() if not v.startswith("file:"))
            if not value:
                continue
        section = "global" if section == ":env:" else section
        if match.group(1) == ":env:" or key not in sections.get(section, {}):
            sections.setdefault(section, {})[key] = value
    paths: list[str] = []
    for values in sections.values():
        for key, value in values.items():
            if key in ("find-links", "cert", "client-cert"):
                for word in value.split():
                    path = _local_path(word)
                    if path and path not in paths:
                        paths.append(path)
    lines = ["# pip settings for image build RUN steps, from this machine's (scripts/image)"]
    for section in sorted(sections, key=lambda s: (s != "global", s)):
        lines.append(f"[{section}]")
        lines += [f"{key} = {value}" for key, value in sections[section].items()]
    return "\n".join(lines) + "\n", paths


# pip options that take a value (the next word), so it is not read as a package.
_PIP_VALUE_OPTIONS = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url",
                      "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--cache-dir", "--timeout",
                      "--retries", "--trusted-host", "--proxy", "--cert", "--platform", "--python-version",
                      "--implementation", "--abi", "--src", "-e", "--editable", "--progress-bar"}


def _run_commands(dockerfile_text: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", dockerfile_text)
    return [m.group(1) for m in re.finditer(r"^\s*RUN\s+(.*)$", joined, flags=re.MULTILINE)]


def pip_installs(dockerfile_text: str) -> list[str]:
    """Every requirement a RUN step's `pip install` names (options and their values skipped)."""
    found = []
    for command in _run_commands(dockerfile_text):
        words = shlex.split(command.replace(";", " ; "), comments=False, posix=True)
        i = 0
        while i < len(words):
            if words[i] == "pip" and i + 1 < len(words) and words[i + 1] == "install":
                i += 2
                while i < len(words) and words[i] not in ("&&", "||", ";", "|"):
                    word = words[i]
                    if word in _PIP_VALUE_OPTIONS:
                        i += 2
                        continue
                    if not word.startswith("-"):
                        found.append(word)
                    i += 1
            i += 1
    return found


def dockerfile_problems(framework: str, dockerfile_text: str, versions: dict[str, Any]) -> list[str]:
    """Why a Dockerfile disagrees with versions.yaml (empty when it agrees): an ARG without a pin, a
    package it installs that no pin fixes, a base that is not the pinned one."""
    problems = []
    try:
        build_args(framework, dockerfile_text, versions)
    except PinError as err:
        problems.append(str(err))
    if "BASE_IMAGE" not in declared_args(dockerfile_text):
        problems.append("no ARG BASE_IMAGE: the base must be images.<framework>.official")
    pinned = _constraint_pins(versions)
    for req in pip_installs(dockerfile_text):
        if req == "${FRAMEWORK_INSTALL}":
            continue  # pinned: rlaunch.plan.imagecheck.image_installs
        name = _norm(_requirement_name(req))
        by_arg = "==${FRAMEWORK_VERSION}" in req and name == _norm(framework)
        if name not in pinned and not by_arg:
            problems.append(f"installs {req} with no pin in versions.yaml (python.<package>, ray, or "
                            "==${FRAMEWORK_VERSION} for the framework itself)")
    return problems


def tag_problems(framework: str, versions: dict[str, Any]) -> list[str]:
    """Where the official image's tag contradicts the pins: its pyNNN against facts.python, and, for
    Ray's own images, its version against the `ray` pin (job submission needs the same Ray)."""
    problems = []
    official = pins.get_str(f"images.{framework}.official", versions)
    repo, _, tag = official.rpartition(":")
    python = pins.get(f"images.{framework}", versions).get("facts", {}).get("python")
    py_tag = re.search(r"(?:^|-)py(\d)(\d+)(?:-|$)", tag)
    if python and py_tag and f"{py_tag.group(1)}.{py_tag.group(2)}" != str(python):
        problems.append(f"images.{framework}.official {official} says py{py_tag.group(1)}{py_tag.group(2)}, "
                        f"images.{framework}.facts.python says {python}")
    if repo.endswith("rayproject/ray") and not tag.startswith(f"{pins.get_str('ray', versions)}-"):
        problems.append(f"images.{framework}.official {official} is not Ray {pins.get_str('ray', versions)} "
                        "(the `ray` pin)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.plan.imagebuild", __doc__.split("\n\n", 1)[0],
                            epilog=__doc__.split("CLI (scripts/image calls these):\n", 1)[1].rstrip())
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = verbs.add_parser("ref")
    verb.add_argument("framework")
    verb.add_argument("registry", nargs="?", default="")
    verb.add_argument("tag", nargs="?", default="")
    for name in ("base", "platform"):
        verbs.add_parser(name).add_argument("framework")
    verb = verbs.add_parser("build-args")
    verb.add_argument("framework")
    verb.add_argument("dockerfile", type=Path)
    verb = verbs.add_parser("standin")
    verb.add_argument("framework")
    verb.add_argument("dir", type=Path)
    verb = verbs.add_parser("pip-conf")
    verb.add_argument("out", type=Path)
    verb.add_argument("pip_conf", nargs="?", type=Path)
    args = parser.parse_args(argv)
    accelerator = os.environ.get("ACCELERATOR", "")
    try:
        if args.verb == "ref":
            print(rlaunch_ref(args.framework, registry=args.registry, tag=args.tag) if args.tag else
                  ref(args.framework, "rlaunch", None, accelerator, args.registry))
        elif args.verb == "base":
            print(ref(args.framework, "official", None, accelerator))
        elif args.verb == "platform":
            print(platform(args.framework, None, accelerator))
        elif args.verb == "build-args":
            for name, value in build_args(args.framework, args.dockerfile.read_text(encoding="utf-8"),
                                          accelerator=accelerator).items():
                print(f"{name}={value}")
        elif args.verb == "standin":
            recipe = standin(args.framework)
            (args.dir / "Containerfile").write_text(recipe["containerfile"], encoding="utf-8")
            (args.dir / "constraints.txt").write_text(recipe["constraints"], encoding="utf-8")
            print(f"id={recipe['id']}\nfor={recipe['for']}\ndebian={recipe['debian']}\n"
                  f"packages={','.join(recipe['packages'])}")
        else:
            listing = config_list_of(args.pip_conf.read_text(encoding="utf-8")) if args.pip_conf else sys.stdin.read()
            text, paths = pip_conf(listing)
            args.out.write_text(text, encoding="utf-8")
            print("\n".join(paths))
    except PinError as err:
        print(f"images: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as err:  # an unreadable or malformed pip.conf
        print(f"images: {err}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())

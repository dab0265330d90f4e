"""The Make knobs as data: how their values reach rlaunch, and the rules for the free-form ones.

The Makefile never pastes a knob's value into a recipe. It exports each knob NAME, byte for byte
(make's `$(value NAME)`, so `$` stays literal and no shell parses it), to the recipe's environment
as RLAUNCH_KNOB_NAME; `from_env()` reads them back. SET is split like a shell command line
(`split_set`, shlex), so a quoted override value keeps its spaces.

The rules below are the only copy: config.py applies them to the merged config (whatever layer a
value came from), scripts/image to REGISTRY, TAG, BASE and BUILDER, and the GitHub workflows to their inputs before
anything else runs. Standard library only: a workflow runs this module with a bare python3, before
`make setup`, and the fast path never imports sky.

CLI:
    python -m rlaunch.config.knobs check [--prefix=TEXT] [--inputs] NAME...
        checks the environment variables NAME... (empty is fine: "not set"); the first bad one
        prints `<prefix><name> '<value>' not allowed: <what is allowed>` and exits 2. --inputs names
        them as the workflow inputs do (lower case: RUN_ID -> run_id) and applies their rules (CODE:
        only a repository at a full commit).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import Callable, Literal, Mapping, get_args

from rlaunch import cmdline
from rlaunch.errors import ConfigError
from rlaunch.registry import backends

ENV_PREFIX = "RLAUNCH_KNOB_"

# Make knobs -> config keys. An empty knob means "not set".
KNOBS = {
    "INFRA": "infra.name", "ALGO": "algo.name", "FRAMEWORK": "framework.name",
    "NODES": "cluster.nodes", "GPUS_PER_NODE": "cluster.gpus_per_node", "RUN_ID": "run.id",
    "SPOT": "infra.spot", "RDMA": "infra.rdma", "INFRA_SPEC": "infra.sky_infra",
    "K8S_FLAVOR": "infra.k8s_flavor", "WORK_ROOT": "storage.mount", "ACCELERATOR": "cluster.accelerator",
    "OUT": "run.out", "SMOKE": "train.smoke", "REHEARSE": "train.rehearse",
    "IMAGE": "framework.image_ref", "REGISTRY": "framework.registry", "DATA": "data.source",
    "PREPARE": "data.prepare",
    "CODE": "code.dir", "CODE_DIRTY": "code.allow_dirty", "CMD": "code.command",
}
# The infrastructures' registry is standard library only, as this module is.
INFRAS = backends.names()
# The algorithms rlaunch renders (algo.name; rlaunch.config.spec types the key with it).
AlgoName = Literal["grpo", "ppo"]
ALGOS: list[str] = list(get_args(AlgoName))
# Infrastructures that SkyPilot launches -> their cloud: INFRA_SPEC (a SkyPilot infra string) applies
# to these only.
SKY_INFRAS = backends.sky_clouds()


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs `make` exported (RLAUNCH_KNOB_NAME -> NAME), exactly as given; empty ones left out."""
    environ = os.environ if environ is None else environ
    return {k[len(ENV_PREFIX):]: v for k, v in environ.items() if k.startswith(ENV_PREFIX) and v != ""}


def split_set(text: str) -> list[str]:
    """SET's overrides, split like a shell command line: `a.b="x y" c.d=1` -> ['a.b=x y', 'c.d=1']."""
    try:
        return shlex.split(text)
    except ValueError as err:  # shlex's only error: "No closing quotation" / "No escaped character"
        raise ConfigError("SET", text, f"{str(err).lower()}: SET is split like a shell command line; "
                          "close the quote or escape it (\\' or \\\")") from None


# ---------------------------------------------------------------- the rules
# Each returns None when the value is allowed, else what is allowed (for the error message).

RUN_ID_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
RUN_ID_MAX = 40
PRESET_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
PATH_PART_RE = r"[A-Za-z0-9._+@-]+"
ACCELERATOR_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# Docker's reference grammar (distribution/reference): domain[:port] then path components.
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY_RE = rf"^{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?(?:/{_PATH_PART})*/?$"
TAG_RE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"

# SkyPilot 0.14.1's clouds (sky.utils.registry.CLOUD_REGISTRY, names and aliases; 'local' is excluded
# there); tests/unit/test_knobs.py compares this list with SkyPilot's own.
SKY_CLOUDS = ("aws", "azure", "cudo", "do", "fluidstack", "gcp", "hyperbolic", "ibm", "kubernetes",
              "lambda", "mithril", "nebius", "oci", "paperspace", "primeintellect", "runpod", "scp",
              "seeweb", "shadeform", "slurm", "ssh", "vast", "verda", "vsphere", "yotta")
SKY_CLOUD_ALIASES = {"k8s": "kubernetes", "digitalocean": "do"}
_SKY_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"          # a region or a zone (us-central1, us-east-1a, ...)
_SKY_CONTEXT = r"[A-Za-z0-9][A-Za-z0-9._:@+-]*"    # a kube context or SSH pool part (arn:aws:eks:...)
SKY_INFRA_ALLOWED = (
    "a SkyPilot infra string: CLOUD, CLOUD/REGION or CLOUD/REGION/ZONE, k8s/CONTEXT or ssh/POOL "
    "(* for any part); CLOUD one of " + ", ".join(sorted(set(SKY_CLOUDS) | set(SKY_CLOUD_ALIASES))) +
    "; names of letters, digits and . _ - (a context also : @ + and /), no spaces")


def run_id_problem(value: str) -> str | None:
    if re.fullmatch(RUN_ID_RE, value) and len(value) <= RUN_ID_MAX:
        return None
    return (f"lower-case letters, digits and '-', at most {RUN_ID_MAX} characters, starting and ending "
            "with a letter or digit (it names clusters and Kubernetes objects)")


def preset_problem(value: str) -> str | None:
    return None if re.fullmatch(PRESET_RE, value) else (
        "a preset name: letters, digits, '.', '_', '-' (make presets lists them)")


def path_problem(value: str) -> str | None:
    """An absolute, normalized path other than /, of characters no script, manifest or form mangles."""
    parts = value.rstrip("/").split("/")
    if (value.startswith("/") and len(parts) > 1
            and all(re.fullmatch(PATH_PART_RE, p) and p not in (".", "..") for p in parts[1:])):
        return None
    return "an absolute path other than /, its parts letters, digits and . _ - + @ (no '.', '..' or '//')"


# C0, DEL, C1 (CSI \x9b starts a terminal escape too) and Unicode's line and paragraph separators.
CONTROL_RE = r"[\x00-\x1f\x7f-\x9f\u2028\u2029]"


def text_problem(value: str) -> str | None:
    """Any free-text value: one line without control characters. Rendered files, logs and terminals
    show it; a newline would start a new command or log line, an escape would rewrite the screen."""
    return None if not re.search(CONTROL_RE, value) else (
        "one line of text without control characters (newline, tab, escape, NUL, ...)")


def out_problem(value: str) -> str | None:
    """OUT: any directory path, but one line: rendered files quote it in comments and commands."""
    return None if not re.search(CONTROL_RE, value) else (
        "a directory path without control characters (newline, tab, ...)")


# CODE as a workflow input: a repository the runner fetches over HTTPS (it has no SSH key), at a full
# commit (a branch would move). rlaunch.config.code reads the same `<url>@<40-hex>` form.
CODE_REF_RE = r"^https://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[A-Za-z0-9._~-]+)+@[0-9a-f]{40}$"


def code_ref_problem(value: str) -> str | None:
    return None if re.fullmatch(CODE_REF_RE, value) else (
        "a git repository at a full commit: https://HOST/PATH@<40 lower-case hex> "
        "(empty: the preset's own program)")


def sky_infra_problem(value: str) -> str | None:
    """SkyPilot's infra syntax (sky.utils.infra_utils.InfraInfo.from_str at 0.14.1) and its clouds."""
    cloud, _, rest = value.partition("/")
    cloud = cloud.lower()
    if cloud != "*" and cloud not in SKY_CLOUDS and cloud not in SKY_CLOUD_ALIASES:
        return SKY_INFRA_ALLOWED
    if not rest and "/" not in value:
        return None
    if SKY_CLOUD_ALIASES.get(cloud, cloud) in ("kubernetes", "ssh"):
        # SkyPilot takes everything after k8s/ as the context (it may hold '/'), after ssh/ the pool.
        ok = re.fullmatch(rf"(?:\*|{_SKY_CONTEXT}(?:/{_SKY_CONTEXT})*)", rest)
    else:
        ok = re.fullmatch(rf"(?:\*|{_SKY_NAME})(?:/(?:\*|{_SKY_NAME}))?", rest)
    return None if ok else SKY_INFRA_ALLOWED


def sky_cloud(value: str) -> str:
    """The cloud of a SkyPilot infra string as SkyPilot names it ('' for '*')."""
    cloud = value.partition("/")[0].lower()
    return "" if cloud == "*" else SKY_CLOUD_ALIASES.get(cloud, cloud)


def accelerator_problem(value: str) -> str | None:
    return None if re.fullmatch(ACCELERATOR_RE, value) else (
        "a GPU type: letters, digits, '.', '_', '-' (e.g. H100, A100-80GB); the count is GPUS_PER_NODE")


def registry_problem(value: str) -> str | None:
    return None if re.fullmatch(REGISTRY_RE, value) else (
        "a registry and namespace as Docker names them, e.g. ghcr.io/acme or registry.example.com:5000/team "
        "(path parts lower-case letters, digits, '.', '_', '-')")


def tag_problem(value: str) -> str | None:
    return None if re.fullmatch(TAG_RE, value) else (
        "an image tag: letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-'")


IMAGE_REF_RE = rf"^(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*$"


def image_ref_problem(value: str) -> str | None:
    """IMAGE=: registry/name:tag (or @sha256:...), with a tag that is never `latest`: a moving tag
    would run another image than the one the plan checked."""
    allowed = ("an image reference with a fixed tag, e.g. ghcr.io/acme/verl:0.9.1-cu130 or "
               "name@sha256:<digest> (no tag and `latest` are not allowed: they move)")
    name, digest = value.split("@", 1) if "@" in value else (value, "")
    if digest:
        return None if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) and re.fullmatch(IMAGE_REF_RE, name) \
            else allowed
    repo, _, tag = name.rpartition(":")
    if not repo or "/" in tag or not re.fullmatch(IMAGE_REF_RE, repo) or not re.fullmatch(TAG_RE, tag):
        return allowed
    return allowed if tag == "latest" else None


def _choice(allowed: list[str]) -> Callable[[str], str | None]:
    return lambda value: None if value in allowed else "one of " + ", ".join(allowed)


def _count(minimum: int) -> Callable[[str], str | None]:
    return lambda value: None if re.fullmatch(r"[0-9]{1,6}", value) and int(value) >= minimum else (
        f"an integer >= {minimum}")


# Knob name -> its rule, for the values checked before any config is read (workflow inputs, image knobs).
RULES: dict[str, Callable[[str], str | None]] = {
    "INFRA": _choice(INFRAS), "ALGO": _choice(ALGOS), "PRESET": preset_problem, "RUN_ID": run_id_problem,
    "NODES": _count(1), "GPUS_PER_NODE": _count(0), "SPOT": _choice(["0", "1"]), "OUT": out_problem,
    "RESUME": _choice(["0", "1"]),
    "WORK_ROOT": path_problem, "INFRA_SPEC": sky_infra_problem, "ACCELERATOR": accelerator_problem,
    "REGISTRY": registry_problem, "TAG": tag_problem, "IMAGE": image_ref_problem,
    "BASE": _choice(["official", "standin"]), "BUILDER": _choice(["docker", "podman", "buildah"]),
    "CMD": text_problem,  # one line; its grammar is the config's to check (rlaunch.config.code)
}
# A workflow's inputs (--inputs): the same, and CODE only as a repository at a full commit (the runner
# has no checkout of the user's; make's CODE= also takes a directory, the config checks it).
INPUT_RULES: dict[str, Callable[[str], str | None]] = {**RULES, "CODE": code_ref_problem}


# Not fire (rlaunch.firecli): the workflows run this on the runner's bare python3, before `make
# setup`, with the standard library only. One verb and its flags, read here.
def main(argv: list[str]) -> int:
    parser = cmdline.parser("knobs", __doc__.split("\n\n")[0], epilog=__doc__.split("CLI:\n", 1)[1].rstrip())
    parser.add_argument("command", choices=["check"])
    parser.add_argument("--prefix", default="knobs: ", help="what the error line starts with")
    parser.add_argument("--inputs", action="store_true", help="name them as the workflow inputs do")
    parser.add_argument("names", nargs="*", metavar="NAME", help="one of " + ", ".join(INPUT_RULES))
    args = parser.parse_intermixed_args(argv)  # NAMEs may come before or after the options
    rules = INPUT_RULES if args.inputs else RULES
    unknown = [name for name in args.names if name not in rules]
    if unknown:
        parser.error(f"no rule for {unknown[0]!r}; rules: {', '.join(rules)}")
    for name in args.names:
        value = os.environ.get(name, "")
        problem = rules[name](value) if value != "" else None
        if problem:
            # repr(): one line whatever the value holds (a newline could start a workflow command).
            # A workflow reads its commands (::error::) from stdout.
            print(f"{args.prefix}{name.lower() if args.inputs else name} {value!r} not allowed: {problem}",
                  file=sys.stdout if args.inputs else sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

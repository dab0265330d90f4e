"""CMD= (spec `code.command`): the user's command line, as their script runs it, read once.

The forms the frameworks publish (issue 47):
    verl   python3 -m verl.trainer.main_ppo k=v ...    (or -m recipe.<x>, -m verl.experimental.<x>),
           optionally --config-path <dir in CODE> --config-name <name> (a recipe's own config)
    AReaL  python3 <script.py in CODE> --config <yaml in CODE> k=v ...   (examples/math/gsm8k_rl.py),
           or through its launcher: python3 -m areal.infra.launcher.<local|ray> <script.py> --config ...
           (AReaL's SPMD mode; `areal.launcher.<x>` before AReaL #919; slurm is refused: no Slurm here)
    RLinf  python3 <script.py in CODE> --config-path <dir in CODE> --config-name <name> k=v ...
Paths in it are relative to CODE (or `$PWD/...`, the directory the user's script ran from); the
framework is read from it (`framework_of`), AReaL's and RLinf's topology from the config it names
(`topology`) and verl's one-step-off / fully-async pools from its trainer.* and rollout.* (`pools`), so
the user does not repeat them as knobs. Standard library and PyYAML only.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlaunch.config import dotted
from rlaunch.config.knobs import CONTROL_RE
from rlaunch.errors import ConfigError

KEY = "code.command"
ALLOWED = ("python3 -m <module> key=value ... (verl; --config-path/--config-name allowed), or python3 "
           "[-m areal.infra.launcher.<local|ray>] <script.py in CODE> --config <yaml in CODE> key=value ... "
           "(AReaL), or python3 <script.py in CODE> "
           "--config-path <dir in CODE> --config-name <name> key=value ... (RLinf), one line")
_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.[0-9]+)?)?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_OPTIONS = {"--config": "config", "--config-path": "config_path", "-cp": "config_path",
            "--config-name": "config_name", "-cn": "config_name"}
# The packages each framework's programs import, and the entry modules that are its (recipes are verl's).
_MODULES = {"verl": ("verl", "recipe"), "areal": ("areal",), "rlinf": ("rlinf",)}
# AReaL's SPMD launchers (areal/infra/launcher/ at 1.0.4, areal/launcher/ before AReaL #919): they take
# the entry script and its --config, and place its processes themselves.
LAUNCHER = re.compile(r"^areal\.(?:infra\.)?launcher\.(?P<kind>local|ray|slurm)$")
FIX_SLURM = ("-m areal.infra.launcher.ray (several nodes; rlaunch forms the Ray cluster) or .local (one node), "
             "or no launcher: python3 <entry>.py --config <yaml> scheduler.type=ray")
_IMPORT = re.compile(r"^\s*(?:from|import)\s+(verl|recipe|areal|rlinf)\b", re.M)


@dataclass(frozen=True)
class Command:
    module: str = ""        # -m <module>
    launcher: str = ""      # -m areal[.infra].launcher.<local|ray>: AReaL's launcher, running `script`
    script: str = ""        # <script.py>, relative to CODE
    config: str = ""        # AReaL's --config <yaml>, relative to CODE
    config_path: str = ""   # Hydra's --config-path <dir>, relative to CODE
    config_name: str = ""   # Hydra's --config-name
    args: tuple[str, ...] = field(default=())  # key=value, as given

    def overrides(self) -> dict[str, str]:
        """The args as key -> value, Hydra's +/++ prefixes dropped (a later one wins)."""
        out = {}
        for arg in self.args:
            key, _, value = arg.partition("=")
            if not key.startswith("~"):
                out[key.lstrip("+")] = value
        return out


def _fail(text: str, why: str, source: str) -> ConfigError:
    return ConfigError(KEY, text, f"{ALLOWED}: {why}" if why else ALLOWED, source)


def _in_code(text: str, option: str, value: str, source: str) -> str:
    """A path the command names, as a path relative to CODE (`$PWD/` is CODE's directory)."""
    path = re.sub(r"^(\$PWD|\$\{PWD\}|\.)/", "", value)
    rel = os.path.normpath(path) if path else ""
    if not rel or rel.startswith(("/", "~", "..")) or "$" in rel:
        raise ConfigError(KEY, text, f"{option} {value}: a path relative to CODE (the directory your script "
                          "runs from, packed and carried to every node; `$PWD/...` is the same); put the "
                          "file in CODE= and name it from there", source)
    return rel


def parse(text: str, source: str = "") -> Command:
    """CMD's text as a Command; one ConfigError naming CMD for anything else."""
    if re.search(CONTROL_RE, text):  # the rule every text key has (rlaunch.config.knobs)
        raise _fail(text, "no control characters", source)
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise _fail(text, str(err).lower(), source) from None
    if len(argv) < 2 or not _PYTHON.match(argv[0]):
        raise _fail(text, "", source)
    found: dict[str, str] = {}
    launcher = LAUNCHER.match(argv[2]) if argv[1] == "-m" and len(argv) > 2 else None
    if launcher:
        if launcher["kind"] == "slurm":
            raise ConfigError(KEY, text, f"-m {argv[2]}: AReaL's Slurm launcher submits sbatch jobs to a Slurm "
                              f"controller, which rlaunch's clusters do not have; use {FIX_SLURM}", source)
        if len(argv) < 4 or not argv[3].endswith(".py"):
            raise _fail(text, f"-m {argv[2]} needs the entry script it runs (<script.py in CODE>)", source)
        found["launcher"] = argv[2]
        found["script"], rest = _in_code(text, "the script", argv[3], source), argv[4:]
    elif argv[1] == "-m":
        if len(argv) < 3 or not _MODULE.match(argv[2]):
            raise _fail(text, "-m needs a module name", source)
        found["module"], rest = argv[2], argv[3:]
    elif argv[1].endswith(".py"):
        found["script"], rest = _in_code(text, "the script", argv[1], source), argv[2:]
    else:
        raise _fail(text, f"{argv[1]!r} is neither -m <module> nor a .py script", source)
    args: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, inline = arg.partition("=")
        if name in _OPTIONS:
            value = inline if eq else (rest[i + 1] if i + 1 < len(rest) else "")
            i += 1 if eq else 2
            if not value:
                raise _fail(text, f"{name} needs a value", source)
            slot = _OPTIONS[name]
            found[slot] = value if slot == "config_name" else _in_code(text, name, value, source)
            continue
        deletion = arg.startswith("~") and bool(_MODULE.match(arg[1:]))  # Hydra's ~key: delete it
        if ("=" not in arg and not deletion) or arg.startswith("-"):
            raise _fail(text, f"{arg!r} is not key=value", source)
        args.append(arg)
        i += 1
    if "config" in found and ("config_path" in found or "config_name" in found):
        raise _fail(text, "--config (AReaL) and --config-path/--config-name (Hydra) together", source)
    if ("config_path" in found) != ("config_name" in found):
        raise _fail(text, "--config-path and --config-name go together", source)
    if "launcher" in found and "config" not in found:
        raise _fail(text, f"-m {found['launcher']} needs --config <yaml in CODE> (AReaL's parse_cli_args "
                    "requires it)", source)
    if "module" in found and "config" in found:
        raise _fail(text, "--config is AReaL's, whose entry is a script", source)
    return Command(args=tuple(args), **found)


def framework_of(cmd: Command, root: Path | None) -> tuple[str, str]:
    """(framework, why) read from the command: its module's package, else what its script (in CODE at
    `root`) imports; ("", why) when that is not one framework."""
    if cmd.launcher:
        return "areal", f"-m {cmd.launcher}"
    if cmd.module:
        top = cmd.module.split(".", 1)[0]
        name = next((fw for fw, tops in _MODULES.items() if top in tops), "")
        return name, f"-m {cmd.module}"
    script = root / cmd.script if root is not None else None
    if script is None or not script.is_file():
        return "", f"{cmd.script} is not in CODE" if root is not None else "CODE is not set"
    tops = set(_IMPORT.findall(script.read_text(encoding="utf-8", errors="replace")))
    names = sorted({fw for fw, packages in _MODULES.items() if tops & set(packages)})
    if len(names) == 1:
        return names[0], f"{cmd.script} imports {names[0]}"
    return "", f"{cmd.script} imports {' and '.join(names) if names else 'none of verl, areal, rlinf'}"


def config_file(cmd: Command) -> str:
    """The config the command names, relative to CODE ("" for none)."""
    if cmd.config:
        return cmd.config
    if cmd.config_path:
        name = cmd.config_name if cmd.config_name.endswith(".yaml") else f"{cmd.config_name}.yaml"
        return os.path.normpath(f"{cmd.config_path}/{name}")
    return ""


def read_config(text: str, cmd: Command, root: Path, source: str = "") -> dict[str, Any]:
    """The YAML the command names, from CODE at `root`, with the command's key=value on top (as YAML
    values); what the framework itself composes is its loader's to check."""
    import yaml  # here, not above: job steps import this module (via cmdfacts) where PyYAML may be absent

    rel = config_file(cmd)
    path = root / rel
    if not path.is_file():
        raise ConfigError(KEY, text, f"a config file in CODE: {rel} is not in {root}", source)
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(KEY, text, f"a config that parses: {rel} is not valid YAML ({err})", source) from None
    if not isinstance(tree, dict):
        raise ConfigError(KEY, text, f"a config that is a mapping: {rel} is a {type(tree).__name__}", source)
    for key, raw in cmd.overrides().items():
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        try:
            dotted.put(tree, key, value)
        except TypeError:
            continue  # a key through a scalar: the framework's loader names it
    return tree


# What rlaunch's spec follows from the user's config: framework -> (spec key, the config's key, the
# framework's default when the config has none: AReaL 1.0.4's ClusterSpecConfig, 32 nodes x 8 GPUs).
TOPOLOGY: dict[str, tuple[tuple[str, str, int | None], ...]] = {
    "areal": (("cluster.nodes", "cluster.n_nodes", 32), ("cluster.gpus_per_node", "cluster.n_gpus_per_node", 8)),
    "rlinf": (("cluster.nodes", "cluster.num_nodes", None),),
}


def topology(framework: str, text: str, cmd: Command, root: Path, source: str = "") -> dict[str, tuple[str, int]]:
    """spec key -> (where the value is said, the value): the nodes and GPUs the user's config and command
    give (AReaL cluster.*, RLinf cluster.num_nodes); empty for verl, whose trainer.* are overrides."""
    pairs = TOPOLOGY.get(framework, ())
    if not pairs or not config_file(cmd):
        return {}
    tree = read_config(text, cmd, root, source)
    given = cmd.overrides()
    out = {}
    for spec_key, key, default in pairs:
        value = dotted.get(tree, key, None)
        where = f"CMD's {key}" if key in given else f"{config_file(cmd)}'s {key}"
        if value is None and default is None:
            continue
        if value is None:
            value, where = default, f"{framework}'s default {key} ({config_file(cmd)} sets none)"
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(KEY, text, f"an integer >= 1 for {key}: {where} is {value!r}", source)
        out[spec_key] = (where, value)
    return out


# verl's entries that train on one resource pool and generate on another beside it
# (verl/experimental/separation/utils.py): trainer.* and rollout.* nodes x GPUs, each 1 x 8 by default.
SEPARATE_POOLS = ("verl.experimental.one_step_off_policy.main_ppo",
                  "verl.experimental.fully_async_policy.fully_async_main")
POOLS = (("trainer.nnodes", "trainer.n_gpus_per_node"), ("rollout.nnodes", "rollout.n_gpus_per_node"))
NODE_GPUS = 8  # the GPUs of the clouds' largest common node: two pools of 8 a node are two nodes, not one of 16


def pools(cmd: Command, text: str, source: str = "") -> dict[str, tuple[str, int]]:
    """spec key -> (where, value): the cluster that holds both pools of a SEPARATE_POOLS entry, read from
    its trainer.* and rollout.* (pools of one node count share each node where they fit in NODE_GPUS or
    differ in size; pools of one GPU count otherwise add nodes); empty for any other command."""
    if cmd.module not in SEPARATE_POOLS:
        return {}
    given = cmd.overrides()
    (tn, tg), (rn, rg) = [[_count(key, given.get(key, "8" if "gpus" in key else "1"), text, source)
                           for key in pair] for pair in POOLS]
    where = "CMD's trainer.* and rollout.*"
    if tn == rn and (tg + rg <= NODE_GPUS or tg != rg):
        return {"cluster.nodes": (where, tn), "cluster.gpus_per_node": (where, tg + rg)}
    if tg == rg:
        return {"cluster.nodes": (where, tn + rn), "cluster.gpus_per_node": (where, tg)}
    raise ConfigError(KEY, text, f"rollout.nnodes={rn} equal to trainer.nnodes={tn} (each node holds both "
                      f"pools) or rollout.n_gpus_per_node={rg} equal to trainer.n_gpus_per_node={tg} (each "
                      "pool on nodes of its own): rlaunch's nodes are all of one size", source)


def _count(key: str, raw: str, text: str, source: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(KEY, text, f"an integer >= 1 for {key}: CMD's {key} is {raw!r}", source)
    return value


def trainer_pool(spec: Any) -> tuple[int, int] | None:
    """(nodes, GPUs a node) of a SEPARATE_POOLS verl entry's trainer pool, as CMD gives it (verl's
    defaults 1 x 8 otherwise); None: verl trains on the whole cluster."""
    cmd = parse(spec.code.command) if spec.code.command else None
    if cmd is None or cmd.module not in SEPARATE_POOLS:
        return None
    given = cmd.overrides()
    return int(given.get("trainer.nnodes", 1)), int(given.get("trainer.n_gpus_per_node", 8))

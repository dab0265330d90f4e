"""`make import SCRIPT=run_grpo.sh [NAME=...]`: a verl or AReaL launch script becomes a preset,
configs/presets/<name>.yaml (issues 29, 47).

Safe: the script is read, never executed. Its text is split the way bash would split it (shlex, with
line continuations joined and comments dropped); simple `VAR=value` / `export VAR=value` lines are
remembered and `$VAR`, `${VAR}`, `${VAR:-default}` expanded from them (what is not defined there, such
as $HOME, is said to be unresolved). Every mapped and every dropped key is printed with why.

verl (`verl.trainer.main_ppo`): the command line is read key by key: what rlaunch owns is mapped onto
its keys by the framework's own table (its adapter's `owned`, rlaunch.config.overrides), what rlaunch
makes itself (data files, output directories, experiment names) is dropped, and the rest goes into
framework.overrides. Another entry (`-m verl.experimental.*`, `-m recipe.*`) is recorded as
code.command, CMD's module; the user passes CODE= for the checkout that holds it.

AReaL (`python3 <entry>.py --config <yaml> k=v`, or through its launcher `python3 -m
areal.infra.launcher.<local|ray> <entry>.py ...`): the script's own command becomes code.command (CMD),
its entry, YAML and key=value as given, allocation_mode kept; only the names and fileroot rlaunch sets
itself are dropped. Names that moved before the pinned AReaL are written as they are at the pin, each
said (areal.launcher.* -> areal.infra.launcher.*, gsm8k_grpo.py -> gsm8k_rl.py, `sglang.d4+d4` ->
`sglang:d4+fsdp:d4`); the Slurm launcher becomes the Ray one (no Slurm here); a launcher with no
allocation_mode is left out (AReaL's single-controller mode, placed by the YAML). An entry and YAML
under examples/ are AReaL's own: the preset records AReaL's checkout at the pin
(`<repo>@<commit>`, configs/versions.yaml) as code.dir, so it plans with no further knob; any other
entry is the user's, and the report says to pass CODE=.

    python -m rlaunch.cli.importer SCRIPT [--name NAME] [--out DIR] [--accelerator H100]
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlaunch import CONFIGS, cmdline
from rlaunch.errors import ConfigError
from rlaunch.config import pins
from rlaunch.config.overrides import value as parse_value
from rlaunch.registry import frameworks

VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)(?::-(?P<default>[^}]*))?\}|(?P<plain>[A-Za-z_]\w*))")
ASSIGN = re.compile(r"[A-Za-z_]\w*=")
# What rlaunch makes itself: dropped, with why.
DROPPED = {
    "verl": {
        "data.train_files": "data files are rlaunch's: data.dataset's pinned download (or SET data.path=<dir>)",
        "data.val_files": "data files are rlaunch's: data.dataset's pinned download (or SET data.path=<dir>)",
        "trainer.experiment_name": "the experiment name is the run's (run.name)",
        "trainer.default_local_dir": "checkpoints go to the run directory",
        "trainer.resume_mode": "rlaunch resumes every restart from the run's checkpoints (auto)",
        "trainer.logger": "rlaunch's loggers: console, file (postflight reads it), wandb with logging.wandb",
    },
    "areal": {  # rlaunch sets these after the command's own (++key=..., rlaunch.frameworks.areal)
        "experiment_name": "the experiment name is the run's (run.name)",
        "trial_name": "the trial name is the run's id (run.id)",
        "cluster.fileroot": "outputs go to the run directory",
    },
}
# Names in AReaL's published launches that moved before the pinned AReaL, as they are at the pin.
AREAL_RENAMED = {
    **{f"areal.launcher.{k}": (f"areal.infra.launcher.{k}", "AReaL #919 moved the launchers")
       for k in ("local", "ray", "slurm")},
    "examples/math/gsm8k_grpo.py": ("examples/math/gsm8k_rl.py", "AReaL #660 renamed the GSM8K entry"),
}
# A launcher that cannot run on rlaunch's clusters, and the one that runs the same allocation there.
AREAL_LAUNCHER_HERE = {"areal.infra.launcher.slurm": ("areal.infra.launcher.ray", "rlaunch's clusters have no "
                                                      "Slurm controller; the Ray launcher places the same "
                                                      "allocation_mode on the Ray cluster rlaunch forms")}
AREAL_EXAMPLES = "examples/"  # AReaL's own entry scripts and YAMLs: its checkout at the pin holds them
DATASETS = ("gsm8k", "math")


@dataclass
class Imported:
    framework: str
    preset: dict[str, Any]
    mapped: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def logical_lines(text: str) -> list[list[str]]:
    """The script's commands as bash splits them: continuations joined, comments dropped."""
    joined = re.sub(r"\\\r?\n", " ", text)
    out = []
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True, posix=True)
        except ValueError:
            continue  # an unbalanced quote: not a line this reader understands (it is said below)
        if words:
            out.append(words)
    return out


def expand(word: str, env: dict[str, str], unresolved: list[str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m["braced"] or m["plain"]
        if name in env:
            return env[name]
        if m["default"] is not None:
            return m["default"]
        if name not in unresolved:
            unresolved.append(name)
        return m[0]
    return VAR.sub(sub, word)


VERL_ENTRY = "verl.trainer.main_ppo"


def _verl_module(words: list[str], i: int) -> str:
    """The verl entry module `python3 -m <module>` names at words[i] ('' when it is none): main_ppo,
    one of verl's own other trainers (verl.experimental.*) or a recipe's (recipe.*, the user's checkout)."""
    w = words[i]
    if w == VERL_ENTRY or w.endswith("verl/trainer/main_ppo.py"):
        return VERL_ENTRY
    if i > 0 and words[i - 1] == "-m" and w.startswith(("verl.", "recipe.")):
        return w
    return ""


def find_command(lines: list[list[str]]) -> tuple[str, list[str], dict[str, str], list[str], str]:
    """(framework, its key=value arguments, the script's variables, unresolved names, the entry: verl's
    module or '', AReaL's `[-m <launcher>] <script>.py`)."""
    env: dict[str, str] = {}
    unresolved: list[str] = []
    for words in lines:
        if words[0] == "export":
            words = words[1:]
        if words and all(ASSIGN.match(w) for w in words):
            for w in words:
                name, _, val = w.partition("=")
                env[name] = expand(val, env, unresolved)
            continue
        for i, w in enumerate(words):
            module = _verl_module(words, i)
            if module:
                return "verl", [expand(a, env, unresolved) for a in words[i + 1:]], env, unresolved, module
            launcher = w.startswith(("areal.launcher.", "areal.infra.launcher.")) and i + 1 < len(words)
            if launcher or (w.endswith(".py") and "--config" in words[i + 1:]):
                head = [f"-m {w}", words[i + 1]] if launcher else [w]  # the launcher runs the entry after it
                rest = words[i + len(head):]
                entry = " ".join(expand(a, env, unresolved) for a in head)
                return "areal", [expand(a, env, unresolved) for a in rest], env, unresolved, entry
    raise ConfigError("SCRIPT", "", "a script that runs verl (python3 -m verl.trainer.main_ppo, "
                      "verl.experimental.* or recipe.* ...) or AReaL (python3 [-m areal.infra.launcher."
                      "<local|ray>] <entry>.py --config ... key=value ...)")


def _put(tree: dict[str, Any], key: str, val: Any) -> None:
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = val


def convert(text: str, accelerator: str = "H100") -> Imported:
    lines = logical_lines(text)
    name, args, _env, unresolved, module = find_command(lines)
    if name == "areal":
        return convert_areal(module, args, unresolved, accelerator)
    owned = frameworks.get(name).owned
    result = Imported(name, {"framework": {"name": name, "overrides": []}}, unresolved=unresolved)
    if module and module != VERL_ENTRY:
        # Its own entry: CMD's module (its key=value stay overrides below, checked as SET's are). A
        # recipe's module is in the user's checkout, which only CODE= carries to the nodes.
        result.preset["code"] = {"command": f"python3 -m {module}"}
        result.mapped.append(f"code.command='python3 -m {module}': the script's entry, not {VERL_ENTRY}; "
                             "pass CODE=<your checkout> (a directory or <git url>@<commit>) so every node has it")
    preset, overrides = result.preset, result.preset["framework"]["overrides"]
    seen: dict[str, str] = {}
    args_iter = iter(args)
    for arg in args_iter:
        if arg in ("$@", "$*", '"$@"'):
            result.dropped.append(f"{arg}: the script's own extra arguments (none when rlaunch runs it)")
            continue
        if arg == "--config":
            result.dropped.append(f"--config {next(args_iter, '')}: rlaunch renders AReaL's experiment YAML "
                                  "(gsm8k_grpo.yaml's settings at the pin)")
            continue
        key, sep, raw = arg.partition("=")
        bare = key.lstrip("+~")
        if not sep:
            result.dropped.append(f"{arg}: not a key=value override")
            continue
        why = DROPPED[name].get(bare)
        if bare == "trainer.logger" and "wandb" in raw:
            _put(preset, "logging.wandb", True)
            result.mapped.append("logging.wandb=True: trainer.logger has wandb (WANDB_API_KEY is forwarded by name)")
        if bare.endswith("train_files") and any(d in raw for d in DATASETS):
            dataset = next(d for d in DATASETS if d in raw)
            if "dataset" not in preset.get("data", {}):
                _put(preset, "data.dataset", dataset)
                result.mapped.append(f"data.dataset={dataset}: the script's train files are {dataset}'s")
        if why:
            result.dropped.append(f"{bare}={raw}: {why}")
            continue
        if "$" in raw:
            result.dropped.append(f"{bare}={raw}: holds a variable the script does not define "
                                  f"({', '.join(unresolved) or '?'}); set it yourself")
            continue
        rule = owned.get(bare)
        if rule is None:
            overrides.append(f"{key}={raw}")
            continue
        if rule.refuse:
            result.dropped.append(f"{bare}={raw}: rlaunch's {rule.key} decides it ({rule.refuse})")
            continue
        if rule.problem and rule.problem(parse_value(raw)):
            overrides.append(f"{key}={raw}")  # make plan says why it cannot run (the framework's rule)
            continue
        if rule.keep:
            overrides.append(f"{key}={raw}")
        val = rule.convert(parse_value(raw)) if rule.convert else parse_value(raw)
        if rule.key in seen and seen[rule.key] != repr(val):
            result.dropped.append(f"{bare}={raw}: {rule.key} is already {seen[rule.key]} (from an earlier key)")
            continue
        seen[rule.key] = repr(val)
        _put(preset, rule.key, val)
        result.mapped.append(f"{rule.key}={val!r}: from {bare}")
        if bare == "algorithm.adv_estimator":
            algo = "ppo" if val == "gae" else "grpo"
            _put(preset, "algo.name", algo)
            result.mapped.append(f"algo.name={algo}: adv_estimator {val}")
    if preset.get("cluster", {}).get("gpus_per_node") and "accelerator" not in preset["cluster"]:
        preset["cluster"]["accelerator"] = accelerator
        result.mapped.append(f"cluster.accelerator={accelerator!r}: the script does not say (ACCELERATOR= changes it)")
    return result


def _areal_allocation(raw: str) -> str:
    """allocation_mode in AReaL 1.0.4's syntax: `engine:dims` each part (older AReaL wrote
    `sglang.d12p1t1+d4p1t1`, the training part's engine fsdp by default)."""
    parts = [re.sub(r"^([a-z_]+)\.(?=[a-z])", r"\1:", part) for part in raw.split("+")]
    return "+".join(part if ":" in part else f"fsdp:{part}" for part in parts)


def convert_areal(entry: str, args: list[str], unresolved: list[str], accelerator: str) -> Imported:
    """An AReaL launch as CMD (code.command): its launcher, entry script, --config YAML and key=value,
    as given (allocation_mode kept), less the names and fileroot rlaunch sets; old names at the pin.
    AReaL's own examples record its checkout at the pin as CODE, so the preset plans as it is."""
    result = Imported("areal", {"framework": {"name": "areal"}}, unresolved=unresolved)
    head: list[str] = []
    for word in entry.split():
        new, why = AREAL_RENAMED.get(word, (word, ""))
        if why:
            result.mapped.append(f"{word} -> {new}: its name at AReaL {pins.get('frameworks.areal.version')} ({why})")
        here, why = AREAL_LAUNCHER_HERE.get(new, (new, ""))
        if why:
            result.mapped.append(f"{new} -> {here}: {why}")
        head.append(here)
    kept: list[str] = []
    allocation = ""
    args_iter = iter(args)
    for arg in args_iter:
        while "<" in arg and not arg.endswith(">"):  # a documentation placeholder: <your trial name>
            word = next(args_iter, ">")
            arg = f"{arg} {word}"
        key, sep, raw = arg.partition("=")
        bare = key.lstrip("+~")
        if arg == "--config" or key == "--config":
            kept += ["--config", raw if sep else next(args_iter, "")]
        elif arg in ("$@", "$*", '"$@"'):
            result.dropped.append(f"{arg}: the script's own extra arguments (none when rlaunch runs it)")
        elif not sep:
            result.dropped.append(f"{arg}: not a key=value override")
        elif bare in DROPPED["areal"]:
            result.dropped.append(f"{bare}={raw}: {DROPPED['areal'][bare]}")
        elif "$" in raw:
            result.dropped.append(f"{bare}={raw}: holds a variable the script does not define "
                                  f"({', '.join(unresolved) or '?'}); the YAML's value runs, or set it in CMD")
        elif bare == "allocation_mode" and (_areal_allocation(raw) != raw or key == bare):
            # AReaL 1.0.4's example YAMLs have no allocation_mode (they place by rollout.backend and
            # actor.backend), and Hydra adds a key only with +: ++ sets it whether the YAML has it or not.
            allocation = _areal_allocation(raw)
            kept.append(f"++allocation_mode={allocation}")
            result.mapped.append(f"++allocation_mode={_areal_allocation(raw)}: {arg} in AReaL "
                                 f"{pins.get('frameworks.areal.version')}'s syntax (a colon after each engine; "
                                 "++: its example YAMLs have no allocation_mode key)")
        else:
            allocation = raw if bare == "allocation_mode" else allocation
            kept.append(arg)
    if head[0] == "-m" and not any(a.lstrip("+").startswith("allocation_mode=") for a in kept):
        result.mapped.append(f"-m {head[1]} left out: AReaL {pins.get('frameworks.areal.version')}'s SPMD "
                             "launchers place by allocation_mode, which the script does not give; the entry runs "
                             "in AReaL's single-controller mode, placed by its YAML's rollout.backend and "
                             "actor.backend (scheduler.type: rlaunch's, local on one node, ray on several)")
        head = head[2:]
    train = [part for part in allocation.split("+") if part.startswith(("fsdp", "megatron", "archon"))]
    if head[0] == "-m" and len(train) == 1 and not any(a.lstrip("+").startswith("actor.backend=") for a in kept):
        # The SPMD launcher starts the training part's processes; the trainer builds actor.backend's
        # process group over them (areal/trainer/rl_trainer.py at 1.0.4): the two must say the same.
        kept.append(f"actor.backend={train[0]}")
        result.mapped.append(f"actor.backend={train[0]}: allocation_mode's training part, which the launcher "
                             "starts (the YAML's actor.backend would otherwise size the trainer's process group)")
    script = head[-1]
    config = kept[kept.index("--config") + 1] if "--config" in kept[:-1] else ""
    command = shlex.join(["python3", *head, *kept])
    result.preset["code"] = {"command": command}
    result.mapped.append(f"code.command={command!r}: the script's own command (its entry, YAML and key=value; "
                         "the nodes, GPUs and allocation are its YAML's and its own)")
    if script.startswith(AREAL_EXAMPLES) and config.startswith(AREAL_EXAMPLES):
        pinned = f"{pins.get('frameworks.areal.repo')}@{pins.get('frameworks.areal.commit')}"
        result.preset["code"] = {"dir": pinned, **result.preset["code"]}
        result.mapped.append(f"code.dir={pinned!r}: {script} and {config} are AReaL's own examples, from its "
                             f"checkout at the pin (v{pins.get('frameworks.areal.version')}; fetched at make "
                             "plan; CODE=<your checkout> runs yours instead)")
    result.preset["cluster"] = {"accelerator": accelerator}
    result.mapped.append(f"cluster.accelerator={accelerator!r}: the script does not say (ACCELERATOR= changes it)")
    return result


def render(result: Imported, source: str) -> str:
    head = [f"# Imported by `make import` from {source} (the script was read, not run).",
            "# Mapped onto rlaunch's keys:", *[f"#   {m}" for m in result.mapped],
            "# Dropped:", *[f"#   {d}" for d in result.dropped]]
    if result.unresolved:
        head.append(f"# Unresolved variables: {', '.join(result.unresolved)}")
    return "\n".join(head) + "\n" + str(yaml.safe_dump(result.preset, sort_keys=False, default_flow_style=False))


def preset_name(script: Path, name: str) -> str:
    base = name or re.sub(r"[^a-z0-9-]+", "-", script.stem.lower()).strip("-")
    return base if base.startswith(("verl-", "areal-")) or name else f"imported-{base}"


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.cli.importer", __doc__.split("\n")[0])
    parser.add_argument("script")
    parser.add_argument("--name", default="")
    parser.add_argument("--out", default=str(CONFIGS / "presets"))
    parser.add_argument("--accelerator", default="H100")
    args = parser.parse_args(argv)
    script = Path(args.script)
    try:
        if not args.script or not script.is_file():
            raise ConfigError("SCRIPT", args.script, "a launch script file (make import SCRIPT=path/to/run.sh)")
        result = convert(script.read_text(encoding="utf-8"), args.accelerator or "H100")
    except ConfigError as err:
        print(f"rlaunch: {err}", file=sys.stderr)
        return err.exit_code
    name = preset_name(script, args.name)
    out = Path(args.out) / f"{name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result, str(script)), encoding="utf-8")
    print(f"import: {script} ({result.framework}) read, not run -> {out}")
    for line in result.mapped:
        print(f"  mapped   {line}")
    for line in result.dropped:
        print(f"  dropped  {line}")
    if "overrides" in result.preset["framework"]:
        print(f"  kept     {len(result.preset['framework']['overrides'])} framework.overrides "
              "(the framework's loader checks them at make plan)")
    if result.unresolved:
        print(f"  unresolved: {', '.join(result.unresolved)} (not defined in the script)")
    code = " CODE=<your checkout>" if "code" in result.preset and "dir" not in result.preset["code"] else ""
    print(f"then: make plan PRESET={name} INFRA=...{code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

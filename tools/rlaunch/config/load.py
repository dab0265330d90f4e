"""Layered experiment config: load, merge, override, validate once, derive what follows from it.

Layers, later wins:
    configs/defaults.yaml -> infra/<infra>.yaml -> algo/<algo>.yaml -> framework/<framework>.yaml
    -> presets/<preset>.yaml -> presets/<preset>@<infra>.yaml (if any: the preset's shape on that
    infrastructure) -> knobs (NODES=, GPUS_PER_NODE=, ...) -> SET="dotted.key=value ..."

defaults.yaml gives every key its first value; rlaunch.config.spec's models say what each key may be (type,
allowed values, bounds) and refuse any other key. `load` merges the layers, validates the result once
(every failure one ConfigError naming the key, the value, where it came from and what is allowed),
then `derive` computes what follows from it (names, paths, pins, the Ray and NCCL facts), each fact
once, into the frozen Spec everything else reads.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable

import yaml

from rlaunch import CONFIGS, ROOT
from rlaunch.config import code as _code  # `code` reads as the stdlib module's name
from rlaunch.config import command as _command
from rlaunch.config import cmdfacts as _cmdfacts
from rlaunch.config import datasource, dotted, hub, images, inputs, pins, prepare, rehearse, spec, topology
from rlaunch.config import overrides as _overrides  # load() has a parameter of that name
from rlaunch.config import knobs as _knobs
from rlaunch.errors import ConfigError
from rlaunch.config.knobs import KNOBS as KNOBS, RUN_ID_RE as RUN_ID_RE  # re-exported: tests read them here
from rlaunch.config.spec import ENUMS as ENUMS, SECRET_NAME as SECRET_NAME, Spec as Spec  # re-exported (tests)
from rlaunch.registry import backends, frameworks

# Kubernetes object names, as its API server checks them (apimachinery IsDNS1123Label and
# IsDNS1123Subdomain); kubectl would refuse any other only at launch.
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
K8S_NAMES = {  # key -> (pattern, max length, what it names)
    "infra.namespace": (DNS1123_LABEL, 63, "a Kubernetes namespace"),
    "storage.pvc": (DNS1123_SUBDOMAIN, 253, "a PersistentVolumeClaim"),
    "infra.kuberay.service_account": (DNS1123_SUBDOMAIN, 253, "a ServiceAccount"),
    "infra.kuberay.object_store_secret": (DNS1123_SUBDOMAIN, 253, "a Secret"),
}
# storage.source on SkyPilot infras: the bucket URL of each store rlaunch can name (storage.store),
# spelt as SkyPilot's StoreType.store_prefix() spells it; Azure's is the container's https URL.
SKY_SOURCES = {"gs://": "gcs", "s3://": "s3", "r2://": "r2", "cos://": "ibm", "oci://": "oci",
               "https://": "azure"}
AZURE_CONTAINER_URL = r"https://[a-z0-9]{3,24}\.blob\.core\.windows\.net/[^/]+(/.*)?"
# storage.source on INFRA=kuberay: what each K8S_FLAVOR mounts (its backend matches them up).
KUBERAY_SOURCES = {"gs://": "gke", "tos://": "vke"}

# With no PRESET, the algorithm and the infrastructure pick one: on the local machine GRPO is the
# CPU rehearsal everyone can run; elsewhere, the seeds' experiment for that infrastructure.
DEFAULT_PRESET = {
    ("grpo", "local"): "rehearsal",
    ("grpo", "kuberay"): "verl-grpo-gsm8k-32b",
    ("grpo", "aistudio"): "rlinf-grpo-pipeline-1.5b",
    ("grpo", ""): "verl-grpo-math-7b",  # gcp, aws, azure, k8s, sky
    ("ppo", ""): "verl-ppo-gsm8k-0.5b",
}


SKY_CODE_HOME = "/rlaunch/code"  # CODE on SkyPilot nodes: beside the artifacts' /rlaunch/run


def default_preset(algo: str, infra: str) -> str:
    return DEFAULT_PRESET.get((algo, infra)) or DEFAULT_PRESET.get((algo, ""), "rehearsal")


def _read_layer(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(str(path.relative_to(ROOT)), "<unparsable>", f"not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path.relative_to(ROOT)), type(data).__name__, "a layer must be a mapping")
    return data


def read_defaults() -> dict[str, Any]:
    """configs/defaults.yaml as written: every key and its default."""
    return _read_layer(CONFIGS / "defaults.yaml")


def available(kind: str) -> list[str]:
    """Names of the layer files of one kind (infra, algo, framework, presets)."""
    return sorted(p.stem for p in (CONFIGS / kind).glob("*.yaml") if "@" not in p.stem)


def _layer(kind: str, name: str, key: str, required: bool) -> dict[str, Any]:
    path = CONFIGS / kind / f"{name}.yaml"
    if not path.exists():
        if required:
            raise ConfigError(key, name, f"one of {', '.join(available(kind))}")
        return {}
    return _read_layer(path)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge, everything else (lists included) replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    return dotted.flat(tree, prefix)


def parse_assignment(text: str, source: str) -> tuple[str, Any]:
    """'a.b=value' -> ('a.b', value), the value read as YAML (3 -> int, true -> bool, [a,b] -> list).

    A string key takes the text exactly as given: YAML would drop quotes and '#...' and turn 1e5
    into a number."""
    key, sep, raw = text.partition("=")
    if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", key):
        raise ConfigError(text, text, "an override is dotted.key=value, e.g. cluster.nodes=4", source)
    if spec.is_text(key):
        return key, raw
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key, ("" if value is None else value)


def _set(tree: dict[str, Any], key: str, value: Any, source: str) -> None:
    try:
        dotted.put(tree, key, value)
    except TypeError:  # cluster.nodes.x=3: below a value there are no keys
        raise ConfigError(key, value, spec.suggest(key), source) from None


def validate(cfg: dict[str, Any], sources: dict[str, str] | None = None) -> spec.Config:
    """The merged config as a typed, frozen Config; the first problem raises one ConfigError."""
    from pydantic import ValidationError

    try:
        config = spec.Config.model_validate(cfg)
    except ValidationError as err:
        raise _config_error(err.errors(), sources or {}) from None
    _check_text(config, sources or {})
    return config


# Keys whose own rule says more than the general one (OUT: "a directory path ...").
TEXT_RULES = {"run.out": _knobs.out_problem}


def _check_text(config: spec.Config, sources: dict[str, str]) -> None:
    """Every string of the config (run names, paths, CODE, CMD, overrides, ...) is one line without
    control characters, by the knobs' rule: the first that is not names its key."""
    for key in spec.KEYS:
        value = attrgetter(key)(config)
        for text in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(text, str):
                _check(TEXT_RULES.get(key, _knobs.text_problem), key, text, sources)


def _config_error(errors: Sequence[Mapping[str, Any]], sources: dict[str, str]) -> ConfigError:
    """One line for pydantic's findings: the key, the value, where it came from, what is allowed.

    An unknown key first (a typo is the most common mistake, and it deserves a suggestion); else the
    first problem by key."""
    def key_of(error: Mapping[str, Any]) -> str:
        return ".".join(str(p) for p in error["loc"] if not isinstance(p, int)) or "config"

    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        key = key_of(unknown[0])
        return ConfigError(key, unknown[0]["input"], spec.suggest(key), sources.get(key, ""))
    first = min(errors, key=lambda e: [str(p) for p in e["loc"]])
    key = key_of(first)
    if key in spec.SECTIONS and first["type"] == "model_type":
        # `SET=cluster=3`: a value where a section stands is a key that does not exist.
        return ConfigError(key, first["input"], spec.suggest(key), sources.get(key, ""))
    allowed = spec.describe(key) if key in spec.KEYS or key in spec.SECTIONS else first["msg"]
    return ConfigError(key, first["input"], allowed, sources.get(key, ""))


def _get(tree: dict[str, Any], key: str) -> Any:
    return dotted.get(tree, key)


def _resolve_names(preset_layer: dict[str, Any], knobs: dict[str, str], sets: dict[str, Any]) -> dict[str, str]:
    """Which infra/algo/framework layer files to load: SET, then a knob, then the preset, then default."""
    names = {}
    for key, default in (("infra.name", "local"), ("algo.name", "grpo"), ("framework.name", "trl")):
        knob = next((k for k, v in KNOBS.items() if v == key), None)
        if key in sets:
            names[key] = sets[key]
        elif knob and knobs.get(knob):
            names[key] = knobs[knob]
        else:
            try:
                names[key] = _get(preset_layer, key)
            except KeyError:
                names[key] = default
    return names


def load(preset: str = "", knobs: dict[str, str] | None = None, overrides: str | list[str] = "",
         now: _dt.datetime | None = None, rules: bool = True) -> Spec:
    """Build the validated spec. `knobs` are Make variables (INFRA, NODES, ...), `overrides` SET's text.

    rules=False leaves out the rules about what a launch would do (check)."""
    cfg, sources, preset, rewrites = _merged(preset, knobs, overrides)
    spec_ = derive(validate(cfg, sources), preset, sources, now, [vars(r) for r in rewrites])
    if rules:
        check(spec_, sources)
    return spec_


def settings(preset: str = "", knobs: dict[str, str] | None = None, overrides: str | list[str] = "") -> spec.Config:
    """The config's layers merged and validated, nothing derived: where an infrastructure is (its
    namespace, the shared storage) for a command that acts on a run known only by its id. storage.mount
    is where the nodes see it (a local run's relative one: under the repository)."""
    cfg, sources, _, _ = _merged(preset, knobs, overrides)
    config = validate(cfg, sources)
    mount = _mount(config, sources)
    return config.model_copy(update={"storage": config.storage.model_copy(update={"mount": mount})})


def _merged(preset: str, knobs: dict[str, str] | None, overrides: str | list[str]
            ) -> tuple[dict[str, Any], dict[str, str], str, list[rehearse.Rewrite]]:
    """The layers merged, in order, with every key's source: (config, sources, preset, the rehearsal's
    rewrites)."""
    knobs = {k: str(v) for k, v in (knobs or {}).items() if v is not None and str(v) != ""}
    for name in knobs:
        if name not in KNOBS:
            raise ConfigError(name, knobs[name], "a knob is one of " + ", ".join(KNOBS))
    defaults = read_defaults()
    items = _knobs.split_set(overrides) if isinstance(overrides, str) else list(overrides)
    sets = dict(parse_assignment(item, "SET") for item in items)
    asked_preset = preset
    if not preset:
        algo = sets.get("algo.name") or knobs.get("ALGO") or "grpo"
        infra = sets.get("infra.name") or knobs.get("INFRA") or "local"
        preset = default_preset(str(algo), str(infra))
    if _knobs.preset_problem(preset):  # a name, never a path: configs/presets/<name>.yaml
        raise ConfigError("PRESET", preset, f"one of {', '.join(available('presets'))}")
    preset_layer = _layer("presets", preset, "PRESET", required=True)
    names = _resolve_names(preset_layer, knobs, sets)
    cmd_framework = _cmd_framework(asked_preset, preset_layer, knobs, sets, names)
    if cmd_framework and not asked_preset and names["framework.name"] != cmd_framework:
        preset = CMD_PRESET[cmd_framework]  # the framework's own preset: its model, data and shape
        preset_layer = _layer("presets", preset, "PRESET", required=True)
        names = _resolve_names(preset_layer, knobs, sets)
    asked_rehearse = sets["train.rehearse"] if "train.rehearse" in sets else \
        parse_assignment(f"train.rehearse={knobs.get('REHEARSE', 'false')}", "REHEARSE")[1]
    rehearsing = spec._bool(asked_rehearse) is True  # a bad value: validation names it below
    if rehearsing:  # before any layer: the local one is what a rehearsal runs on
        asked = "SET" if "infra.name" in sets else "INFRA" if knobs.get("INFRA") else "PRESET"
        preset_infra = names["infra.name"]
        names["infra.name"] = rehearse.infra(preset_infra, asked)
    for key, kind in (("infra.name", "infra"), ("algo.name", "algo"), ("framework.name", "framework")):
        if names[key] not in ENUMS[key]:
            source = "SET" if key in sets else next(k for k, v in KNOBS.items() if v == key)
            raise ConfigError(key, names[key], "one of " + ", ".join(ENUMS[key]), source)

    cfg, sources = copy.deepcopy(defaults), {}
    layers = [
        ("infra", names["infra.name"]), ("algo", names["algo.name"]),
        ("framework", names["framework.name"]),
    ]
    for kind, name in layers:
        layer = _layer(kind, name, kind, required=False)
        cfg = merge(cfg, layer)
        sources.update({k: f"configs/{kind}/{name}.yaml" for k in _flat(layer)})
    # A preset is written for its own infra; an explicit INFRA keeps the preset's experiment but not
    # its infra-specific settings, which the infra layer above already supplied.
    cfg = merge(cfg, preset_layer)
    sources.update({k: f"configs/presets/{preset}.yaml" for k in _flat(preset_layer)})
    # presets/<preset>@<infra>.yaml: how this experiment is shaped on one infrastructure.
    overlay_name = f"{preset}@{names['infra.name']}"
    overlay = _layer("presets", overlay_name, "PRESET", required=False)
    cfg = merge(cfg, overlay)
    sources.update({k: f"configs/presets/{overlay_name}.yaml" for k in _flat(overlay)})
    for knob, value in knobs.items():
        key = KNOBS[knob]
        _set(cfg, key, parse_assignment(f"{key}={value}", knob)[1], knob)
        sources[key] = knob
    for key, value in sets.items():
        _set(cfg, key, value, "SET")
        sources[key] = "SET"
    for key, value in names.items():
        _set(cfg, key, value, "")
    command = dotted.get(cfg, "code.command", "")
    args: list[str] = []
    if isinstance(command, str) and command and names["framework.name"] in _command.TOPOLOGY:
        _follow_command(cfg, sources, names["framework.name"], command)  # AReaL, RLinf: their config's own
    elif isinstance(command, str) and command:  # CMD= of verl: its key=value are overrides like SET's
        cmd = _command.parse(command, sources.get("code.command", ""))
        if cmd.config_path and not dotted.get(cfg, "code.dir", ""):
            raise ConfigError("code.dir", "", f"the directory that holds --config-path {cmd.config_path}: "
                              "set CODE= to it", sources.get("code.command", ""))
        _take_topology(cfg, sources, _command.pools(cmd, command, sources.get("code.command", "")))
        args = list(cmd.args)
        if isinstance(cfg["framework"].get("overrides"), list):
            cfg["framework"]["overrides"] = [*cfg["framework"]["overrides"], *args]
            sources["framework.overrides"] = sources.get("code.command", "CMD")
    # Overrides of what rlaunch owns become rlaunch's keys (or stop here), so every check sees them.
    _overrides.absorb(cfg, sources, frameworks.get(names["framework.name"]).owned, {"SET", *KNOBS}, frozenset(args))
    rewrites: list[rehearse.Rewrite] = []
    if rehearsing:
        if preset_infra != "local":
            rewrites.append(rehearse.Rewrite("infra.name", "local", preset_infra,
                                             "the rehearsal runs on this machine's local Ray cluster"))
        rewrites += rehearse.apply(cfg, sources)
    return cfg, sources, preset, rewrites


# CMD='s framework with no PRESET: that framework's own preset (its model, data and cluster shape).
CMD_PRESET = {"verl": "verl-grpo-math-7b", "areal": "areal-grpo-gsm8k", "rlinf": "rlinf-grpo-pipeline-1.5b"}


def _given(key: str, knobs: dict[str, str], sets: dict[str, Any], layer: dict[str, Any]) -> tuple[str, str]:
    """(value, its source) of a key from SET, its knob, then the preset."""
    knob = next((k for k, v in KNOBS.items() if v == key), "")
    if key in sets:
        return str(sets[key]), "SET"
    if knob and knobs.get(knob):
        return knobs[knob], knob
    return str(dotted.get(layer, key, "") or ""), "PRESET"


def _cmd_framework(asked_preset: str, layer: dict[str, Any], knobs: dict[str, str], sets: dict[str, Any],
                   names: dict[str, str]) -> str:
    """The framework CMD= runs (issue 47): read from its module or what its script imports; one that
    FRAMEWORK= or PRESET= contradicts is refused naming that one; "" without CMD, or when the
    command does not say and FRAMEWORK= or PRESET= does."""
    text, source = _given("code.command", knobs, sets, layer)
    if not text:
        return ""
    cmd = _command.parse(text, source)
    code_dir = _given("code.dir", knobs, sets, layer)[0]
    root = _code.resolve(code_dir, ROOT / "build" / _code.CACHE) if code_dir else None
    found, why = _command.framework_of(cmd, root)
    fw_value, fw_source = _given("framework.name", knobs, sets, layer)
    explicit = fw_source in ("SET", "FRAMEWORK")
    if found and explicit and fw_value != found:
        raise ConfigError("framework.name", fw_value, f"{found}, the framework CMD runs ({why}): leave "
                          f"{fw_source} out", fw_source)
    if found and asked_preset and names["framework.name"] != found:
        raise ConfigError("PRESET", asked_preset, f"a preset of {found}, the framework CMD runs ({why}): "
                          f"PRESET={CMD_PRESET[found]}, or no PRESET", "PRESET")
    if not found and not explicit and not asked_preset:
        raise ConfigError("framework.name", "", f"the framework CMD runs, which it does not say ({why}): set "
                          "FRAMEWORK=verl, areal or rlinf", "CMD" if source == "CMD" else source)
    return found


def _follow_command(cfg: dict[str, Any], sources: dict[str, str], framework: str, text: str) -> None:
    """AReaL's and RLinf's CMD=: the nodes and GPUs their config and command say become the spec's;
    a knob or SET that says otherwise is refused, naming both (issue 47)."""
    source = sources.get("code.command", "")
    cmd = _command.parse(text, source)
    if sources.get("framework.overrides") == "SET" and cfg["framework"].get("overrides"):
        raise ConfigError("framework.overrides", cfg["framework"]["overrides"], f"empty with CMD= of {framework}: "
                          "your config's keys go in CMD, as key=value after its config", "SET")
    code_dir = dotted.get(cfg, "code.dir", "")
    if not code_dir:
        raise ConfigError("code.dir", "", f"the directory that holds {cmd.script or 'the command'}'s files: "
                          f"CMD= of {framework} runs your script and config from CODE=", source)
    root = _code.resolve(str(code_dir), ROOT / "build" / _code.CACHE)
    _take_topology(cfg, sources, _command.topology(framework, text, cmd, root, source))
    # The model the config trains is the spec's model.path (facts, memory bound, checkpoints, inputs);
    # a `~` or relative one stays out, for the adapter's check to refuse naming its key.
    model = _cmdfacts.model(framework, text, root, source)
    if model is not None and _cmdfacts.taken(model.value):
        _take_topology(cfg, sources, {"model.path": (model.where, model.value.rstrip("/") or "/")})
        sources["model.path"] = model.where


def _take_topology(cfg: dict[str, Any], sources: dict[str, str], given: Mapping[str, tuple[str, int | str]]) -> None:
    """The cluster's nodes and GPUs that CMD says (where it says them, value) become the spec's; a knob
    or SET that says otherwise is refused, naming both."""
    for key, (where, value) in given.items():
        old, was = dotted.get(cfg, key, None), sources.get(key, "")
        if was in ("SET", *KNOBS) and old != value:
            raise ConfigError(key, old, f"{value}, what {where} says (the run follows CMD and the config it names): "
                              f"leave {was} out, or change {where}", was)
        _set(cfg, key, value, "")
        sources[key] = "CMD"


def default_run_id(name: str, stamp: str) -> str:
    """<name>-<stamp>, the name cut (at the same place every time) so that the id fits the run-id
    rule's RUN_ID_MAX: any preset, `make import`'s long names too, plans without RUN_ID=."""
    room = _knobs.RUN_ID_MAX - len(stamp) - 1
    return f"{name[:room].rstrip('-')}-{stamp}"


def derive(config: spec.Config, preset: str, sources: dict[str, str], now: _dt.datetime | None = None,
           rehearsal: list[dict[str, Any]] | None = None) -> Spec:
    """What follows from the config, each fact decided once: the run's names and id, the shared
    storage's paths, the pins, and the Ray and NCCL facts; the cross-key rules along the way."""
    run = config.run
    name = run.name or re.sub(r"[^a-z0-9-]+", "-", preset.lower())  # 0.5b -> 0-5b
    run_id = run.id
    if not run_id:
        stamp = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y%m%d-%H%M%S")
        # A smoke run's id says so: a real run's default id never names its directory.
        run_id = default_run_id(name, f"{'smoke-' if config.train.smoke else ''}{stamp}")
    # The one run-id rule (rlaunch.config.knobs): it names clusters, namespaces and Kubernetes objects.
    _check(_knobs.run_id_problem, "run.id", run_id, sources)
    if not re.fullmatch(RUN_ID_RE, name):
        raise ConfigError("run.name", name, "lower-case letters, digits and '-'", sources.get("run.name", ""))
    out = run.out or str(ROOT / "build" / run_id)
    _check(_knobs.out_problem, "run.out", out, sources)

    infra, cluster = config.infra, config.cluster
    mount = _mount(config, sources)
    # The free-form values, each by its own rule (rlaunch.config.knobs); what several keys say together is check's.
    if infra.install_root:
        _check(_knobs.path_problem, "infra.install_root", infra.install_root, sources)
    if infra.sky_infra:
        _check(_knobs.sky_infra_problem, "infra.sky_infra", infra.sky_infra, sources)
    if cluster.accelerator:
        _check(_knobs.accelerator_problem, "cluster.accelerator", cluster.accelerator, sources)
    if config.framework.image_ref:
        _check(_knobs.image_ref_problem, "framework.image_ref", config.framework.image_ref, sources)
    if config.framework.registry:
        _check(_knobs.registry_problem, "framework.registry", config.framework.registry, sources)
    _check_k8s_names(config, sources)

    model_path, data_path = config.model.path, config.data.path
    if model_path.startswith("/"):
        _check(_knobs.path_problem, "model.path", model_path, sources)
    if data_path.startswith("/"):  # a relative one: rlaunch.config.inputs.check says where it must be
        _check(_knobs.path_problem, "data.path", data_path, sources)
    pins = _pins(config)
    code_dir, code_value, packed = "", config.code.dir, None
    if code_value:  # CODE=: packed here, named by its content (rlaunch.config.code)
        root = _code.resolve(code_value, ROOT / "build" / _code.CACHE)
        packed = _code.pack(root, code_value, config.code.allow_dirty, sources.get("code.dir", ""))
        pins["code"] = packed.pin()
        # SkyPilot syncs file mounts before it mounts the storage (sky's _sync_file_mounts): a pack under
        # storage.mount would be hidden by the bucket, so there each node keeps it on its own disk.
        home = SKY_CODE_HOME if config.infra.name in _knobs.SKY_INFRAS else f"{mount}/code"
        code_dir = f"{home}/{packed.hash}"
        code_value = code_value if _code.GIT_SOURCE.match(code_value) else str(root)
    # model.path=[modelscope:]<org>/<name>[@rev]: a model like a pinned one (rlaunch.config.hub), unless
    # it is the pin's own id.
    if not model_path.startswith("/") and model_path != pins["model"].get("hf_id"):
        if ":" in model_path.split("/", 1)[0] and hub.parse(model_path) is None:
            raise ConfigError("model.path", model_path, "a directory under storage.mount, <org>/<name>[@<revision>] "
                              "on the Hugging Face Hub, or modelscope:<org>/<name>[@<revision>] on ModelScope",
                              sources.get("model.path", ""))
        pins["model"] = hub.pin(mount, model_path) or pins["model"]
    pins["source"] = _source_pin(config, mount, sources)
    if config.data.prepare:  # PREPARE=: DATA converted (rlaunch.config.prepare)
        held = {e.path for e in packed.entries} if packed else set()
        pins["source"] = prepare.pin(pins["source"], config.data.prepare, pins.get("code", {}),
                                     packed.root if packed else None, held, mount, config.framework.name,
                                     sources.get("data.prepare", ""))
    config = config.model_copy(update={
        "run": run.model_copy(update={"name": name, "id": run_id, "out": out}),
        "storage": config.storage.model_copy(update={"mount": mount}),
        "code": config.code.model_copy(update={"dir": code_value}),
        "model": config.model.model_copy(update={"path": model_path or pins["model"].get("hf_id", "")}),
        "secrets": secret_names(config, pins["model"]),
    })
    paths = _paths(config, pins)
    paths["code_dir"] = code_dir
    # What the framework loads (rlaunch.config.inputs decides it): the model directory, or another hub id.
    paths["model"] = inputs.model_dir_of(config.model.path, pins["model"], paths["model_dir"]) or config.model.path
    derived = {
        "ray_nodes": cluster.nodes + (1 if cpu_only_head(config) else 0),
        "cpu_only_head": cpu_only_head(config),
        "head_ray_cpus": head_ray_cpus(config),
        "nccl_env": nccl_env(infra.rdma),
        "ray_health_env": ray_health_env(cluster.health_check),
        "rehearsal": rehearsal or [],
    }
    return Spec.model_validate({**config.dump(), "preset": preset, "pins": pins, "paths": paths, "derived": derived})


def _source_pin(config: spec.Config, mount: str, sources: dict[str, str]) -> dict[str, str]:
    """DATA= (data.source) pinned: its commit or content hash, its directory and files (config.datasource)."""
    data = config.data
    if not data.source:
        return {}
    # REHEARSE=1 set data.path: the directory its prepare step writes DATA's first rows to (config.rehearse).
    if data.path and not config.train.rehearse:
        raise ConfigError("data.path", data.path, f"empty when data.source is set (data.source={data.source} "
                          "names the dataset; a path on the storage goes there too)", sources.get("data.path", ""))
    if data.source.startswith("/") and datasource.under(data.source, mount):
        _check(_knobs.path_problem, "data.source", data.source, sources)
    try:
        return datasource.pin(data.source, mount, data.config, converted=bool(data.prepare))
    except ConfigError as err:
        raise ConfigError(err.key, err.value, err.allowed, sources.get(err.key, "")) from None


def _mount(config: spec.Config, sources: dict[str, str]) -> str:
    """storage.mount as every node sees it; a local run's relative one is under the repository."""
    mount = config.storage.mount
    if config.infra.name == "local" and not mount.startswith("/") and sources.get("storage.mount") != "WORK_ROOT":
        mount = str(ROOT / mount)  # local: the repo's build/ is the shared storage
    else:
        _check(_knobs.path_problem, "storage.mount", mount, sources)
    return mount.rstrip("/")


def check(spec_: Spec, sources: dict[str, str] | None = None) -> None:
    """Every rule that reads several keys together, in one pass before anything is rendered: the
    config's own, the framework's topology rules, then the infrastructure's. The first broken rule
    is one ConfigError naming the key to change."""
    sources = sources or {}
    storage, cluster = spec_.storage, spec_.cluster
    if storage.source and storage.bucket:
        raise ConfigError("storage.bucket", storage.bucket,
                          "empty when storage.source is set (mount an existing bucket, or create one)")
    if storage.bucket and not storage.store:
        raise ConfigError("storage.store", "", "a store (gcs, s3, azure, r2, ibm, oci) for the new bucket "
                          f"'{storage.bucket}'")
    _check_sky_infra(spec_.infra, sources)
    _check_source(spec_, sources)
    try:
        inputs.check(spec_)  # model.path / data.path: on the storage every node shares
    except ConfigError as err:
        raise ConfigError(err.key, err.value, err.allowed, sources.get(err.key, "")) from None
    if cluster.accelerator and cluster.gpus_per_node == 0 and sources.get("cluster.accelerator") == "ACCELERATOR":
        raise ConfigError("cluster.accelerator", cluster.accelerator, "a GPU type needs GPUs: set "
                          "GPUS_PER_NODE too (this run has cluster.gpus_per_node=0)", "ACCELERATOR")
    if spec_.code.command and spec_.framework.name not in CMD_PRESET:
        raise ConfigError("code.command", spec_.code.command, f"a command of {', '.join(CMD_PRESET)} "
                          f"(FRAMEWORK= or a preset of one): CMD= does not run {spec_.framework.name}",
                          sources.get("code.command", ""))
    _check_image_facts(spec_.framework, sources)
    where = backends.infra(spec_.infra.name)
    _code.check_limit(spec_, where.code_limit, where.code_via, sources.get("code.dir", ""))
    datasource.check_carried(spec_, where.code_limit, where.code_via, sources.get("data.source", ""))
    _check_recovery(spec_, sources)
    if cluster.gpus_per_node > 0 and not cluster.accelerator:
        raise ConfigError("cluster.accelerator", "", "a GPU type (e.g. H100, A100) when "
                          f"cluster.gpus_per_node={cluster.gpus_per_node}")
    try:
        # The framework's topology rules: its descriptor's CPU rule, then its adapter's own.
        rule = frameworks.descriptor(spec_.framework.name).cpu_rule
        if rule is not None:
            topology.ray_cpus(spec_, rule, spec_.framework.name)
        frameworks.get(spec_.framework.name).check(spec_)
        backends.get(spec_.infra.name).rules(spec_)
    except ConfigError as err:
        source = sources.get(err.key.split("[", 1)[0], "")  # framework.overrides[trainer.nnodes]: SET's
        if err.source or not source:
            raise
        raise ConfigError(err.key, err.value, err.allowed, source) from None


# The secrets a setting needs: each travels by name to every node (SkyPilot --secret, KubeRay's
# Secret, the local job's env, AIStudio's form), and a launch without it in the environment stops first.
# model.gated needs the token of the model's hub alone (rlaunch.config.hub: HF_TOKEN, MODELSCOPE_API_TOKEN).
NEEDED_SECRETS = (("logging.wandb", "WANDB_API_KEY"), *(("model.gated", h["token"]) for h in hub.HUBS.values()))


def secret_names(config: spec.Config, model_pin: dict[str, Any]) -> list[str]:
    """spec.secrets: the config's names, then those its settings need (NEEDED_SECRETS), once each."""
    token = hub.token(model_pin)
    needed = [name for key, name in NEEDED_SECRETS if attrgetter(key)(config) and (key != "model.gated" or name == token)]
    return list(dict.fromkeys([*config.secrets, *needed]))


def nccl_env(rdma: bool) -> dict[str, str]:
    """NCCL's settings for every Ray process of a run. Without RDMA, NCCL must not try InfiniBand:
    it would probe for IB devices and, where some exist but are not for this job, hang or fail."""
    return {} if rdma else {"NCCL_IB_DISABLE": "1"}


def ray_health_env(check: spec.HealthCheck) -> dict[str, str]:
    """Ray's GCS health check of every node (cluster.health_check), as the env the head's `ray start`
    reads: the GCS declares a node lost after failure_threshold failed checks in a row."""
    return {"RAY_health_check_period_ms": str(check.period_ms),
            "RAY_health_check_failure_threshold": str(check.failure_threshold),
            "RAY_health_check_timeout_ms": str(check.timeout_ms)}


def cpu_only_head(config: spec.Config) -> bool:
    """KubeRay's cluster.cpu_head: a head pod without GPUs beside `nodes` GPU workers."""
    return config.infra.name == "kuberay" and config.cluster.cpu_head


def head_ray_cpus(config: spec.Config) -> int | None:
    """The Ray CPUs a CPU-only head advertises: 0 (no task or actor lands there), unless the
    framework needs Ray CPUs on the head (verl's TransferQueue): then the head pod's CPUs."""
    if not cpu_only_head(config):
        return None
    name = config.framework.name
    rule = frameworks.descriptor(name).cpu_rule
    if rule is None or rule.where != "head":
        return 0
    have = config.infra.kuberay.head_cpus
    if have < rule.count:
        raise ConfigError("infra.kuberay.head_cpus", have, f">= {rule.count} with cluster.cpu_head and {name}: "
                          f"{rule.why}")
    return have


def _paths(config: spec.Config, pins: dict[str, Any]) -> dict[str, str]:
    mount, run, model = config.storage.mount, config.run, config.model
    run_dir = f"{mount}/runs/{run.name}/{run.id}"
    pin = pins["model"]
    model_dir = _pinned_dir(f"{mount}/models/{model.name}", pin) if model.name else ""
    if model.name and hub.of(pin) != hub.DEFAULT:  # seed 003's models/modelscope/<org>/<name>/<revision>
        model_dir = hub.directory(mount, hub.of(pin), pin["hf_id"], str(pin.get("revision", "")))
    model_dir = pin.get("dir", model_dir)  # a hub id's (rlaunch.config.hub)
    return {
        "run_dir": run_dir,
        "log_dir": f"{run_dir}/logs",
        "ckpt_dir": f"{run_dir}/checkpoints",
        # Inputs laid out otherwise (seed 003's models/modelscope/<org>/<name>/<revision>): an absolute
        # model.path or a data.path is where the input is, so every check of it looks there.
        "data_dir": pins["source"].get("dir") or config.data.path.rstrip("/") or _pinned_dir(
            f"{mount}/data/{config.data.dataset}", pins["dataset"]),
        "model_dir": model.path.rstrip("/") if model.path.startswith("/") else model_dir,
    }


def restarts(spec_: spec.Config) -> str:
    """What restarts this run by itself from its last checkpoint ("" where nothing does)."""
    infra = spec_.infra
    if infra.name == "kuberay":
        backoff = infra.kuberay.backoff_limit
        return f"infra.kuberay.backoff_limit={backoff} (the operator retries the RayJob)" if backoff > 0 else ""
    # AIStudio's form says "auto restart: off": a preempted task there fails, it does not restart.
    if infra.spot and backends.infra(infra.name).spot:
        return "SPOT=1 (SkyPilot's managed job recovers a preempted cluster)"
    return ""


def _check_recovery(spec_: Spec, sources: dict[str, str]) -> None:
    """A run that its infrastructure restarts resumes from its last checkpoint: with none before the
    end (train.save_freq -1, or not below train.steps) a preemption silently starts it at step 0."""
    train, why = spec_.train, restarts(spec_)
    save, steps, epochs = train.save_freq, train.steps, train.epochs
    if not why or train.smoke:
        return  # SMOKE=1 saves at step 1
    if spec_.framework.name == "areal" and save <= 0 and steps == 0 and epochs > 1:
        return  # AReaL's adapter saves every epoch when save_freq is -1 (freq_epochs=1)
    if save > 0 and (steps == 0 or save < steps):
        return
    lost = (f"all {steps} steps" if steps else
            f"every step of its {epochs} epoch{'s' if epochs > 1 else ''}")
    if steps == 1:
        fix = "a run of one step cannot checkpoint before its end: launch it without retries"
    else:
        fix = f"set a checkpoint interval, e.g. SET=train.save_freq={max(1, steps // 10) if steps else 20}"
    raise ConfigError("train.save_freq", save, f"a checkpoint before the end of the run with {why}: "
                      f"{'-1 saves only at the end' if save <= 0 else f'{save} >= train.steps={steps}'}, so a "
                      f"preemption would lose {lost} (the restart begins at step 0); {fix}",
                      sources.get("train.save_freq", ""))


def _check_image_facts(framework: spec.FrameworkSettings, sources: dict[str, str]) -> None:
    """framework.image_facts describes framework.image_ref: "name==version" packages, a known arch."""
    facts = framework.image_facts
    given = {k: v for k, v in facts.dump().items() if v}
    if given and not framework.image_ref:
        key = f"framework.image_facts.{next(iter(given))}"
        raise ConfigError(key, given[next(iter(given))], "only with framework.image_ref (IMAGE=): the "
                          "pinned images' facts are in configs/versions.yaml", sources.get(key, ""))
    for item in facts.packages:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*", item):
            raise ConfigError("framework.image_facts.packages", item, "name==version, e.g. torch==2.11.0",
                              sources.get("framework.image_facts.packages", ""))


def _check(rule: Callable[[str], str | None], key: str, value: str, sources: dict[str, str]) -> None:
    problem = rule(value)
    if problem:
        raise ConfigError(key, value, problem, sources.get(key, ""))


def _check_sky_infra(infra: spec.Infra, sources: dict[str, str]) -> None:
    """INFRA_SPEC takes effect wherever SkyPilot launches: INFRA=sky, or a cloud's region/zone/context."""
    value = infra.sky_infra
    if not value:
        return
    source = sources.get("infra.sky_infra", "")
    if infra.name not in _knobs.SKY_INFRAS:
        raise ConfigError("infra.sky_infra", value, "only for INFRA=" + ", ".join(_knobs.SKY_INFRAS) +
                          f" (SkyPilot launches those); INFRA={infra.name} does not use it", source)
    want = _knobs.SKY_INFRAS[infra.name]
    if want and _knobs.sky_cloud(value) != want:
        raise ConfigError("infra.sky_infra", value, f"a {infra.name} infra string ({infra.name}, "
                          f"{infra.name}/REGION, ...) for INFRA={infra.name}, or INFRA=sky", source)


def _check_source(spec_: Spec, sources: dict[str, str]) -> None:
    """storage.source must be a bucket URL the infrastructure can mount.

    The details are the owners': SkyPilot's own source check runs at plan (validate/skypilot.py), and
    the KubeRay backend matches the URL to K8S_FLAVOR."""
    source, infra = spec_.storage.source, spec_.infra.name
    if not source:
        return
    where = sources.get("storage.source", "")
    if infra in ("local", "aistudio"):
        mount = "this machine's disk" if infra == "local" else "the platform's shared storage"
        raise ConfigError("storage.source", source, f"empty on INFRA={infra}: storage.mount is {mount}, "
                          "and there is no bucket to mount", where)
    rest = source.split("://", 1)[-1]
    if infra == "kuberay":
        if not any(source.startswith(p) for p in KUBERAY_SOURCES) or not rest.split("/", 1)[0]:
            raise ConfigError("storage.source", source, "a bucket KubeRay can mount: gs://BUCKET[/DIR] (gke, "
                              "Cloud Storage FUSE) or tos://BUCKET[/DIR] (vke, TOS CSI)", where)
        return
    allowed = ("a bucket URL SkyPilot can mount: gs://BUCKET, s3://BUCKET, r2://BUCKET, cos://REGION/BUCKET, "
               "oci://BUCKET, https://ACCOUNT.blob.core.windows.net/CONTAINER (azure)")
    prefix = next((p for p in SKY_SOURCES if source.startswith(p)), "")
    first, _, after = rest.partition("/")
    bucket = after.split("/", 1)[0] if prefix == "cos://" else first
    if not prefix or not bucket or (prefix == "https://" and not re.fullmatch(AZURE_CONTAINER_URL, source)):
        raise ConfigError("storage.source", source, allowed, where)


def _check_k8s_names(config: spec.Config, sources: dict[str, str]) -> None:
    """The Kubernetes names in the config are names the API server accepts."""
    for key, (pattern, longest, what) in K8S_NAMES.items():
        value: str = attrgetter(key)(config)
        if key != "infra.namespace" and not value:
            continue  # optional: "" means rlaunch's default
        if len(value) > longest or not re.fullmatch(pattern, value):
            chars = "'-'" if pattern == DNS1123_LABEL else "'-' and '.'"
            kind = "label" if pattern == DNS1123_LABEL else "subdomain"
            raise ConfigError(key, value, f"{what} name (DNS-1123 {kind}): lower-case letters, digits and "
                              f"{chars}, starting and ending with a letter or digit, at most {longest} "
                              "characters", sources.get(key, ""))


def _pinned_dir(base: str, pin: dict[str, Any]) -> str:
    """Where a pinned model or dataset lives on the shared storage: one directory per revision.

    A copy of another revision still passes its own SHA256SUMS, so a shared path would let a
    changed pin reuse the old files without a word."""
    revision = str(pin.get("revision", ""))
    return f"{base}/{revision[:12]}" if revision else base


def _pins(config: spec.Config) -> dict[str, Any]:
    versions = pins.load_versions()
    fw = config.framework.name
    fw_pins = versions["frameworks"][fw]
    model_name, dataset = config.model.name, config.data.dataset
    if model_name and model_name not in versions["models"]:
        raise ConfigError("model.name", model_name, "one of " + ", ".join(versions["models"]) +
                          " (models are pinned in configs/versions.yaml)")
    for section, name in (("models", model_name), ("datasets", dataset)):
        named = hub.of(versions[section].get(name) or {})
        if hub.problem(named):  # a pin's hub is where job.data downloads it from, with that hub's client
            raise ConfigError(f"{section}.{name}.hub", named, f"{hub.problem(named)} (configs/versions.yaml)")
    return {
        "image": config.framework.image_ref or images.ref(fw, config.framework.image, versions,
                                                          config.cluster.accelerator, config.framework.registry),
        "framework_version": str(fw_pins.get("version", "")),
        "framework_commit": str(fw_pins.get("commit", "")),
        "framework_repo": str(fw_pins.get("repo", "")),
        "ray": str(versions["ray"]),
        "kuberay": str(versions["kuberay"]),
        # The model's config.json facts are rlaunch.config.modelfacts' (it reads them there).
        "model": {k: v for k, v in versions["models"].get(model_name, {}).items() if k != "config"},
        "dataset": dict(versions["datasets"][dataset]),
        "code": {},
    }

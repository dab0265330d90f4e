"""Layered experiment config: load, merge, override, validate once, derive paths and pins.

Layers, later wins:
    configs/defaults.yaml -> infra/<infra>.yaml -> algo/<algo>.yaml -> framework/<framework>.yaml
    -> presets/<preset>.yaml -> presets/<preset>@<infra>.yaml (if any: the preset's shape on that
    infrastructure) -> knobs (NODES=, GPUS_PER_NODE=, ...) -> SET="dotted.key=value ..."

defaults.yaml lists every key that exists, and its value's type is the key's type; ENUMS and MINIMUMS
below add what a default cannot say. The merged result is validated by one JSON Schema built from
those, and every failure becomes one ConfigError naming the key, the value and what is allowed.
"""

from __future__ import annotations

import copy
import datetime as _dt
import difflib
import re
from pathlib import Path
from typing import Any

import yaml

from . import CONFIGS, ROOT, images, knobs as _knobs, pins
from .errors import ConfigError
from .knobs import KNOBS, RUN_ID_RE  # noqa: F401 - re-exported: the CLI and tests read them here

ENUMS: dict[str, list] = {
    "infra.name": _knobs.INFRAS,
    "infra.k8s_flavor": ["generic", "gke", "vke"],
    "framework.name": ["trl", "verl", "areal", "rlinf"],
    "framework.image": ["official", "rlaunch"],
    "algo.name": _knobs.ALGOS,
    "algo.adv_estimator": [
        "gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax",
        "opo", "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized",
    ],
    "data.dataset": ["gsm8k", "math", "boba", "digits"],
    "rollout.backend": ["vllm", "sglang", "hf"],
    "storage.mode": ["MOUNT", "COPY", "MOUNT_CACHED"],
    "storage.store": ["", "gcs", "s3", "azure", "r2", "ibm", "oci"],
}
MINIMUMS: dict[str, float] = {
    "cluster.nodes": 1, "cluster.gpus_per_node": 0, "cluster.cpus_per_node": 0,
    "cluster.memory_gb": 0, "cluster.disk_gb": 1, "cluster.ray_port": 1, "cluster.dashboard_port": 1,
    "cluster.formation_timeout_s": 1, "algo.group_size": 1, "train.batch_size": 1,
    "train.mini_batch_size": 1, "train.micro_batch_size_per_gpu": 1, "train.steps": 0,
    "train.epochs": 1, "train.smoke_steps": 2, "rollout.tp": 1, "infra.autostop_idle_minutes": 0,
    "data.max_prompt_length": 1, "data.max_response_length": 1, "infra.kuberay.inputs_timeout_s": 1,
    "infra.kuberay.ephemeral_storage_gb": 0, "infra.kuberay.head_ephemeral_storage_gb": 0,
    "train.log_prob_micro_batch_size_per_gpu": 0, "train.ref_log_prob_micro_batch_size_per_gpu": 0,
    "train.max_tokens_per_mb": 0,
}
MAXIMUMS: dict[str, float] = {"cluster.ray_port": 65535, "cluster.dashboard_port": 65535,
                              "rollout.gpu_memory_utilization": 1.0}
# Only these look like secrets; the config may name them, never hold them.
SECRET_NAME = r"^[A-Z][A-Z0-9_]*$"
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


def default_preset(algo: str, infra: str) -> str:
    return DEFAULT_PRESET.get((algo, infra)) or DEFAULT_PRESET.get((algo, ""), "rehearsal")


def _read_layer(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(str(path.relative_to(ROOT)), "<unparsable>", f"not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path.relative_to(ROOT)), type(data).__name__, "a layer must be a mapping")
    return data


def read_defaults() -> dict:
    """configs/defaults.yaml as written: every key and its default."""
    return _read_layer(CONFIGS / "defaults.yaml")


def available(kind: str) -> list[str]:
    """Names of the layer files of one kind (infra, algo, framework, presets)."""
    return sorted(p.stem for p in (CONFIGS / kind).glob("*.yaml") if "@" not in p.stem)


def _layer(kind: str, name: str, key: str, required: bool) -> dict:
    path = CONFIGS / kind / f"{name}.yaml"
    if not path.exists():
        if required:
            raise ConfigError(key, name, f"one of {', '.join(available(kind))}")
        return {}
    return _read_layer(path)


def merge(base: dict, over: dict) -> dict:
    """Deep merge: mappings merge, everything else (lists included) replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def parse_assignment(text: str, source: str, defaults: dict | None = None) -> tuple[str, Any]:
    """'a.b=value' -> ('a.b', value), the value read as YAML (3 -> int, true -> bool, [a,b] -> list).

    With `defaults`, a key whose default is a string takes the text exactly as given: YAML would drop
    quotes and '#...' and turn 1e5 into a number."""
    key, sep, raw = text.partition("=")
    if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", key):
        raise ConfigError(text, text, "an override is dotted.key=value, e.g. cluster.nodes=4", source)
    if defaults is not None:
        try:
            if isinstance(_get(defaults, key), str):
                return key, raw
        except KeyError:
            pass  # an unknown key: validation names it
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key, ("" if value is None else value)


def _set(tree: dict, dotted: str, value: Any) -> None:
    node = tree
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return  # validation reports the type error on the parent key
    node[leaf] = value


def _schema_for(value: Any, key: str) -> dict:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        schema: dict = {"type": "integer"}
    elif isinstance(value, float):
        schema = {"type": "number"}
    elif isinstance(value, str):
        schema = {"type": "string"}
    elif isinstance(value, list):
        return {"type": "array", "items": {"type": "string"}}
    elif isinstance(value, dict):
        return {
            "type": "object", "additionalProperties": False,
            "properties": {k: _schema_for(v, f"{key}.{k}" if key else k) for k, v in value.items()},
        }
    else:
        raise TypeError(f"defaults.yaml: {key} has no usable default ({value!r})")
    if key in ENUMS:
        schema["enum"] = ENUMS[key]
    if key in MINIMUMS:
        schema["minimum"] = MINIMUMS[key]
    if key in MAXIMUMS:
        schema["maximum"] = MAXIMUMS[key]
    return schema


def schema(defaults: dict | None = None) -> dict:
    """The JSON Schema of a merged config, built from defaults.yaml plus ENUMS/MINIMUMS."""
    tree = _schema_for(defaults if defaults is not None else read_defaults(), "")
    tree["properties"]["secrets"] = {"type": "array", "items": {"type": "string", "pattern": SECRET_NAME}}
    return tree


def _describe(schema_node: dict) -> str:
    if "enum" in schema_node:
        return "one of " + ", ".join(repr(v) if v == "" else str(v) for v in schema_node["enum"])
    kind = {"integer": "an integer", "number": "a number", "boolean": "true or false",
            "string": "a string", "array": "a list of strings", "object": "a mapping"}[schema_node["type"]]
    bounds = []
    if "minimum" in schema_node:
        bounds.append(f">= {schema_node['minimum']:g}")
    if "maximum" in schema_node:
        bounds.append(f"<= {schema_node['maximum']:g}")
    return kind + (" " + " and ".join(bounds) if bounds else "")


def _coerce(value: Any, schema_node: dict) -> Any:
    """YAML reads 1e-6 as a string and 5 as an int where a number is wanted: accept both."""
    kind = schema_node.get("type")
    if kind == "boolean" and value in (0, 1, "0", "1") and not isinstance(value, bool):
        return bool(int(value))  # SPOT=1, RDMA=0
    if kind == "number" and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def validate(cfg: dict, sources: dict[str, str] | None = None, defaults: dict | None = None) -> dict:
    """Check every key against the schema; the first problem raises one ConfigError."""
    import jsonschema  # pure-python; only validation needs it

    sources = sources or {}
    sch = schema(defaults)
    flat_schema = _flat_schema(sch)
    # Unknown keys first: a typo is the most common mistake, and it deserves a suggestion.
    for key, value in _flat(cfg).items():
        if key in flat_schema or _parent_is_leaf(key, flat_schema):
            continue
        close = difflib.get_close_matches(key, list(flat_schema), n=1)
        hint = f"unknown key; did you mean '{close[0]}'?" if close else "unknown key"
        raise ConfigError(key, value, hint, sources.get(key, ""))
    for key, node in flat_schema.items():
        try:
            current = _get(cfg, key)
        except KeyError:
            continue
        if isinstance(current, dict) and node.get("type") != "object":
            raise ConfigError(key, current, _describe(node), sources.get(key, ""))
        _set(cfg, key, _coerce(current, node))
    validator = jsonschema.Draft202012Validator(sch)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join(str(p) for p in err.absolute_path if not isinstance(p, int)) or "config"
        node = flat_schema.get(key, err.schema)
        if key == "secrets":
            allowed = "env var names (UPPER_CASE), never values"
        else:
            allowed = _describe(node) if "type" in node else err.message
        raise ConfigError(key, err.instance, allowed, sources.get(key, ""))
    return cfg


def _flat_schema(sch: dict, prefix: str = "") -> dict[str, dict]:
    out: dict[str, dict] = {}
    for key, node in sch.get("properties", {}).items():
        dotted = f"{prefix}{key}"
        if node.get("type") == "object":
            out.update(_flat_schema(node, dotted + "."))
        else:
            out[dotted] = node
    return out


def _parent_is_leaf(key: str, flat_schema: dict) -> bool:
    parts = key.split(".")
    return any(".".join(parts[:i]) in flat_schema for i in range(1, len(parts)))


def _get(tree: dict, dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _resolve_names(preset_layer: dict, knobs: dict[str, str], sets: dict[str, Any]) -> dict[str, str]:
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
         now: _dt.datetime | None = None) -> dict:
    """Build the validated spec. `knobs` are Make variables (INFRA, NODES, ...), `overrides` SET's text."""
    knobs = {k: str(v) for k, v in (knobs or {}).items() if v is not None and str(v) != ""}
    for name in knobs:
        if name not in KNOBS:
            raise ConfigError(name, knobs[name], "a knob is one of " + ", ".join(KNOBS))
    defaults = read_defaults()
    items = _knobs.split_set(overrides) if isinstance(overrides, str) else list(overrides)
    sets = dict(parse_assignment(item, "SET", defaults) for item in items)
    if not preset:
        algo = sets.get("algo.name") or knobs.get("ALGO") or "grpo"
        infra = sets.get("infra.name") or knobs.get("INFRA") or "local"
        preset = default_preset(str(algo), str(infra))
    if _knobs.preset_problem(preset):  # a name, never a path: configs/presets/<name>.yaml
        raise ConfigError("PRESET", preset, f"one of {', '.join(available('presets'))}")
    preset_layer = _layer("presets", preset, "PRESET", required=True)
    names = _resolve_names(preset_layer, knobs, sets)
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
        _set(cfg, key, parse_assignment(f"{key}={value}", knob, defaults)[1])
        sources[key] = knob
    for key, value in sets.items():
        _set(cfg, key, value)
        sources[key] = "SET"
    for key, value in names.items():
        _set(cfg, key, value)

    validate(cfg, sources, defaults)
    return derive(cfg, preset, sources, now)


def derive(cfg: dict, preset: str, sources: dict[str, str], now: _dt.datetime | None = None) -> dict:
    """Fill what follows from the config: names, run id, paths on shared storage, pins."""
    spec = copy.deepcopy(cfg)
    spec["preset"] = preset
    run = spec["run"]
    run["name"] = run["name"] or re.sub(r"[^a-z0-9-]+", "-", preset.lower())  # 0.5b -> 0-5b
    if not run["id"]:
        stamp = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y%m%d-%H%M%S")
        # A smoke run's id says so: a real run's default id never names its directory.
        run["id"] = f"{run['name']}-{'smoke-' if spec['train']['smoke'] else ''}{stamp}"
    problem = _knobs.run_id_problem(run["id"])
    if problem:
        raise ConfigError("run.id", run["id"], problem, sources.get("run.id", ""))
    if not re.fullmatch(RUN_ID_RE, run["name"]):
        raise ConfigError("run.name", run["name"], "lower-case letters, digits and '-'",
                          sources.get("run.name", ""))
    run["out"] = run["out"] or str(ROOT / "build" / run["id"])
    _check(_knobs.out_problem, "run.out", run["out"], sources)

    storage = spec["storage"]
    mount = storage["mount"]
    if spec["infra"]["name"] == "local" and not mount.startswith("/") and sources.get("storage.mount") != "WORK_ROOT":
        mount = str(ROOT / mount)  # local: the repo's build/ is the shared storage
    else:
        _check(_knobs.path_problem, "storage.mount", mount, sources)
    mount = storage["mount"] = mount.rstrip("/")
    if spec["infra"]["install_root"]:
        _check(_knobs.path_problem, "infra.install_root", spec["infra"]["install_root"], sources)
    if storage["source"] and storage["bucket"]:
        raise ConfigError("storage.bucket", storage["bucket"],
                          "empty when storage.source is set (mount an existing bucket, or create one)")
    if storage["bucket"] and not storage["store"]:
        raise ConfigError("storage.store", "", "a store (gcs, s3, azure, r2, ibm, oci) for the new bucket "
                          f"'{storage['bucket']}'")
    _check_sky_infra(spec["infra"], sources)
    _check_source(spec, sources)
    _check_k8s_names(spec, sources)

    cluster = spec["cluster"]
    if cluster["accelerator"]:
        _check(_knobs.accelerator_problem, "cluster.accelerator", cluster["accelerator"], sources)
        if cluster["gpus_per_node"] == 0 and sources.get("cluster.accelerator") == "ACCELERATOR":
            raise ConfigError("cluster.accelerator", cluster["accelerator"], "a GPU type needs GPUs: set "
                              "GPUS_PER_NODE too (this run has cluster.gpus_per_node=0)", "ACCELERATOR")
    if cluster["gpus_per_node"] > 0 and not cluster["accelerator"]:
        raise ConfigError("cluster.accelerator", "", "a GPU type (e.g. H100, A100) when "
                          f"cluster.gpus_per_node={cluster['gpus_per_node']}")
    for name in spec["secrets"]:
        if not re.fullmatch(SECRET_NAME, name):
            raise ConfigError("secrets", name, "env var names (UPPER_CASE), never values")

    run_dir = f"{mount}/runs/{run['name']}/{run['id']}"
    model_name = spec["model"]["name"]
    spec["pins"] = _pins(spec)
    # Inputs laid out otherwise (seed 003's models/modelscope/<org>/<name>/<revision>): an absolute
    # model.path or a data.path is where the input is, so every check of it looks there.
    model_path, data_path = spec["model"]["path"], spec["data"]["path"]
    if model_path.startswith("/"):
        _check(_knobs.path_problem, "model.path", model_path, sources)
    if data_path:
        _check(_knobs.path_problem, "data.path", data_path, sources)
    spec["paths"] = {
        "run_dir": run_dir,
        "log_dir": f"{run_dir}/logs",
        "ckpt_dir": f"{run_dir}/checkpoints",
        "data_dir": data_path.rstrip("/") or _pinned_dir(f"{mount}/data/{spec['data']['dataset']}",
                                                         spec["pins"]["dataset"]),
        "model_dir": model_path.rstrip("/") if model_path.startswith("/") else
        _pinned_dir(f"{mount}/models/{model_name}", spec["pins"]["model"]) if model_name else "",
    }
    if not spec["model"]["path"]:
        spec["model"]["path"] = spec["pins"]["model"].get("hf_id", "")
    return spec


def _check(rule, key: str, value: str, sources: dict[str, str]) -> None:
    problem = rule(value)
    if problem:
        raise ConfigError(key, value, problem, sources.get(key, ""))


def _check_sky_infra(infra: dict, sources: dict[str, str]) -> None:
    """INFRA_SPEC takes effect wherever SkyPilot launches: INFRA=sky, or a cloud's region/zone/context."""
    value = infra["sky_infra"]
    if not value:
        return
    source = sources.get("infra.sky_infra", "")
    _check(_knobs.sky_infra_problem, "infra.sky_infra", value, sources)
    if infra["name"] not in _knobs.SKY_INFRAS:
        raise ConfigError("infra.sky_infra", value, "only for INFRA=" + ", ".join(_knobs.SKY_INFRAS) +
                          f" (SkyPilot launches those); INFRA={infra['name']} does not use it", source)
    want = _knobs.SKY_INFRAS[infra["name"]]
    if want and _knobs.sky_cloud(value) != want:
        raise ConfigError("infra.sky_infra", value, f"a {infra['name']} infra string ({infra['name']}, "
                          f"{infra['name']}/REGION, ...) for INFRA={infra['name']}, or INFRA=sky", source)


def _check_source(spec: dict, sources: dict[str, str]) -> None:
    """storage.source must be a bucket URL the infrastructure can mount.

    The details are the owners': SkyPilot's own source check runs at plan (validate/skypilot.py), and
    the KubeRay backend matches the URL to K8S_FLAVOR."""
    source, infra = spec["storage"]["source"], spec["infra"]["name"]
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


def _check_k8s_names(spec: dict, sources: dict[str, str]) -> None:
    """The Kubernetes names in the config are names the API server accepts."""
    for key, (pattern, longest, what) in K8S_NAMES.items():
        value = _get(spec, key)
        if key != "infra.namespace" and not value:
            continue  # optional: "" means rlaunch's default
        if len(value) > longest or not re.fullmatch(pattern, value):
            chars = "'-'" if pattern == DNS1123_LABEL else "'-' and '.'"
            kind = "label" if pattern == DNS1123_LABEL else "subdomain"
            raise ConfigError(key, value, f"{what} name (DNS-1123 {kind}): lower-case letters, digits and "
                              f"{chars}, starting and ending with a letter or digit, at most {longest} "
                              "characters", sources.get(key, ""))


def _pinned_dir(base: str, pin: dict) -> str:
    """Where a pinned model or dataset lives on the shared storage: one directory per revision.

    A copy of another revision still passes its own SHA256SUMS, so a shared path would let a
    changed pin reuse the old files without a word."""
    revision = str(pin.get("revision", ""))
    return f"{base}/{revision[:12]}" if revision else base


def _pins(spec: dict) -> dict:
    versions = pins.load_versions()
    fw = spec["framework"]["name"]
    fw_pins = versions["frameworks"][fw]
    model_name, dataset = spec["model"]["name"], spec["data"]["dataset"]
    if model_name and model_name not in versions["models"]:
        raise ConfigError("model.name", model_name, "one of " + ", ".join(versions["models"]) +
                          " (models are pinned in configs/versions.yaml)")
    return {
        "image": images.ref(fw, spec["framework"]["image"], versions),
        "framework_version": str(fw_pins.get("version", "")),
        "framework_commit": str(fw_pins.get("commit", "")),
        "framework_repo": str(fw_pins.get("repo", "")),
        "ray": str(versions["ray"]),
        "kuberay": str(versions["kuberay"]),
        # The model's config.json facts are the memory bound's (rlaunch.memory reads them there).
        "model": {k: v for k, v in versions["models"].get(model_name, {}).items() if k != "config"},
        "dataset": dict(versions["datasets"][dataset]),
    }

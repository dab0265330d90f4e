"""The typed spec: what a merged config may hold, and what rlaunch derives from it.

`Config` is the merged config layers: frozen pydantic models, unknown keys refused (extra="forbid"),
fixed sets as Literals, bounds on the field, all declared statically so a type checker reads them (the
infrastructures' and frameworks' names come from their registries at run time: a str to mypy, OneOf
to pydantic). configs/defaults.yaml gives every key its first value (so no field has a default here:
a key missing from that file is a bug the tests catch); these models say what each key may be.
`Spec` is a Config plus what `config.derive` computes once from it (pins, paths on the shared
storage, the Ray and NCCL facts), which every backend, template and check reads.

The values arrive as YAML or as the text of a Make knob, so each type accepts exactly the spellings
the config always took: 0/1 for a boolean (SPOT=1), any number for a float (YAML reads 1e-6 as a
string), a number for a string key. Nothing else is coerced.

Everything reads it by attribute (spec.cluster.nodes). The code on the nodes, which has no pydantic,
reads spec.json the same way through rlaunch.config.specjson.
"""

from __future__ import annotations

import difflib
import json
import typing
from pathlib import Path
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, GetCoreSchemaHandler
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, core_schema

from rlaunch.config import knobs
from rlaunch.config.knobs import AlgoName
from rlaunch.errors import ConfigError
from rlaunch.registry import frameworks

# Only these look like secrets; the config may name them, never hold them.
SECRET_NAME = r"^[A-Z][A-Z0-9_]*$"
SECRETS_ALLOWED = "env var names (UPPER_CASE), never values"


# ---------------------------------------------------------------- the spellings each type accepts


def _bool(value: Any) -> Any:
    if not isinstance(value, bool) and value in (0, 1, "0", "1"):
        return bool(int(value))  # SPOT=1, RDMA=0
    return value


def _float(value: Any) -> Any:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return float(value)  # YAML reads 1e-6 as a string, 5 as an int
        except ValueError:
            return value
    return value


def _str(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Bool = Annotated[bool, BeforeValidator(_bool)]
Float = Annotated[float, BeforeValidator(_float)]
Str = Annotated[str, BeforeValidator(_str)]
Strings = list[str]
# The integer keys' bounds (describe() reads them back for the error line).
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
Port = Annotated[int, Field(ge=1, le=65535)]


class OneOf:
    """A string key whose values a registry gives at run time (infra.name, framework.name): a str to
    the type checker, one of `values` to pydantic (its after-validator), and to choices()."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(values)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        if value not in self.values:
            raise ValueError("one of " + ", ".join(self.values))
        return value


# The keys with a fixed set of values; the infrastructures' and frameworks' (and the frameworks' own
# values) come from their registries.
InfraName = Annotated[str, OneOf(knobs.INFRAS)]
FrameworkName = Annotated[str, OneOf(frameworks.names())]
K8sFlavor = Literal["generic", "gke", "vke"]
GkeNetworking = Literal["dranet", "network-mapping"]
ImageKind = Literal["official", "rlaunch"]
# The advantage estimators the frameworks run: verl's registry at its pin (frameworks/verl/values.py).
Estimator = Annotated[str, OneOf(frameworks.values("algo.adv_estimator"))]
Dataset = Literal["gsm8k", "math", "boba", "digits"]
RolloutBackend = Literal["vllm", "sglang", "hf"]
StorageMode = Literal["MOUNT", "COPY", "MOUNT_CACHED"]
Store = Literal["", "gcs", "s3", "azure", "r2", "ibm", "oci"]
Arch = Literal["", "amd64", "arm64"]


class Section(BaseModel):
    """A frozen part of the spec that refuses unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def dump(self) -> dict[str, Any]:
        """The section as plain JSON data (what spec.json holds)."""
        return self.model_dump(mode="json")

    def changed(self, changes: Mapping[str, Any]) -> Self:
        """A copy with dotted keys set ({"rollout.tp": 4}), not validated again: plan's what-ifs."""
        update: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in changes.items():
            head, dot, rest = key.partition(".")
            if dot:
                nested.setdefault(head, {})[rest] = value
            else:
                update[head] = value
        for head, inner in nested.items():
            update[head] = getattr(self, head).changed(inner)
        return self.model_copy(update=update)


# ---------------------------------------------------------------- the config (configs/defaults.yaml documents each key)


class Run(Section):
    name: Str
    id: Str
    out: Str


class KubeRaySettings(Section):
    service_account: Str
    gcp_service_account: Str
    node_selector: Strings
    head_cpus: int
    head_memory_gb: int
    head_ephemeral_storage_gb: Count
    ephemeral_storage_gb: Count
    imex: Bool
    gke_networking: GkeNetworking
    gvnic_network_prefix: Str
    rdma_network_prefix: Str
    object_store_endpoint: Str
    object_store_secret: Str
    ttl_seconds_after_finished: int
    active_deadline_seconds: int
    backoff_limit: int
    inputs_timeout_s: Positive


class Infra(Section):
    name: InfraName
    sky_infra: Str
    k8s_flavor: K8sFlavor
    namespace: Str
    kuberay: KubeRaySettings
    spot: Bool
    rdma: Bool
    autostop_idle_minutes: Count
    autostop_down: Bool
    recovery_strategy: Str
    max_restarts_on_errors: int
    install_root: Str
    image_bin: Str


class HealthCheck(Section):
    """Ray's GCS health check of every node (RAY_health_check_*, read by the head's GCS)."""

    period_ms: Annotated[int, Field(ge=100)]
    failure_threshold: Positive
    timeout_ms: Annotated[int, Field(ge=100)]


class Cluster(Section):
    nodes: Positive
    gpus_per_node: Count
    accelerator: Str
    cpus_per_node: Count
    memory_gb: Count
    disk_gb: Positive
    cpu_head: Bool
    ray_port: Port
    dashboard_port: Port
    formation_timeout_s: Positive
    health_check: HealthCheck


class ImageFacts(Section):
    """IMAGE='s facts, as images.<framework>.facts (rlaunch.plan.imagecheck reads both)."""

    python: Str
    arch: Arch
    cuda: Str
    packages: Strings  # "name==version" (config.check)
    modules: Strings   # Python modules the image holds beyond its packages (monitoring.tracing_hook's)


class FrameworkSettings(Section):
    name: FrameworkName
    image: ImageKind
    registry: Str           # REGISTRY=: the rlaunch image's registry (knobs.registry_problem)
    image_ref: Str          # IMAGE= (knobs.image_ref_problem, in config.derive)
    image_facts: ImageFacts
    overrides: Strings


class Algo(Section):
    name: AlgoName
    adv_estimator: Estimator
    group_size: Positive
    kl_coef: Float
    use_kl_loss: Bool
    lr: Float
    critic_lr: Float


class ModelSettings(Section):
    name: Str
    path: Str
    gated: Bool


class Data(Section):
    dataset: Dataset
    path: Str
    source: Str   # DATA=: hf:/modelscope:<org>/<name>[@rev], a path here, or one on the storage (config.datasource)
    config: Str   # a hub dataset's config: its files under <config>/ only
    prepare: Str  # PREPARE=: a command in CODE turning data.source into the framework's rows (config.prepare)
    max_prompt_length: Positive
    max_response_length: Positive


class Train(Section):
    batch_size: Positive
    mini_batch_size: Positive
    micro_batch_size_per_gpu: Positive
    log_prob_micro_batch_size_per_gpu: Count
    ref_log_prob_micro_batch_size_per_gpu: Count
    max_tokens_per_mb: Count
    steps: Count
    epochs: Positive
    save_freq: int
    test_freq: int
    stall_timeout_s: Annotated[int, Field(ge=-1)]
    offload: Bool
    smoke: Bool
    smoke_steps: Annotated[int, Field(ge=2)]
    rehearse: Bool


class Rollout(Section):
    backend: RolloutBackend
    tp: Positive
    gpu_memory_utilization: Annotated[float, BeforeValidator(_float), Field(le=1.0)]


class Storage(Section):
    mount: Str
    source: Str
    mode: StorageMode
    bucket: Str
    store: Store
    pvc: Str


class Logging(Section):
    wandb: Bool
    project: Str


class Monitoring(Section):
    podmonitors: Bool
    grafana_dashboard: Bool
    dashboard_ingress: Bool
    ingress_class: Str
    ingress_host: Str
    apmplus: Bool
    tracing_hook: Str
    tracing_pythonpath: Str


class Verify(Section):
    reward_last_min: Float
    reward_gain_min: Float
    greedy_min: Float


class Code(Section):
    """The user's own code (CODE=, rlaunch.config.code): packed, carried to every node, pinned."""

    dir: Str           # a directory here, or <git url>@<40-hex commit>; "" for none
    command: Str       # CMD=: the user's command line, one line (rlaunch.config.command: verl, AReaL, RLinf forms)
    allow_dirty: Bool  # CODE_DIRTY=1: pack a git tree with uncommitted changes (the diff's hash is recorded)


class Config(Section):
    """The merged config layers, validated."""

    run: Run
    infra: Infra
    cluster: Cluster
    framework: FrameworkSettings
    algo: Algo
    model: ModelSettings
    data: Data
    train: Train
    rollout: Rollout
    storage: Storage
    logging: Logging
    monitoring: Monitoring
    verify: Verify
    code: Code
    secrets: list[Annotated[str, Field(pattern=SECRET_NAME)]]


# ---------------------------------------------------------------- what derive adds (config.derive)


class Pins(Section):
    """What configs/versions.yaml pins for this run."""

    image: str
    framework_version: str
    framework_commit: str
    framework_repo: str
    ray: str
    kuberay: str
    model: dict[str, str]
    dataset: dict[str, str]
    source: dict[str, str]  # data.source's pin (rlaunch.config.datasource); {} without one
    code: dict[str, str | int | bool]  # CODE's hash, commit, dirty, diff_sha256, files, bytes ({} without CODE)


class Paths(Section):
    """Where the run's files live on the shared storage."""

    run_dir: str
    log_dir: str
    ckpt_dir: str
    data_dir: str        # data.path, else the pinned dataset (one directory per revision)
    model_dir: str       # an absolute model.path, else the pinned model's directory ("" without model.name)
    model: str           # what the framework loads (rlaunch.config.inputs.model_path): a model directory, or a hub id
    code_dir: str        # CODE's pack, one path on every node: <mount>/code/<hash> (SkyPilot: /rlaunch/code/<hash>)


class Derived(Section):
    """Facts that follow from several keys, decided once (config.derive) and read everywhere."""

    ray_nodes: int              # Ray nodes the cluster has once formed (preflight expects them)
    cpu_only_head: bool         # KubeRay cluster.cpu_head: a head without GPUs beside cluster.nodes GPU workers
    head_ray_cpus: int | None   # Ray CPUs that CPU-only head advertises; None: the head is a node like the others
    nccl_env: dict[str, str]    # NCCL settings every Ray process of the run gets
    ray_health_env: dict[str, str]  # RAY_health_check_* from cluster.health_check, where the head starts
    rehearsal: list[dict[str, Any]]  # REHEARSE=1: each rewrite {key, value, was, why} (rlaunch.config.rehearse)


class Spec(Config):
    """A Config with what follows from it: the one object render, checks and backends read."""

    preset: str
    pins: Pins
    paths: Paths
    derived: Derived

    def json_text(self) -> str:
        return json.dumps(self.dump(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path | str, **changes: dict[str, Any]) -> Spec:
        """A launch's spec.json (status, logs, down of a run launched before), `changes` merged into
        its sections first; one this rlaunch cannot read is a ConfigError naming the file."""
        from pydantic import ValidationError

        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            for section, values in changes.items():
                data[section] = {**data[section], **values}
            return cls.model_validate(data)
        except (OSError, ValueError, KeyError, TypeError, ValidationError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError("spec.json", str(path), f"a spec.json this rlaunch reads ({first}); render the "
                              "run again, or name it with INFRA= and RUN_ID= to ask the infrastructure") from None


# ---------------------------------------------------------------- the keys, for messages and knobs


def _leaves(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    out: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        section = _section(info)
        if section is not None:
            out.update(_leaves(section, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = info
    return out


def _section(info: FieldInfo) -> type[BaseModel] | None:
    kind = info.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


# Every key a config may set (dotted) -> its field.
KEYS: dict[str, FieldInfo] = _leaves(Config)
SECTIONS = {name for name, info in Config.model_fields.items() if _section(info) is not None}


def _base(info: FieldInfo) -> Any:
    return info.annotation


def choices(key: str) -> list[str] | None:
    """The values a Literal or OneOf key allows, in order; None for any other key."""
    info = KEYS[key]
    kind = _base(info)
    if typing.get_origin(kind) is Literal:
        return list(typing.get_args(kind))
    return next((list(m.values) for m in info.metadata if isinstance(m, OneOf)), None)


ENUMS: dict[str, list[str]] = {key: values for key in KEYS if (values := choices(key)) is not None}


def is_text(key: str) -> bool:
    """A string key takes a SET value's text exactly (YAML would drop quotes and '#...')."""
    return key in KEYS and _base(KEYS[key]) is str and choices(key) is None


def describe(key: str) -> str:
    """What a key allows, as the error line says it: 'one of ...', 'an integer >= 1', ..."""
    if key == "secrets":
        return SECRETS_ALLOWED
    if key in SECTIONS:
        return "a mapping"
    info = KEYS[key]
    values = choices(key)
    if values is not None:
        return "one of " + ", ".join(repr(v) if v == "" else str(v) for v in values)
    kind = _base(info)
    text = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        kind, "a list of strings")
    bounds = []
    for item in info.metadata:
        if getattr(item, "ge", None) is not None:
            bounds.append(f">= {item.ge:g}")
        if getattr(item, "le", None) is not None:
            bounds.append(f"<= {item.le:g}")
    return text + (" " + " and ".join(bounds) if bounds else "")


def suggest(key: str) -> str:
    """'unknown key', with the closest known key when there is one."""
    close = difflib.get_close_matches(key, list(KEYS), n=1)
    return f"unknown key; did you mean '{close[0]}'?" if close else "unknown key"

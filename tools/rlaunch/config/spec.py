"""The typed spec: what a merged config may hold, and what rlaunch derives from it.

`Config` is the merged config layers: frozen pydantic models, unknown keys refused (extra="forbid"),
enums as Literals, bounds on the field. configs/defaults.yaml gives every key its first value (so no
field has a default here: a key missing from that file is a bug the tests catch); these models say
what each key may be. `Spec` is a Config plus what `config.derive` computes once from it (pins,
paths on the shared storage, the Ray and NCCL facts), which every backend, template and check reads.

The values arrive as YAML or as the text of a Make knob, so each type accepts exactly the spellings
the config always took: 0/1 for a boolean (SPOT=1), any number for a float (YAML reads 1e-6 as a
string), a number for a string key. Nothing else is coerced.

A section also reads like the mapping spec.json is (spec["cluster"]["nodes"]), read-only: the
code on the nodes and the reports get spec.json itself, a plain dict, and both read the same way.
"""

from __future__ import annotations

import difflib
import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.fields import FieldInfo

from rlaunch import frameworks
from rlaunch.config import knobs
from rlaunch.errors import ConfigError

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


def Int(ge: int | None = None, le: int | None = None) -> Any:  # noqa: N802 - a type
    return Annotated[int, Field(ge=ge, le=le)]


def Choice(values: list[str] | tuple[str, ...]) -> Any:  # noqa: N802 - a type
    return Literal[tuple(values)]


# The keys with a fixed set of values (infra, framework, algorithm names come from their registries).
InfraName = Choice(knobs.INFRAS)
K8sFlavor = Choice(["generic", "gke", "vke"])
GkeNetworking = Choice(["dranet", "network-mapping"])
FrameworkName = Choice(frameworks.names())
ImageKind = Choice(["official", "rlaunch"])
AlgoName = Choice(knobs.ALGOS)
Estimator = Choice(["gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
    "remax", "opo", "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized"])
Dataset = Choice(["gsm8k", "math", "boba", "digits"])
RolloutBackend = Choice(["vllm", "sglang", "hf"])
StorageMode = Choice(["MOUNT", "COPY", "MOUNT_CACHED"])
Store = Choice(["", "gcs", "s3", "azure", "r2", "ibm", "oci"])


class Section(BaseModel):
    """A frozen part of the spec that refuses unknown keys, and reads like spec.json's mapping."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self else default

    def keys(self) -> list[str]:
        return list(type(self).model_fields)

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in type(self).model_fields]

    def dump(self) -> dict:
        """The section as plain JSON data (what spec.json holds)."""
        return self.model_dump(mode="json")


# ---------------------------------------------------------------- the config (configs/defaults.yaml documents each key)


class Run(Section):
    name: Str
    id: Str
    out: Str


class KubeRaySettings(Section):
    service_account: Str
    gcp_service_account: Str
    node_selector: Strings
    head_cpus: Int()
    head_memory_gb: Int()
    head_ephemeral_storage_gb: Int(ge=0)
    ephemeral_storage_gb: Int(ge=0)
    imex: Bool
    gke_networking: GkeNetworking
    gvnic_network_prefix: Str
    rdma_network_prefix: Str
    object_store_endpoint: Str
    object_store_secret: Str
    ttl_seconds_after_finished: Int()
    active_deadline_seconds: Int()
    backoff_limit: Int()
    inputs_timeout_s: Int(ge=1)


class Infra(Section):
    name: InfraName
    sky_infra: Str
    k8s_flavor: K8sFlavor
    namespace: Str
    kuberay: KubeRaySettings
    spot: Bool
    rdma: Bool
    autostop_idle_minutes: Int(ge=0)
    autostop_down: Bool
    recovery_strategy: Str
    max_restarts_on_errors: Int()
    install_root: Str
    image_bin: Str


class HealthCheck(Section):
    """Ray's GCS health check of every node (RAY_health_check_*, read by the head's GCS)."""

    period_ms: Int(ge=100)
    failure_threshold: Int(ge=1)
    timeout_ms: Int(ge=100)


class Cluster(Section):
    nodes: Int(ge=1)
    gpus_per_node: Int(ge=0)
    accelerator: Str
    cpus_per_node: Int(ge=0)
    memory_gb: Int(ge=0)
    disk_gb: Int(ge=1)
    cpu_head: Bool
    ray_port: Int(ge=1, le=65535)
    dashboard_port: Int(ge=1, le=65535)
    formation_timeout_s: Int(ge=1)
    health_check: HealthCheck


class ImageFacts(Section):
    """IMAGE='s facts, as images.<framework>.facts (rlaunch.plan.imagecheck reads both)."""

    python: Str
    arch: Choice(["", "amd64", "arm64"])
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
    group_size: Int(ge=1)
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
    max_prompt_length: Int(ge=1)
    max_response_length: Int(ge=1)


class Train(Section):
    batch_size: Int(ge=1)
    mini_batch_size: Int(ge=1)
    micro_batch_size_per_gpu: Int(ge=1)
    log_prob_micro_batch_size_per_gpu: Int(ge=0)
    ref_log_prob_micro_batch_size_per_gpu: Int(ge=0)
    max_tokens_per_mb: Int(ge=0)
    steps: Int(ge=0)
    epochs: Int(ge=1)
    save_freq: Int()
    test_freq: Int()
    stall_timeout_s: Int(ge=-1)
    offload: Bool
    smoke: Bool
    smoke_steps: Int(ge=2)
    rehearse: Bool


class Rollout(Section):
    backend: RolloutBackend
    tp: Int(ge=1)
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


class Paths(Section):
    """Where the run's files live on the shared storage."""

    run_dir: str
    log_dir: str
    ckpt_dir: str
    data_dir: str        # data.path, else the pinned dataset (one directory per revision)
    model_dir: str       # an absolute model.path, else the pinned model's directory ("" without model.name)
    model: str           # what the framework loads (rlaunch.config.inputs.model_path): a model directory, or a hub id


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
    def read(cls, path, **changes: dict) -> "Spec":
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
    """The values a Literal key allows, in order; None for any other key."""
    kind = _base(KEYS[key])
    return list(typing.get_args(kind)) if typing.get_origin(kind) is Literal else None


ENUMS: dict[str, list[str]] = {key: values for key in KEYS if (values := choices(key)) is not None}


def is_text(key: str) -> bool:
    """A string key takes a SET value's text exactly (YAML would drop quotes and '#...')."""
    return key in KEYS and _base(KEYS[key]) is str


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

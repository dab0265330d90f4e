"""The model's own facts, from its config.json: what plan's memory bound, the topology rules
(tensor parallel against attention heads) and the plan's model line read. Never the preset's model:
the model the run loads (spec.model.path, or the pinned model).

Where config.json comes from, first found wins (nothing here raises for a model it cannot read:
`of` returns the reason instead, and the plan warns naming the checks that could not run):
  - model.path an absolute directory readable on this machine: <dir>/config.json;
  - a pinned model (configs/versions.yaml models.<name>.config, copied from the pinned revision's
    config.json): offline, so the presets plan without the network;
  - a facts cache: RLAUNCH_MODEL_FACTS (folders, ':'-separated) and build/model-facts/, each
    holding <org>--<name>/<revision>/config.json (revision "main" when the id names none);
  - the Hugging Face Hub (huggingface_hub, HF_TOKEN for a gated model), unless HF_HUB_OFFLINE is
    set, or ModelScope for a model there (modelscope:<org>/<name>, or a pin with `hub: modelscope`;
    its client, MODELSCOPE_ENDPOINT honoured): the file is kept in build/model-facts/ (ModelScope's
    as modelscope--<org>--<name>/...) so the next plan needs no network.
The parameter count is computed from the architecture fields (dense; MoE: total and active).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rlaunch.config import cmdfacts, hub, pins
from rlaunch.config import topology

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / "build" / "model-facts"
ENV = "RLAUNCH_MODEL_FACTS"
# Families whose attention projections carry a bias (Qwen2's q/k/v); others say attention_bias.
QKV_BIAS = {"qwen2", "qwen2_moe"}
QK_NORM = {"qwen3", "qwen3_moe"}  # a per-head-dim RMSNorm on q and on k in every layer
# The architectures param_count knows, layer by layer; another (MLA, hybrid linear attention, extra
# norms) would be miscounted, so its facts are "not known" rather than guessed.
COUNTED = {"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral"}


@dataclass(frozen=True)
class Facts:
    model: str           # the HF id (and @revision) or directory
    source: str          # where config.json was read
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    dtype: str
    parts: dict[str, int] = field(default_factory=dict)  # parameters by part, "total" and "active" among them
    experts: int = 0     # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0

    @property
    def params(self) -> int:
        return self.parts["total"]

    @property
    def active(self) -> int:
        return self.parts["active"]

    def line(self) -> str:
        kind = (f"MoE {self.params / 1e9:.2f} B total, {self.active / 1e9:.2f} B active ({self.experts} experts, "
                f"{self.experts_per_token} per token)" if self.experts else f"{self.params / 1e9:.2f} B parameters")
        return (f"model {self.model}: {kind}, {self.layers} layers, hidden {self.hidden}, {self.heads} heads / "
                f"{self.kv_heads} KV heads, vocab {self.vocab}, {'tied' if self.tied else 'untied'} embeddings, "
                f"{self.dtype} (from {self.source})")


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config.json keeps the language model's fields under text_config."""
    inner = cfg.get("text_config")
    return {**cfg, **inner} if isinstance(inner, dict) and "hidden_size" in inner else cfg


def param_count(cfg: dict[str, Any]) -> dict[str, int]:
    """Parameters of a decoder (Llama/Qwen2/Qwen3/Mistral, and the MoE Qwen2-MoE/Qwen3-MoE/Mixtral)
    from its config.json fields, by part; "active" counts only the experts a token is routed to.

    Per layer: q/k/v/o projections (+ q/k/v bias where the family has it, + Qwen3's q/k norms), two
    RMSNorms, and either a gated MLP (gate, up, down) or an MoE block (router, experts, and Qwen2-MoE's
    shared expert with its gate). The LM head shares the embedding when tie_word_embeddings."""
    cfg = text_config(cfg)
    mtype = str(cfg.get("model_type", ""))
    h, layers, vocab = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["vocab_size"])
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    bias = cfg.get("attention_bias", mtype in QKV_BIAS)
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if bias else 0)
    attention += 2 * head_dim if mtype in QK_NORM else 0
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    top_k = int(cfg.get("num_experts_per_tok") or 0)
    dense_mlp = 3 * h * int(cfg["intermediate_size"])
    total = active = 0
    for i in range(layers):
        sparse = experts > 0 and i not in (cfg.get("mlp_only_layers") or []) and \
            (i + 1) % int(cfg.get("decoder_sparse_step") or 1) == 0
        if not sparse:
            total += dense_mlp
            active += dense_mlp
            continue
        expert = 3 * h * int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        always = h * experts + (3 * h * shared + h if shared else 0)  # router; shared expert + its gate
        total += always + experts * expert
        active += always + top_k * expert
    per_layer_fixed = attention + 2 * h
    embed = vocab * h
    head = 0 if cfg.get("tie_word_embeddings", False) else vocab * h
    common = embed + layers * per_layer_fixed + h + head
    parts = {"embedding": embed, "layers": layers * per_layer_fixed + total, "final_norm": h, "lm_head": head,
             "total": common + total, "active": common + active}
    return parts


def from_config(cfg: dict[str, Any], model: str, source: str) -> Facts | str:
    """The facts, or why they cannot be counted (an architecture param_count does not know)."""
    t = text_config(cfg)
    if str(t.get("model_type", "")) not in COUNTED:
        return (f"{source}: model_type={t.get('model_type', '(none)')!r} is not an architecture rlaunch counts "
                f"({', '.join(sorted(COUNTED))})")
    heads = int(t["num_attention_heads"])
    return Facts(
        model=model, source=source, model_type=str(t.get("model_type", "")), layers=int(t["num_hidden_layers"]),
        hidden=int(t["hidden_size"]), heads=heads, kv_heads=int(t.get("num_key_value_heads") or heads),
        head_dim=int(t.get("head_dim") or int(t["hidden_size"]) // heads), vocab=int(t["vocab_size"]),
        tied=bool(t.get("tie_word_embeddings", False)),
        dtype=str(t.get("torch_dtype") or t.get("dtype") or cfg.get("torch_dtype") or "bfloat16"),
        parts=param_count(cfg), experts=int(t.get("num_experts") or t.get("num_local_experts") or 0),
        experts_per_token=int(t.get("num_experts_per_tok") or 0))


# ---------------------------------------------------------------- where the run's model is


def which(spec: Spec) -> tuple[str, str]:
    """(hub id, modelscope:-qualified on ModelScope, or absolute directory; revision) of the model
    the run loads."""
    path, pinned = spec.model.path, spec.pins.model
    if not path:
        entry = pins.load_versions().get("models", {}).get(spec.model.name, {}) or {}
        return hub.qualified(hub.of(entry), str(entry.get("hf_id", ""))), str(entry.get("revision", ""))
    if path.startswith("/"):
        return path.rstrip("/"), ""
    repo, _, rev = path.partition("@")
    if repo == pinned.get("hf_id"):  # the pin's own id: on the pin's hub, at its commit (if it has one)
        repo = hub.qualified(hub.of(pinned), repo)
        rev = rev or ("" if pinned.get("unresolved") else str(pinned.get("revision", "")))
    return repo, rev


def _cache_dirs() -> list[Path]:
    return [Path(d) for d in os.environ.get(ENV, "").split(":") if d] + [CACHE]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return None


def _pinned(model: str, rev: str) -> tuple[dict[str, Any], str] | None:
    for entry in pins.load_versions().get("models", {}).values():
        if (entry and entry.get("config") and hub.qualified(hub.of(entry), str(entry.get("hf_id"))) == model
                and rev in ("", entry.get("revision"))):
            return entry["config"], _page(hub.of(entry), str(entry["hf_id"]), str(entry["revision"]))
    return None


def _page(name: str, repo: str, rev: str, endpoint: str = "") -> str:
    """Where a person reads the config.json on its hub."""
    if name == "modelscope":
        return f"{endpoint or 'https://modelscope.cn'}/models/{repo}/file/view/{rev or 'master'}/config.json"
    return f"{endpoint or 'https://huggingface.co'}/{repo}/blob/{rev or 'main'}/config.json"


def _reachable(endpoint: str) -> str:
    """"" when one connection to endpoint opens, else why not: the hubs' clients retry an unreachable
    host for seconds."""
    where = urlsplit(endpoint)
    try:
        socket.create_connection((where.hostname, where.port or (443 if where.scheme == "https" else 80)),
                                 timeout=3).close()
    except OSError as err:
        return f"{endpoint} cannot be reached: {err.strerror or type(err).__name__}"
    return ""


def _keep(model: str, rev: str, cfg: dict[str, Any]) -> None:
    keep = CACHE / model.replace(":", "--").replace("/", "--") / (rev or "main") / "config.json"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps(cfg, indent=2) + "\n")


def _modelscope(repo: str, rev: str) -> tuple[dict[str, Any], str] | str:
    """config.json from ModelScope (its client), kept in build/model-facts/."""
    try:  # lazy: plan only; the endpoint is the client's own (MODELSCOPE_ENDPOINT, else its default site)
        from modelscope_hub.config import get_default_config
    except ImportError:
        return "ModelScope's client (modelscope) is not installed here"
    endpoint = str(get_default_config().endpoint)  # always set: the client normalises it
    why = _reachable(endpoint)
    if why:
        return f"ModelScope ({why})"
    try:
        from modelscope.hub.file_download import model_file_download

        local = model_file_download(repo, "config.json", revision=rev or hub.HUBS["modelscope"]["moving"],
                                    cache_dir=str(CACHE / ".modelscope"))
    except Exception as err:  # noqa: BLE001 - offline, private, missing: each is a reason, never a crash
        return f"ModelScope did not answer ({type(err).__name__})"
    cfg = _read(Path(local))
    if cfg is None:
        return "ModelScope's config.json is not JSON"
    _keep(f"modelscope:{repo}", rev, cfg)
    return cfg, _page("modelscope", repo, rev, endpoint)


def _hub(repo: str, rev: str) -> tuple[dict[str, Any], str] | str:
    """config.json from the Hub, kept in build/model-facts/; a reason string when it cannot be read."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import constants

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    why = _reachable(endpoint)
    if why:
        return f"the Hub ({why})"
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)  # its retry lines; the reason below says what failed
    try:
        from huggingface_hub import hf_hub_download  # lazy: plan only

        local = hf_hub_download(repo, "config.json", revision=rev or None, cache_dir=str(CACHE / ".hub"),
                                etag_timeout=5, endpoint=endpoint)
    except Exception as err:  # noqa: BLE001 - offline, gated, missing: each is a reason, never a crash
        return f"the Hub did not answer ({type(err).__name__})"
    finally:
        hub_log.setLevel(level)
    cfg = _read(Path(local))
    if cfg is None:
        return "the Hub's config.json is not JSON"
    _keep(repo, rev, cfg)
    return cfg, _page(hub.DEFAULT, repo, rev, endpoint)


def local(model: str, rev: str = "") -> Facts | str:
    """The facts from what this machine holds (the directory, the pin, the facts cache), never a hub."""
    if not model:
        return "no model (model.path and model.name are empty)"
    if model.startswith("/"):
        cfg = _read(Path(model) / "config.json")
        if cfg is None:
            return f"{model}/config.json is not readable on this machine"
        return from_config(cfg, model, f"{model}/config.json")
    shown = f"{model}@{rev}" if rev else model
    found = _pinned(model, rev)
    if found:
        return from_config(found[0], shown, found[1])
    name = model.replace(":", "--").replace("/", "--")
    for base in _cache_dirs():
        for r in dict.fromkeys([rev or "main", rev[:12]]):
            path = base / name / r / "config.json"
            cfg = _read(path) if r else None
            if cfg is not None:
                return from_config(cfg, shown, str(path))
    return f"config.json of {shown} is not on this machine (no pin, not in {', '.join(map(str, _cache_dirs()))})"


@functools.lru_cache(maxsize=32)
def read(model: str, rev: str = "") -> Facts | str:
    """The facts of an HF id at a revision, or of a directory; a reason string when none are readable."""
    found = local(model, rev)
    if not isinstance(found, str) or not model or model.startswith("/"):
        return found
    shown = f"{model}@{rev}" if rev else model
    name = model.replace(":", "--").replace("/", "--")
    got = _modelscope(model.split(":", 1)[1], rev) if model.startswith("modelscope:") else _hub(model, rev)
    if isinstance(got, str):
        dirs = ", ".join(str(d) for d in _cache_dirs())
        return (f"config.json of {shown} not found ({got}; looked in {dirs}: put {name}/"
                f"{rev or 'main'}/config.json there, or point {ENV} at such a folder)")
    return from_config(got[0], shown, got[1])


def of(spec: Spec) -> Facts | str:
    """The facts of the model this run loads, or why there are none (CMD='s config naming its model
    by a reference only the run resolves: not the preset's, unknown)."""
    command = getattr(getattr(spec, "code", None), "command", "")  # a spec.json view may have no code
    named = cmdfacts.of(spec) if command else None
    if named is not None and not cmdfacts.taken(named.value):
        return f"{named.where} is {named.value!r}, which only the run resolves"
    return read(*which(spec))


def check(spec: Spec) -> str:
    """The plan's model line; ConfigError (exit 2) when the rollout's split does not fit the model's
    heads. A model whose facts cannot be read is a warning naming the checks that did not run."""
    if spec.cluster.gpus_per_node < 1:
        return "model: facts not read (a CPU run: no memory bound, no tensor parallel)"
    facts = of(spec)
    if isinstance(facts, str):
        return (f"model: warning: its facts are not known, so the memory bound and the attention-heads rules "
                f"(rollout tensor parallel, Ulysses) did not run: {facts}")

    topology.attention_heads(spec, facts.heads, facts.kv_heads)
    return facts.line()

"""A model named by its hub id, treated like a pinned model (issues 29, 31):

    model.path=<org>/<name>[@<revision>]              the Hugging Face Hub
    model.path=modelscope:<org>/<name>[@<revision>]   ModelScope (seeds 002 and 003 download from it)

Its revision is resolved to a commit at plan time where the hub answers, and the input preparation
downloads it once with that hub's own client into its directory, with its SHA256SUMS
(rlaunch.job.data --hf-id / --modelscope-id):
  - the Hub: huggingface_hub resolves a branch or tag (HF_ENDPOINT is honoured, so tests use
    tests/fakehub.py); <mount>/models/<org>--<name>/<rev12>/.
  - ModelScope: its API names no commit for a branch or tag, so only a 40-hex commit pins it; another
    revision is downloaded as it is at launch, with a warning. <mount>/models/modelscope/<org>/<name>/
    <revision>/, seed 003's layout, so a model its user already downloaded there is found and kept.
"""

from __future__ import annotations

import os
import re
from typing import Any

# The hubs a model or dataset pin can name (configs/versions.yaml `hub:`), each with the revision a
# bare id means and the secret its client reads for a gated or private repository.
HUBS = {"huggingface": {"moving": "main", "token": "HF_TOKEN", "shown": "the Hugging Face Hub"},
        "modelscope": {"moving": "master", "token": "MODELSCOPE_API_TOKEN", "shown": "ModelScope"}}
DEFAULT = "huggingface"
HUB_ID = re.compile(r"(?:(?P<hub>modelscope):)?(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[\w./-]+))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
TIMEOUT_S = 10.0


def problem(name: str) -> str | None:
    """A `hub:` value: None when it is one rlaunch downloads from."""
    return None if name in HUBS else f"one of {', '.join(HUBS)}"


def of(pin: dict[str, Any]) -> str:
    """The hub a model or dataset pin names (the Hub when it names none)."""
    return str(pin.get("hub") or DEFAULT)


def token(pin: dict[str, Any]) -> str:
    """The secret the pin's hub client reads for a gated or private repository."""
    return HUBS.get(of(pin), HUBS[DEFAULT])["token"]


def parse(path: str) -> tuple[str, str, str] | None:
    """(hub, repo, revision) of a hub id in model.path (the hub's moving branch when it names no
    revision); None for a directory."""
    m = HUB_ID.fullmatch(path or "")
    if not m:
        return None
    name = m["hub"] or DEFAULT
    return name, m["repo"], m["rev"] or HUBS[name]["moving"]


def resolve(name: str, repo: str, revision: str) -> tuple[str, str]:
    """(commit, "") from the hub, or (revision, why it is not a commit) where it cannot answer."""
    if COMMIT.fullmatch(revision):
        return revision, ""
    commit, _, why = info(name, repo, revision, "model")
    return commit, why


def info(name: str, repo: str, revision: str, kind: str) -> tuple[str, list[str], str]:
    """(commit, the repository's files, "") of a model or dataset (kind) from the hub, or (revision,
    [], why not) where it cannot answer."""
    if name == "modelscope":
        return revision, [], "ModelScope's API names no commit for a branch or tag"
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return revision, [], "HF_HUB_OFFLINE is set"
    try:
        from huggingface_hub import HfApi

        # HF_ENDPOINT as it is now: huggingface_hub reads it once, when it is first imported.
        api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
        got = (api.dataset_info if kind == "dataset" else api.model_info)(repo, revision=revision, timeout=TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - no route, DNS, 404, auth: each is "not resolved", said
        return revision, [], f"the Hub did not answer ({type(err).__name__})"
    return str(got.sha), [s.rfilename for s in got.siblings or []], ""


def directory(mount: str, name: str, repo: str, revision: str) -> str:
    if name == "modelscope":
        return f"{mount}/models/modelscope/{repo}/{revision}"
    return f"{mount}/models/{repo.replace('/', '--')}/{revision[:12]}"


def qualified(name: str, repo: str) -> str:
    """The id as model.path spells it: modelscope:<org>/<name>, or the Hub's bare <org>/<name>."""
    return repo if name == DEFAULT else f"{name}:{repo}"


def pin(mount: str, path: str) -> dict[str, str] | None:
    """pins.model for a hub id in model.path: hub, hf_id (the id on that hub), revision (a commit
    where resolved), dir, and `unresolved`: why the revision is not a commit ("" when it is)."""
    parsed = parse(path)
    if parsed is None:
        return None
    name, repo, asked = parsed
    revision, why = resolve(name, repo, asked)
    return {"hub": name, "hf_id": repo, "revision": revision, "asked": asked, "unresolved": why,
            "dir": directory(mount, name, repo, revision)}


def warning(model_pin: dict[str, Any], key: str = "model.path") -> str:
    """A moving revision that could not be resolved: what could go wrong (`key`: where to name a commit)."""
    if not model_pin.get("unresolved"):
        return ""
    shown = qualified(of(model_pin), model_pin["hf_id"])
    return (f"model {shown}@{model_pin['revision']} is not resolved to a commit "
            f"({model_pin['unresolved']}): '{model_pin['revision']}' moves, so the nodes download what it is "
            f"at launch and a rerun may train another model; name a commit: {key}={shown}@<40-hex commit>")

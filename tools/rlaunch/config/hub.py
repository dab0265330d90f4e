"""A model named by its Hub id (model.path=<org>/<name>[@<revision>], issue 29): treated like a pinned
model. Its revision is resolved to a commit at plan time where the Hub answers (huggingface_hub;
HF_ENDPOINT is honoured, so tests use tests/fakehub.py), and the input preparation downloads it once
into <mount>/models/<org>--<name>/<rev12>/ with its SHA256SUMS (rlaunch.job.data --hf-id)."""

from __future__ import annotations

import os
import re

HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[\w./-]+))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
TIMEOUT_S = 10.0


def parse(path: str) -> tuple[str, str] | None:
    """(repo, revision) of a Hub id in model.path ("main" when none is given); None for a directory."""
    m = HUB_ID.fullmatch(path or "")
    return (m["repo"], m["rev"] or "main") if m else None


def resolve(repo: str, revision: str) -> tuple[str, str]:
    """(commit, "") from the Hub, or (revision, why it is not a commit) where the Hub cannot answer."""
    if COMMIT.fullmatch(revision):
        return revision, ""
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return revision, "HF_HUB_OFFLINE is set"
    try:
        from huggingface_hub import HfApi

        # HF_ENDPOINT as it is now: huggingface_hub reads it once, when it is first imported.
        info = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).model_info(repo, revision=revision,
                                                                             timeout=TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - no route, DNS, 404, auth: each is "not resolved", said
        return revision, f"the Hub did not answer ({type(err).__name__})"
    return str(info.sha), ""


def directory(mount: str, repo: str, revision: str) -> str:
    return f"{mount}/models/{repo.replace('/', '--')}/{revision[:12]}"


def pin(mount: str, path: str) -> dict[str, str] | None:
    """pins.model for a Hub id in model.path: hf_id, revision (a commit where resolved), dir, and
    `unresolved`: why the revision is not a commit ("" when it is)."""
    parsed = parse(path)
    if parsed is None:
        return None
    repo, asked = parsed
    revision, why = resolve(repo, asked)
    return {"hf_id": repo, "revision": revision, "asked": asked, "unresolved": why,
            "dir": directory(mount, repo, revision)}


def warning(model_pin: dict) -> str:
    """A moving revision that could not be resolved: what could go wrong."""
    if not model_pin.get("unresolved"):
        return ""
    return (f"model {model_pin['hf_id']}@{model_pin['revision']} is not resolved to a commit "
            f"({model_pin['unresolved']}): '{model_pin['revision']}' moves, so the nodes download what it is "
            "at launch and a rerun may train another model; name a commit: model.path="
            f"{model_pin['hf_id']}@<40-hex commit>")

"""Where DATA's rows are on this machine, for the plan's row checks of every framework (issue 44): a
DATA= of this machine, a shared path this machine sees, data.prepare's output converted at plan time,
or a hub dataset's train/test files fetched once into build/datacheck/hub/. Standard library at import
(the TRL adapter, which the job's steps import on the nodes, reads its rows through it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import ROOT
from rlaunch.config import datasource

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# A hub file larger than this is not fetched at plan time (the rows are checked where they land).
FETCH_LIMIT_BYTES = 256 << 20


def cache_dir() -> Path:
    """Where the plan's data checks keep what they fetch, convert and pass (RLAUNCH_DATACHECK_CACHE)."""
    return Path(os.environ.get("RLAUNCH_DATACHECK_CACHE") or ROOT / "build" / "datacheck")


def rows_here(spec: Spec) -> tuple[list[Path], list[Path]] | str:
    """(train files, test files) this machine can read, or why there are none."""
    base = base_here(spec)
    if isinstance(base, str):
        return base
    source = spec.pins.source
    names = {split: [n for n in str(source[split]).split(",") if n] for split in ("train", "test")}
    return [base / n for n in names["train"]], [base / n for n in names["test"]]


def base_here(spec: Spec) -> Path | str:
    """The directory on this machine that holds what the framework reads at datasource.read_dir, or why none."""
    source = spec.pins.source
    kind = source["kind"]
    if source.get("prepare"):  # data.prepare's output, converted at plan time where DATA is here
        if not source.get("prepare_checked"):
            return f"data.prepare's output ({source['note']})"
        base = Path(source["prepare_checked"])
    elif kind == "local":
        local = Path(source["local"])
        base = local.parent if local.is_file() else local
    elif kind == "shared":
        base = Path(source["dir"])
        if not base.is_dir():
            return f"{base} is not on this machine (the inputs step adopts it where the nodes run)"
    else:
        got = _hub_files(source)
        if isinstance(got, str):
            return got
        base = got
    return base


def _hub_files(source: dict[str, Any]) -> Path | str:
    """A hub dataset's train and test files at its commit, fetched once into build/datacheck/hub/."""
    if source["unresolved"]:
        return f"{datasource.shown(source)} is not resolved to a commit ({source['unresolved']})"
    if source["hub"] != "huggingface":
        return f"{datasource.shown(source)}: only the Hugging Face Hub's rows are fetched at plan time yet"
    out: Path = cache_dir() / "hub" / str(source["hf_id"]).replace("/", "--") / str(source["revision"])
    names = sorted({n for split in ("train", "test") for n in str(source[split]).split(",") if n})
    wanted = [n for n in names if not (out / n).is_file()]
    try:
        from huggingface_hub import HfApi, hf_hub_download

        endpoint = os.environ.get("HF_ENDPOINT") or None
        if wanted:
            found = HfApi(endpoint=endpoint).get_paths_info(source["hf_id"], wanted, repo_type="dataset",
                                                            revision=source["revision"])
            size = sum(int(getattr(f, "size", 0) or 0) for f in found)
            if size > FETCH_LIMIT_BYTES:
                return (f"{datasource.shown(source)}: its files are {size >> 20} MiB, more than the plan fetches "
                        f"({FETCH_LIMIT_BYTES >> 20} MiB)")
        for name in wanted:
            hf_hub_download(source["hf_id"], name, repo_type="dataset", revision=source["revision"],
                            local_dir=str(out), endpoint=endpoint)
    except Exception as err:  # noqa: BLE001 - no route, 404, auth: the rows are not checked, said
        return f"{datasource.shown(source)}: its files could not be fetched ({type(err).__name__})"
    return out



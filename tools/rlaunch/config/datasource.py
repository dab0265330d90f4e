"""DATA= (data.source): the user's dataset, wherever it is, pinned at plan time (issue 44).

    hf:<org>/<name>[@<revision>]           a dataset on the Hugging Face Hub
    modelscope:<org>/<name>[@<revision>]   one on ModelScope
    a file or directory on this machine    uploaded once, named by its content
    an absolute path under storage.mount   on the shared storage already (as data.path)

pin() turns it into spec.pins.source, read by rlaunch.config.inputs (where it lives, how the inputs
step makes it) and by the framework adapters (which files they read):
  - kind: hub | local | shared; dir: where every node reads it;
  - train / test: its files the framework reads, relative to dir, comma-separated: found by name
    (train.* and test.* / validation.*, verl's suffixes .parquet .json .jsonl; shards such as
    train-00000-of-00002.parquet all count), from the hub's file list or the directory here;
  - a hub one: hub, hf_id, asked, revision (a commit where the hub answered), unresolved (why not);
  - a local one: local (its path here), sha256 (over its manifest: relative path + sha256 of each
    file, SHA256SUMS' text), placed at <mount>/data/local/<sha256[:12]>/.
A shared path that this machine cannot see keeps verl's train.parquet / test.parquet.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from rlaunch.config import code, hub
from rlaunch.errors import ConfigError

KEY = "data.source"
PREFIXES = {"hf:": hub.DEFAULT, "modelscope:": "modelscope"}
# verl 0.9.1's RLHFDataset reads these, by suffix (anything else raises at its first batch).
SUFFIXES = (".parquet", ".json", ".jsonl")
TRAIN = ("train",)
TEST = ("test", "validation", "val")
DEFAULT_FILES = {"train": "train.parquet", "test": "test.parquet"}
ALLOWED = ("hf:<org>/<name>[@<revision>], modelscope:<org>/<name>[@<revision>], a file or directory on "
           "this machine, or an absolute path under storage.mount")
# Not the dataset: a hub client's records, a git clone's store, the manifest itself.
SKIPPED = (".cache", ".git", ".huggingface")


def is_hub(value: str) -> bool:
    return value.startswith(tuple(PREFIXES))


def files_of(root: Path) -> list[str]:
    """The dataset's files below root (a file: itself), relative, sorted; SHA256SUMS and hidden stores left out."""
    if root.is_file():
        return [root.name]
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.name != "SHA256SUMS" and not set(SKIPPED) & set(p.relative_to(root).parts))


def manifest(root: Path) -> str:
    """SHA256SUMS' text for root (a directory, or one file as if alone in one): sha256sum's format."""
    base = root.parent if root.is_file() else root
    lines = []
    for rel in files_of(root):
        digest = hashlib.sha256()
        with (base / rel).open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        lines.append(f"{digest.hexdigest()}  {rel}\n")
    return "".join(lines)


def content_hash(root: Path) -> str:
    """The name a local dataset gets on the storage: sha256 of its manifest (paths and contents)."""
    return hashlib.sha256(manifest(root).encode()).hexdigest()


def _split(name: str) -> str:
    """'train' of train.parquet, data/train-00000-of-00002.parquet, train_0.jsonl; '' otherwise."""
    stem = name.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    for split in TRAIN + TEST:
        if stem == split or stem.startswith((f"{split}-", f"{split}_")):
            return "train" if split in TRAIN else "test"
    return ""


def splits(names: list[str], config: str, value: str) -> tuple[list[str], list[str], str]:
    """(train files, test files, a note) among a dataset's files; ConfigError when verl cannot read
    its training rows: no train.* file, or one of a suffix verl does not read."""
    if config:
        names = [n for n in names if n.startswith(f"{config}/") or f"/{config}/" in n]
    found: dict[str, list[str]] = {"train": [], "test": []}
    unread: list[str] = []
    for name in names:
        split = _split(name)
        if split and name.endswith(SUFFIXES):
            found[split].append(name)
        elif split == "train":
            unread.append(name)
    if not found["train"]:
        where = f" under its config {config}/" if config else ""
        if unread:
            raise ConfigError(KEY, value, f"a dataset whose train file verl can read ({', '.join(SUFFIXES)}, by "
                              f"suffix): found {', '.join(unread[:3])}; convert it (e.g. pandas: "
                              "read it, .to_parquet('train.parquet'))")
        shown = ", ".join(names[:6]) + (" ..." if len(names) > 6 else "") or "no files"
        raise ConfigError(KEY, value, f"a dataset with a train.* file{where} ({', '.join(SUFFIXES)}; "
                          f"shards train-00000-of-N too): it has {shown}")
    note = "" if found["test"] else "no test.* / validation.* file: validation reads the train files"
    return found["train"], found["test"] or found["train"], note


def under(path: str, mount: str) -> bool:
    return os.path.normpath(path).startswith(mount.rstrip("/") + "/")


def pin(value: str, mount: str, config: str = "", cwd: str = "", converted: bool = False) -> dict[str, str]:
    """spec.pins.source for data.source=value ({} when empty). The hub is asked for the commit and
    file list (unreachable: the revision as given, `unresolved` says why, verl's default names).
    converted (data.prepare is set): any files in any format, the conversion's output is what is read."""
    if not value:
        return {}
    if is_hub(value):
        prefix = next(p for p in PREFIXES if value.startswith(p))
        parsed = hub.parse(value[len(prefix):])
        if parsed is None or ":" in value[len(prefix):]:
            raise ConfigError(KEY, value, ALLOWED)
        _, repo, asked = parsed
        name = PREFIXES[prefix]
        revision, names, why = hub.info(name, repo, asked, "dataset")
        out = {"kind": "hub", "hub": name, "hf_id": repo, "asked": asked, "revision": revision,
               "unresolved": "" if hub.COMMIT.fullmatch(revision) else why,
               "dir": f"{mount}/data/{'modelscope/' if name == 'modelscope' else 'hub/'}"
                      f"{repo.replace('/', '--')}/{revision[:12]}"}
        return {**out, **_files(names, config, value, converted)}
    if value.startswith("/") and under(value, mount):
        here = Path(value)
        names = files_of(here) if here.is_dir() else []
        return {"kind": "shared", "dir": value.rstrip("/"), **_files(names, config, value, converted)}
    here = Path(cwd or os.getcwd(), os.path.expanduser(value))
    if not here.exists():
        raise ConfigError(KEY, value, f"{ALLOWED}: {here} does not exist on this machine and is not under "
                          f"storage.mount={mount}")
    if here.is_file() and not here.name.endswith(SUFFIXES) and not converted:
        raise ConfigError(KEY, value, f"a file verl reads ({', '.join(SUFFIXES)}, by suffix), or a directory")
    names = files_of(here)
    digest = content_hash(here)
    one = {"train": here.name, "test": here.name, "note": "one file: validation reads the train file"}
    files = _files(names, config, value, converted) if here.is_dir() else one
    return {"kind": "local", "local": str(here.resolve()), "sha256": digest,
            "dir": f"{mount}/data/local/{digest[:12]}", **files}


def _files(names: list[str], config: str, value: str, converted: bool = False) -> dict[str, str]:
    if converted:  # data.prepare reads the directory as it is; its output's files are found instead
        return {"train": "", "test": "", "note": "data.prepare's input, as it is"}
    if not names:
        return {**DEFAULT_FILES, "note": "its files are not listed here: verl reads train.parquet and test.parquet"}
    train, test, note = splits(names, config, value)
    return {"train": ",".join(train), "test": ",".join(test), "note": note}


def read_dir(source: dict[str, Any]) -> str:
    """The directory the framework reads: data.prepare's output when there is one, else the source's."""
    return str(source.get("prepared") or source["dir"])


def files(source: dict[str, Any], split: str) -> list[str]:
    """The absolute paths of a pinned source's train or test files, as every node sees them."""
    return [f"{read_dir(source)}/{name}" for name in str(source.get(split, "")).split(",") if name]


def shown(source: dict[str, Any]) -> str:
    """What the plan calls it: hf:<id>@<rev12>, the local path, or the shared directory."""
    if source.get("kind") == "hub":
        prefix = next(p for p, n in PREFIXES.items() if n == source["hub"])
        return f"{prefix}{source['hf_id']}@{str(source['revision'])[:12]}"
    return str(source.get("local") or source.get("dir"))


def warning(source: dict[str, Any]) -> str:
    """A hub revision not resolved to a commit: what could go wrong (as hub.warning for a model)."""
    if not source.get("unresolved"):
        return ""
    prefix = next(p for p, n in PREFIXES.items() if n == source["hub"])
    return (f"data {prefix}{source['hf_id']}@{source['revision']} is not resolved to a commit "
            f"({source['unresolved']}): '{source['revision']}' moves, so the inputs step downloads what it is "
            f"at launch; name a commit: DATA={prefix}{source['hf_id']}@<40-hex commit>")


# ---------------------------------------------------------------- carried in a launch's own bytes


def archive(source: dict[str, Any]) -> bytes:
    """A local dataset as a tar.gz whose bytes follow from its content (no times, owners or walk
    order), for a transport without a shared disk (KubeRay's ConfigMap). Its files sit at the top as
    in their directory (a single file: by its name), so the inputs step uploads the extracted
    directory under the same content hash. ConfigError when it changed since the plan."""
    here = Path(source["local"])
    digest = content_hash(here) if here.exists() else ""
    if digest != source["sha256"]:
        raise ConfigError(KEY, source["local"], f"the dataset the plan hashed (content {source['sha256'][:12]}); "
                          f"it {'changed since' if digest else 'is gone'}: plan again")
    base = here.parent if here.is_file() else here
    return code.tar_gz((rel, (base / rel).read_bytes(), 0o644) for rel in files_of(here))


def check_carried(spec: Any, limit: int, via: str, source: str = "") -> None:
    """DATA= of this machine fits the transport that carries it (Infra.code_limit bytes, 0: no limit),
    with CODE's pack when both go: one budget, one refusal naming both sizes."""
    pin = spec.pins.source
    if not limit or pin.get("kind") != "local":
        return
    code_size = 0 if code.by_fetch(spec) else code.packed_size(spec)  # a fetched CODE is not carried
    size = len(archive(pin))
    if size + code_size > limit:
        both = f" and CODE's pack {code_size // 1024} KiB" if code_size else ""
        raise ConfigError(KEY, spec.data.source, f"a dataset on this machine of at most {limit // 1024} KiB "
                          f"compressed{' with CODE' if code_size else ''} on INFRA={spec.infra.name}, which carries "
                          f"it in {via}: this one is {size // 1024} KiB{both}; put it on the shared storage and "
                          f"give its path (DATA={spec.storage.mount.rstrip('/')}/<dir>)", source)

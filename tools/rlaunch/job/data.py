"""Prepare a dataset (or a model) on shared storage at the revision pinned in configs/versions.yaml.

gsm8k and math become the parquet files verl reads (train.parquet, test.parquet) with verl's columns:
data_source, prompt (chat messages), ability, reward_model {style, ground_truth}, extra_info; boba is
the pinned JSONL file as is. Every output directory gets a SHA256SUMS manifest (sha256sum's format)
and a dataset.json saying what was loaded, so every node and every rerun can check it has the same
bytes. Loading goes through `datasets.load_dataset(..., revision=...)`, the same code online or on a
local copy (--source DIR: a directory of JSON/parquet files per split; the tests use one).

Each pin downloads from its hub (`hub:` in configs/versions.yaml, rlaunch.config.hub) with that hub's
own client: huggingface_hub for the Hugging Face Hub, `modelscope` (snapshot_download,
dataset_snapshot_download) for ModelScope, where a dataset to convert is loaded from its snapshot.

Usage:
    python -m rlaunch.job.data --dataset=gsm8k --out=DIR [--source=DIR_OR_HF_ID] [--revision=REV]
    python -m rlaunch.job.data --dataset=gsm8k --snapshot --out=DIR    (the HF repository as is)
    python -m rlaunch.job.data --model=qwen2.5-0.5b-instruct --out=DIR
    python -m rlaunch.job.data --hf-id=Qwen/Qwen3-8B --revision=COMMIT --out=DIR   (model.path=<org>/<name>)
    python -m rlaunch.job.data --modelscope-id=Qwen/Qwen2.5-0.5B-Instruct --revision=COMMIT --out=DIR
        (model.path=modelscope:<org>/<name>)
    python -m rlaunch.job.data --adopt=DIR --what=model [--require=FILE ...]
        (inputs a user put on the shared storage: their SHA256SUMS computed once, then checked)
    python -m rlaunch.job.data --dataset-id=ORG/NAME --revision=COMMIT [--hub=modelscope] --out=DIR
        (DATA=hf:ORG/NAME: the dataset repository as is)
    python -m rlaunch.job.data --upload=SRC --sha256=HASH --out=DIR
        (DATA=<a file or directory of the launching machine>: copied once, atomically, checked by HASH)
    python -m rlaunch.job.data --prepare='python3 prep.py --in {input} --out {output}' --input=DIR --code=DIR --out=DIR
        (data.prepare: the command run in CODE on the pinned source, its output made once with SHA256SUMS)
    python -m rlaunch.job.data --verify=DIR --what=model
        (every byte hashed against SHA256SUMS, then SHA256SUMS.stamp written; exit 1 on a mismatch)
    python -m rlaunch.job.data --check-stamp=DIR --what=model
        (SHA256SUMS.stamp against a listing of DIR: sizes and versions only, no file read; exit 1 when
        it does not match, saying how many bytes a full check reads)
    python -m rlaunch.job.data --check=DIR --what=model
        (--check-stamp, and on a mismatch --verify: what setup.sh runs, one process)

Every full verification (a fresh download's manifest, --adopt, --verify) leaves SHA256SUMS.stamp
beside SHA256SUMS: each listed file's size and the storage's own version of it. A later check that
finds the same sizes and versions trusts the earlier hashing, so the GPU nodes read no weight byte.

Env:
    HF_TOKEN         read by huggingface_hub for gated models/datasets (never printed)
    HF_ENDPOINT      another Hub (a mirror; the tests' tests/fakehub.py)
    MODELSCOPE_API_TOKEN  read by modelscope for private or gated repositories (never printed)
    MODELSCOPE_ENDPOINT   another ModelScope site (https://www.modelscope.ai; tests/fakemodelscope.py)
    RLAUNCH_VERSIONS versions file (default: configs/versions.yaml)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.config import datasource, hub, pins
from rlaunch.config import prepare as prep  # the placeholders' one definition
from rlaunch.config.inputs import CONVERTED, MANIFEST, STAMP
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.job.objects import RECORD

GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


# --- verl's rows -------------------------------------------------------------------------------

def gsm8k_answer(solution: str) -> str:
    """GSM8K's ground truth: the number after '####', without thousands separators."""
    m = re.search(r"####\s*(-?[0-9.,]+)", solution)
    if not m:
        raise ValueError(f"no '#### <number>' in GSM8K answer: {solution[-80:]!r}")
    return m.group(1).replace(",", "").rstrip(".")


def last_boxed(text: str) -> str:
    """The content of the last \\boxed{...} (or \\fbox{...}), braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        raise ValueError(f"no \\boxed{{}} in MATH solution: {text[-80:]!r}")
    i = text.index("{", start) + 1
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    if depth:
        raise ValueError(f"unbalanced \\boxed{{ in MATH solution: {text[start:start + 80]!r}")
    return text[i:j - 1]


def to_row(dataset: str, hf_id: str, split: str, index: int, example: dict[str, Any]) -> dict[str, Any]:
    if dataset == "gsm8k":
        question, ground = example["question"], gsm8k_answer(example["answer"])
        content = f"{question} {GSM8K_INSTRUCTION}"
        extra = {"split": split, "index": index, "answer": example["answer"], "question": question}
    else:
        question, ground = example["problem"], last_boxed(example["solution"])
        content = f"{question} {MATH_INSTRUCTION}"
        extra = {"split": split, "index": index}
    return {"data_source": hf_id, "prompt": [{"role": "user", "content": content}], "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": ground}, "extra_info": extra}


# --- manifests ---------------------------------------------------------------------------------

def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# Not inputs: the hub client's download records, and a git clone's own store (seed 002 clones the
# model with git lfs: its .git holds a second copy of every weight).
NOT_INPUTS = (".cache", ".git")


def input_files(directory: Path) -> list[Path]:
    """Every file below directory that is part of the input (sorted), SHA256SUMS and its stamp left out."""
    records = (MANIFEST, STAMP, STAMP_TMP, RECORD, f".{RECORD}.tmp")  # RECORD: written after, never an input
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in records
                  and not set(NOT_INPUTS) & set(p.relative_to(directory).parts))


def manifest_text(directory: Path) -> str:
    """SHA256SUMS of every input file below directory (sorted, sha256sum's format)."""
    return "".join(f"{sha256(p)}  {p.relative_to(directory).as_posix()}\n" for p in input_files(directory))


def write_manifest(directory: Path) -> Path:
    """Write directory's SHA256SUMS (`sha256sum -c` reads it), and its stamp when nothing changed
    while it was hashed."""
    before = listing(directory, [p.relative_to(directory).as_posix() for p in input_files(directory)])
    out = directory / MANIFEST
    out.write_text(manifest_text(directory), encoding="utf-8")
    write_stamp(directory, before)
    return out


def _manifest_lines(directory: Path) -> list[tuple[str, str]]:
    """(digest, name) of each SHA256SUMS line; name "" for a line sha256sum --strict refuses."""
    out = []
    for line in (directory / MANIFEST).read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        out.append((digest, name.lstrip("*")))
    return out


def verify_manifest(directory: Path) -> list[str]:
    """The files its SHA256SUMS lists that are missing or differ (sha256sum --check, in Python)."""
    bad = []
    for digest, name in _manifest_lines(directory):
        path = directory / name
        if not name or not path.is_file() or sha256(path) != digest:
            bad.append(name or f"{digest}  (no file name)")
    return bad


# --- stamps: a full verification's result, checked later by metadata alone ---------------------------

STAMP_TMP = STAMP + ".tmp"
STAMP_FORMAT = 1


def version(st: os.stat_result) -> str:
    """The storage's own version of a file, from its metadata. On a filesystem, and on a bucket's FUSE
    mount (gcsfuse, mountpoint-s3 and blobfuse report an object's mtime, which a new upload changes),
    the modification time in ns. A bucket listing gives a stronger one where a check lists the bucket
    instead of the mount: GCS objects.list's `generation` ("generation=<n>"), S3 ListObjectsV2's and
    Azure List Blobs' `ETag` ("etag=<value>"); the record keeps the version as an opaque string so
    either fits."""
    return f"mtime_ns={st.st_mtime_ns}"


def listing(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each named file's size and version, from stat alone (no byte read); a missing one is absent."""
    out = {}
    for name in names:
        try:
            st = (directory / name).stat()
        except OSError:
            continue
        out[name] = {"size": st.st_size, "version": version(st)}
    return out


def _stamp_record(directory: Path, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    manifest = (directory / MANIFEST).read_bytes()  # a few KB: its digest ties the stamp to it
    return {"format": STAMP_FORMAT, "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
            "bytes": sum(f["size"] for f in files.values()), "files": files}


def write_stamp(directory: Path, before: dict[str, dict[str, Any]]) -> bool:
    """Write SHA256SUMS.stamp from `before` (the listing taken before the files were hashed) when a
    listing now is the same: a file changed during the hashing leaves no stamp. False when none was
    written (a change, or storage this node may not write: then the next check hashes again)."""
    names = [name for _, name in _manifest_lines(directory)]
    if listing(directory, names) != before or sorted(before) != sorted(names):
        drop_stamp(directory)
        return False
    try:
        tmp = directory / STAMP_TMP
        tmp.write_text(json.dumps(_stamp_record(directory, before), indent=1, sort_keys=True) + "\n",
                       encoding="utf-8")
        os.replace(tmp, directory / STAMP)  # a reader sees the old stamp or the new one, never half of one
    except OSError:
        return False
    return True


def drop_stamp(directory: Path) -> None:
    """No stamp for what did not verify. Where this node may not write, the old stamp stays: it still
    does not match, so the next check hashes again."""
    try:
        (directory / STAMP).unlink(missing_ok=True)
    except OSError:
        pass


def check_stamp(directory: Path) -> tuple[str, int, int]:
    """Compare SHA256SUMS.stamp to a listing of directory: ("", files, bytes) when every file SHA256SUMS
    lists has the stamp's size and version, else (why, files, bytes a full check would read).
    Reads only SHA256SUMS and the stamp, never a listed file."""
    manifest, stamp = directory / MANIFEST, directory / STAMP
    if not manifest.is_file():
        return f"no {MANIFEST}", 0, 0
    names = [name for _, name in _manifest_lines(directory)]
    now = listing(directory, names)
    total = sum(f["size"] for f in now.values())
    try:
        record = json.loads(stamp.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {STAMP} (not verified since it was written)", len(names), total
    except (OSError, ValueError) as err:
        return f"{STAMP} unreadable ({err.__class__.__name__})", len(names), total
    if not isinstance(record, dict) or record.get("format") != STAMP_FORMAT:
        return f"{STAMP} of another format", len(names), total
    if record.get("manifest_sha256") != hashlib.sha256(manifest.read_bytes()).hexdigest():
        return f"{MANIFEST} changed since the stamp", len(names), total
    stamped = record.get("files") or {}
    changed = sorted(n for n in names if now.get(n) != stamped.get(n))
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        return f"{shown} changed since the stamp (size or version)", len(names), total
    return "", len(names), total


def _gb(nbytes: int) -> str:
    if nbytes >= 10**8:
        return f"{nbytes / 1e9:.2f} GB"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes} bytes"


def verify(directory: Path) -> tuple[list[str], int, bool]:
    """Every file SHA256SUMS lists hashed (the full check): (bad files, bytes read, stamp written)."""
    names = [name for _, name in _manifest_lines(directory)]
    before = listing(directory, names)
    bad = verify_manifest(directory)
    read = sum(f["size"] for f in before.values())
    if bad:
        drop_stamp(directory)
        return bad, read, False
    return [], read, write_stamp(directory, before)


def _has(names: list[str], pattern: str) -> bool:
    """FILE, or *.ext: at least one file with that suffix."""
    if pattern.startswith("*"):
        return any(n.endswith(pattern[1:]) for n in names)
    return pattern in names


def adopt(directory: Path, what: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A directory the user put on the shared storage: its SHA256SUMS is computed once (when it has
    none), after its required files are found; one that no longer matches its manifest is refused."""
    if not directory.is_dir():
        raise MissingPrerequisite(f"the {what} directory {directory}", "put the files there first (the "
                                  "config key that names it: model.path / data.path), or leave it empty "
                                  "for rlaunch's pinned download")
    manifest = directory / MANIFEST
    if manifest.is_file():
        bad, _, _ = verify(directory)
        if bad:
            raise MissingPrerequisite(
                f"the {what} in {directory} as its {MANIFEST} lists it",
                f"{', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''} missing or changed since the manifest "
                f"was computed; if you changed them on purpose, delete {manifest} and launch again")
        return {"what": what, "dir": str(directory), "manifest": "verified",
                "files": len(manifest.read_text(encoding="utf-8").splitlines())}
    names = [p.relative_to(directory).as_posix() for p in input_files(directory)]
    missing = [f for f in required if not _has(names, f)]
    if missing:
        raise MissingPrerequisite(f"{', '.join(missing)} in the {what} directory {directory}",
                                  f"it holds {len(names)} files; is it the right directory?")
    write_manifest(directory)
    return {"what": what, "dir": str(directory), "manifest": "computed",
            "files": len(manifest.read_text(encoding="utf-8").splitlines())}


# --- preparation -------------------------------------------------------------------------------

def dataset_pin(dataset: str) -> dict[str, Any]:
    table = pins.load_versions()["datasets"]
    if dataset not in table or not table[dataset].get("hf_id"):
        allowed = ", ".join(k for k, v in table.items() if v.get("hf_id"))
        raise ConfigError("DATASET", dataset, f"one of {allowed} (pinned in configs/versions.yaml)")
    return dict(table[dataset])


def prepare(dataset: str, out: Path, source: str = "", revision: str = "") -> dict[str, Any]:
    """Load the pinned dataset (or `source`), convert it for verl, write parquet + SHA256SUMS."""
    pin = dataset_pin(dataset)
    revision = revision or str(pin.get("revision", ""))
    out.mkdir(parents=True, exist_ok=True)
    if dataset not in CONVERTED:
        return _fetch_file(dataset, pin, out, revision)
    import datasets  # heavy; only preparation needs it

    where = source or pin["hf_id"]
    kwargs = {"revision": revision} if revision else {}
    if source and Path(source).is_dir():
        loaded = datasets.load_dataset(source, **kwargs)  # a local copy: its files, per split
    elif hub.of(pin) == "modelscope" and not source:
        # datasets reads the Hub only: the repository comes with ModelScope's client, then loads as a
        # local one (its README's configs name the splits' files), outside `out` and gone after.
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
            _modelscope_snapshot("dataset", pin["hf_id"], revision, Path(tmp))
            loaded = datasets.load_dataset(tmp, pin.get("config") or None)  # into datasets' cache
    else:
        loaded = datasets.load_dataset(where, pin.get("config") or None, **kwargs)
    counts = {}
    for split in ("train", "test"):
        if split not in loaded:
            raise ConfigError("DATASET", dataset, f"a dataset with a '{split}' split ({where} has "
                              f"{', '.join(loaded)})")
        rows = [to_row(dataset, pin["hf_id"], split, i, ex) for i, ex in enumerate(loaded[split])]
        datasets.Dataset.from_list(rows).to_parquet(str(out / f"{split}.parquet"))
        counts[split] = len(rows)
    info = {"dataset": dataset, "hf_id": pin["hf_id"], "config": pin.get("config", ""),
            "revision": revision, "source": where, "rows": counts, "schema": "verl"}
    (out / "dataset.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_manifest(out)
    return info


def _modelscope_snapshot(kind: str, repo: str, revision: str, out: Path, only: str = "") -> None:
    """ModelScope's own client (MODELSCOPE_ENDPOINT and MODELSCOPE_API_TOKEN are its)."""
    try:
        from modelscope.hub.snapshot_download import dataset_snapshot_download, snapshot_download
    except ImportError:
        version = pins.load_versions()["python"]["modelscope"]
        raise MissingPrerequisite(f"ModelScope's client in {sys.executable}", "the input is on ModelScope: "
                                  f"pip install modelscope=={version} (rlaunch's images have it)") from None

    get = dataset_snapshot_download if kind == "dataset" else snapshot_download
    get(repo, revision=revision or hub.HUBS["modelscope"]["moving"], local_dir=str(out),
        allow_patterns=[only] if only else None)


def _fetch_file(dataset: str, pin: dict[str, Any], out: Path, revision: str) -> dict[str, Any]:
    name = pin.get("file") or ""
    if not name:
        raise ConfigError("DATASET", dataset, "gsm8k or math (others need a `file:` pin to download)")
    if hub.of(pin) == "modelscope":
        _modelscope_snapshot("dataset", pin["hf_id"], revision, out, only=name)
    else:
        from huggingface_hub import hf_hub_download

        hf_hub_download(pin["hf_id"], name, repo_type="dataset", revision=revision or None, local_dir=str(out),
                        endpoint=_endpoint())
    info = {"dataset": dataset, "hf_id": pin["hf_id"], "file": name, "revision": revision}
    (out / "dataset.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_manifest(out)
    return info


def snapshot(dataset: str, out: Path, revision: str = "") -> dict[str, Any]:
    """The pinned dataset repository as is (AReaL loads GSM8K itself with load_dataset(dir, "main"))."""
    pin = dataset_pin(dataset)
    revision = revision or str(pin.get("revision", ""))
    if hub.of(pin) == "modelscope":
        _modelscope_snapshot("dataset", pin["hf_id"], revision, out)
    else:
        from huggingface_hub import snapshot_download

        snapshot_download(pin["hf_id"], repo_type="dataset", revision=revision or None, local_dir=str(out),
                          endpoint=_endpoint())
    write_manifest(out)
    return {"dataset": dataset, "hf_id": pin["hf_id"], "revision": revision, "snapshot": True}


def _endpoint() -> str | None:
    """HF_ENDPOINT as it is now: huggingface_hub reads it once, when first imported."""
    return os.environ.get("HF_ENDPOINT") or None


def fetch_hub_dataset(repo: str, revision: str, out: Path, name: str = hub.DEFAULT) -> dict[str, Any]:
    """DATA=hf:<repo>@<revision> (or modelscope:): the dataset repository as is, plus SHA256SUMS."""
    if name == "modelscope":
        _modelscope_snapshot("dataset", repo, revision, out)
    else:
        from huggingface_hub import snapshot_download

        snapshot_download(repo, repo_type="dataset", revision=revision or None, local_dir=str(out),
                          endpoint=_endpoint())
    write_manifest(out)
    return {"hf_id": repo, "revision": revision, "hub": name, "dataset": True}


def upload(src: Path, out: Path, digest: str) -> dict[str, Any]:
    """DATA=<a file or directory of this machine>: copied to out once. A directory there whose
    SHA256SUMS is the content named by digest is kept (nothing copied); otherwise a copy is made
    beside it, checked against digest, and renamed into place (a reader never sees half of it)."""
    manifest = out / MANIFEST
    if manifest.is_file() and hashlib.sha256(manifest.read_bytes()).hexdigest() == digest \
            and not verify_manifest(out):
        return {"dir": str(out), "copied": 0}
    if not src.exists():
        raise MissingPrerequisite(f"the dataset {src} to upload", "it was there at plan time; plan again")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    except OSError as err:
        raise MissingPrerequisite(f"a writable {out.parent}", f"the dataset is copied there ({err})") from None
    try:
        if src.is_file():
            shutil.copy2(src, tmp / src.name)
        else:
            shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*datasource.SKIPPED, MANIFEST))
        text = datasource.manifest(tmp)
        if hashlib.sha256(text.encode()).hexdigest() != digest:
            raise MissingPrerequisite(f"the dataset {src} as planned (content {digest[:12]})",
                                      "it changed since `make plan`: plan again")
        (tmp / MANIFEST).write_text(text, encoding="utf-8")
        if out.exists():  # a stale or half copy of another attempt: replaced whole
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"dir": str(out), "copied": len(text.splitlines())}


PREPARE_TIMEOUT_S = 6 * 3600  # on the nodes: a conversion of a large dataset, still bounded


def run_prepare(argv: list[str], src: Path, out: Path, cwd: Path, env: dict[str, str] | None = None,
                timeout: float = PREPARE_TIMEOUT_S) -> dict[str, Any]:
    """data.prepare (rlaunch.config.prepare): the command run in cwd (CODE) with {input}=src and {output} an
    empty directory beside out, which becomes out (with its SHA256SUMS) only when the command succeeded and
    wrote a train file the framework reads: a reader never sees half an output. MissingPrerequisite when it
    fails (its last lines), TimeoutError past `timeout`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        try:
            done = subprocess.run(prep.argv_for(argv, str(src), str(tmp)), cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"data.prepare ran past {timeout:g} s") from None
        except OSError as err:
            raise MissingPrerequisite(f"{argv[0]} to run ({err.strerror})", "a command on PATH in the framework's "
                                      "environment (python3 ...)") from None
        said = (done.stderr or done.stdout).strip().splitlines()[-3:]
        if done.returncode:
            raise MissingPrerequisite(f"exit {done.returncode} in {cwd}", " | ".join(said) or "no output")
        names = [p.relative_to(tmp).as_posix() for p in input_files(tmp)]
        try:
            datasource.splits(names, "", str(out))
        except ConfigError as err:
            raise MissingPrerequisite(f"an output the framework reads in {{output}}", err.allowed) from None
        write_manifest(tmp)
        if out.exists():  # a stale or half copy of another attempt: replaced whole
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"dir": str(out), "files": len(names), "prepared": True}


def fetch_model(model: str, out: Path) -> dict[str, Any]:
    """The pinned model revision, from its hub, into out, plus SHA256SUMS."""
    table = pins.load_versions()["models"]
    pin = table.get(model) or {}
    if not pin.get("hf_id"):
        raise ConfigError("MODEL", model, "one of " + ", ".join(k for k, v in table.items() if v.get("hf_id")))
    if hub.problem(hub.of(pin)):
        raise ConfigError(f"models.{model}.hub", hub.of(pin), str(hub.problem(hub.of(pin))))
    info = fetch_hub_model(pin["hf_id"], str(pin["revision"]), out, hub.of(pin))
    return {"model": model, **info}


def fetch_hub_model(hf_id: str, revision: str, out: Path, name: str = hub.DEFAULT) -> dict[str, Any]:
    """Any model on the hub `name` at `revision` into out, plus SHA256SUMS
    (model.path=[modelscope:]<org>/<name>)."""
    if name == "modelscope":
        _modelscope_snapshot("model", hf_id, revision, out)
    else:
        from huggingface_hub import snapshot_download

        snapshot_download(hf_id, revision=revision or None, local_dir=str(out), endpoint=_endpoint())
    write_manifest(out)
    return {"hf_id": hf_id, "revision": revision, "hub": name}


def _hub_of(args: argparse.Namespace) -> str:
    """The hub the download of these arguments goes to."""
    if args.modelscope_id:
        return "modelscope"
    if args.dataset_id:
        return str(args.hub)
    if args.hf_id:
        return hub.DEFAULT
    table = pins.load_versions()["datasets" if args.dataset else "models"]
    name = hub.of(table.get(args.dataset or args.model) or {})
    return name if name in hub.HUBS else hub.DEFAULT


def _check(what: str, directory: Path, full: bool) -> tuple[int, int]:
    """--verify / --check-stamp: one line saying what was found and what it cost, on stdout (the
    setup's log); (0 kept or 1 not, bytes read). A check by metadata says what the full one will read."""
    label = f"inputs: {what} {directory}"
    if not (directory / MANIFEST).is_file():
        print(f"{label}: no {MANIFEST} yet")
        return 1, 0
    if not full:
        why, files, total = check_stamp(directory)
        if why:
            print(f"{label}: {why}: a full check reads {_gb(total)} ({files} files)")
            return 1, 0
        print(f"{label} matches its {MANIFEST}: kept (metadata: {files} files, {_gb(total)} not read)")
        return 0, 0
    bad, read, stamped = verify(directory)
    if bad:
        print(f"{label}: {len(bad)} file(s) missing or changed since its {MANIFEST} "
              f"({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}); {_gb(read)} read")
        return 1, read
    note = "stamped" if stamped else f"no {STAMP} written (changed while read, or storage not writable)"
    print(f"{label} matches its {MANIFEST}: kept (verified: {_gb(read)} read; {note})")
    return 0, read


def _checks(args: argparse.Namespace) -> int:
    """--check (the stamp, else the full check), --verify or --check-stamp; with --phases, its seconds
    and bytes read appended there for the run's phases (rlaunch.job.phases, "inputs_gpu")."""
    started = time.monotonic()
    directory = Path(args.check or args.verify or args.check_stamp)
    rc, read = _check(args.what, directory, full=bool(args.verify))
    if rc and args.check:
        rc, read = _check(args.what, directory, full=True)
    if args.phases:
        record = {"phase": "inputs_gpu", "event": "check", "t": round(time.time(), 3),
                  "s": round(time.monotonic() - started, 3), "bytes": read, "what": args.what}
        path = Path(args.phases)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.job.data", __doc__.split("\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--dataset", help="gsm8k | math | boba (pinned in configs/versions.yaml)")
    what.add_argument("--model", help="a model key of configs/versions.yaml models:")
    what.add_argument("--hf-id", default="", help="any Hub model id (model.path=<org>/<name>), at --revision")
    what.add_argument("--modelscope-id", default="", help="any ModelScope model id "
                      "(model.path=modelscope:<org>/<name>), at --revision")
    what.add_argument("--dataset-id", default="", help="any hub dataset (DATA=hf:<org>/<name>), at --revision")
    what.add_argument("--upload", default="", help="a file or directory of the launching machine (DATA=<path>): "
                      "copied to --out once, checked by --sha256")
    what.add_argument("--prepare", default="", help="data.prepare: this command (its {input}/{output} "
                      "placeholders) run in --code on --input, its output made --out once")
    what.add_argument("--adopt", help="a directory already on the shared storage: compute its SHA256SUMS "
                      "once (or check the one it has)")
    what.add_argument("--verify", help=f"hash every file of this directory against its {MANIFEST}, then "
                      f"write {STAMP}; exit 1 on a mismatch")
    what.add_argument("--check-stamp", help=f"compare this directory's {STAMP} to a listing of it (no "
                      "file read); exit 1 when it does not match")
    what.add_argument("--check", help="--check-stamp, and on a mismatch --verify")
    parser.add_argument("--phases", default="", help="--check/--verify/--check-stamp: append its seconds and "
                        "bytes read to this phases.jsonl (a GPU node's check)")
    parser.add_argument("--out", default="", help="output directory (created)")
    parser.add_argument("--input", default="", help="--prepare: the pinned source's directory")
    parser.add_argument("--code", default="", help="--prepare: CODE's directory, where the command runs")
    parser.add_argument("--what", default="input", help="--adopt: what it holds (model, dataset), for messages")
    parser.add_argument("--require", action="append", default=[], help="--adopt: a file it must hold "
                        "(*.ext: at least one such file); repeatable")
    parser.add_argument("--source", default="", help="load from here instead of the pinned HF id "
                        "(a local directory of per-split JSON/parquet files, or another HF id)")
    parser.add_argument("--snapshot", action="store_true", help="download the dataset repository as is "
                        "(no conversion), e.g. for AReaL")
    parser.add_argument("--hub", default=hub.DEFAULT, choices=list(hub.HUBS), help="--dataset-id: its hub")
    parser.add_argument("--sha256", default="", help="--upload: its content hash (rlaunch.config.datasource)")
    parser.add_argument("--revision", default="", help="override the pinned revision (not for launches)")
    args = parser.parse_args(argv)
    if args.check or args.verify or args.check_stamp:
        return _checks(args)
    if args.adopt:
        try:
            info = adopt(Path(args.adopt), args.what, tuple(args.require))
        except MissingPrerequisite as err:
            print(f"data: {err}", file=sys.stderr)
            return err.exit_code
        print(f"data: {args.what} {args.adopt}: {MANIFEST} {info['manifest']} ({info['files']} files)")
        return 0
    if not args.out:
        print("data: --out is empty: make data DATASET=gsm8k OUT=<dir>", file=sys.stderr)
        return 2
    try:
        if args.dataset and args.snapshot:
            info = snapshot(args.dataset, Path(args.out), args.revision)
        elif args.dataset:
            info = prepare(args.dataset, Path(args.out), args.source, args.revision)
        elif args.dataset_id:
            info = fetch_hub_dataset(args.dataset_id, args.revision, Path(args.out), args.hub)
        elif args.prepare:
            info = run_prepare(shlex.split(args.prepare), Path(args.input), Path(args.out), Path(args.code or "."))
        elif args.upload:
            info = upload(Path(args.upload), Path(args.out), args.sha256)
        elif args.hf_id:
            info = fetch_hub_model(args.hf_id, args.revision, Path(args.out))
        elif args.modelscope_id:
            info = fetch_hub_model(args.modelscope_id, args.revision, Path(args.out), "modelscope")
        else:
            info = fetch_model(args.model, Path(args.out))
    except ConfigError as err:
        print(f"data: {err}", file=sys.stderr)
        return 2
    except MissingPrerequisite as err:
        print(f"data: {err}", file=sys.stderr)
        return err.exit_code
    except TimeoutError as err:
        print(f"data: {err}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as err:
        # No route to the Hub (offline machine, firewall) surfaces as OSError or as the HTTP
        # client's RuntimeError after its retries: say what could not be fetched and the way around.
        what = args.dataset or args.model or args.hf_id or args.modelscope_id or args.dataset_id
        site = hub.HUBS[_hub_of(args)]["shown"]
        print(f"data: could not fetch {what} at its pinned revision from {site} ({err.__class__.__name__}: "
              f"{str(err).splitlines()[0][:200] if str(err) else 'no detail'}); without access to "
              f"{site}, put a copy on the shared storage and name it: "
              f"{'data.path' if args.dataset else 'model.path'}=<dir> (its {MANIFEST} is computed once)",
              file=sys.stderr)
        return 3
    print(f"data: wrote {args.out} ({json.dumps(info, sort_keys=True)}) and {MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The user's own code (CODE=, spec `code.dir`): packed once, deterministically, named by its content.

CODE is a directory on this machine, or `<git url>@<40-hex commit>` (fetched at plan time into
build/code-cache/, or $RLAUNCH_CODE_CACHE). Its file list is git's when it is a git tree (`ls-files
--cached --others --exclude-standard`, less what is deleted), else a walk that applies each directory's .gitignore;
.git, __pycache__, *.pyc and .venv* stay out always. The manifest is one line a file,
`<sha256> <x|-> <path>`, sorted by path; the content hash is the sha256 of that text (not Ray's package
hash), and the pack lands on every node at paths.code_dir (`<storage.mount>/code/<hash>`; SkyPilot: each
node's `/rlaunch/code/<hash>`) with the manifest beside its files as MANIFEST. A change to the code is a
new hash, so a new directory: nothing is ever overwritten.

A dirty git tree (anything not at HEAD) is refused unless code.allow_dirty (CODE_DIRTY=1); then the
sha256 of `git status --porcelain` and `git diff HEAD` is recorded with the commit.

Standard library, plus pathspec for .gitignore rules outside git (imported only there). On the nodes,
preflight checks the staged directory against its manifest (rlaunch.verify.probes.probe_code).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlaunch import ROOT
from rlaunch.errors import ConfigError
from rlaunch.registry import backends

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from rlaunch.config.spec import Spec

MANIFEST = ".rlaunch-code-manifest"
CACHE = "code-cache"  # under rlaunch's build/: the commits fetched for CODE=<url>@<commit>
# Never part of a pack, whatever the ignore files say: git's own data, caches, virtual environments.
ALWAYS_OUT = ("/.git/ (git's data)", "__pycache__/", "*.pyc", ".venv*")
_OUT_PARTS = re.compile(r"^(\.git|__pycache__|\.venv.*)$")
GIT_SOURCE = re.compile(r"^(?P<url>.+)@(?P<commit>[0-9a-f]{40})$")
FIX_DIRTY = "commit your changes, or CODE_DIRTY=1 to run the tree as it is (the diff's hash is recorded)"


@dataclass(frozen=True)
class Entry:
    path: str        # relative, '/'-separated
    sha256: str
    executable: bool
    size: int


@dataclass(frozen=True)
class Pack:
    root: Path                     # the directory packed
    entries: tuple[Entry, ...]     # sorted by path
    commit: str                    # HEAD of its git tree ("" outside git)
    dirty: bool
    diff_sha256: str               # sha256 of `git diff HEAD` when dirty ("" otherwise)
    dropped: dict[str, str]        # path -> the ignore rule that left it out (files on disk, not packed)

    @property
    def manifest(self) -> str:
        return "".join(f"{e.sha256} {'x' if e.executable else '-'} {e.path}\n" for e in self.entries)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.manifest.encode()).hexdigest()

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def pin(self) -> dict[str, str | int | bool]:
        """What spec.json records (pins.code)."""
        return {"hash": self.hash, "commit": self.commit, "dirty": self.dirty, "diff_sha256": self.diff_sha256,
                "files": len(self.entries), "bytes": self.size}

    def tar_gz(self) -> bytes:
        """The pack as tar_gz() of its files, with MANIFEST in it: what a transport without a shared
        disk carries."""
        return tar_gz([(MANIFEST, self.manifest.encode(), 0o644),
                       *((e.path, (self.root / e.path).read_bytes(), 0o755 if e.executable else 0o644)
                         for e in self.entries)])


def tar_gz(members: Iterable[tuple[str, bytes, int]]) -> bytes:
    """A tar.gz of (name, bytes, mode) whose bytes follow from the content alone (no times, owners or
    order of a walk): the same files give the same archive, so a transport can be checked by it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def describe(pin: dict[str, str | int | bool], where: str) -> str:
    """`make plan`'s code line: the directory, the hash, files, size, commit, clean or dirty."""
    size = int(pin["bytes"])
    human = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"
    commit = str(pin["commit"])
    state = ("dirty, diff " + str(pin["diff_sha256"])[:12]) if pin["dirty"] else ("clean" if commit else "not git")
    files = f"{pin['files']} file{'' if pin['files'] == 1 else 's'}"
    return f"{where} -> hash {str(pin['hash'])[:12]}, {files}, {human}, commit {commit[:12] or '-'}, {state}"


# ---------------------------------------------------------------- where CODE is


def resolve(value: str, cache: Path, cwd: Path | None = None) -> Path:
    """code.dir as a directory here: `<url>@<commit>` fetched into `cache` (once per commit), a
    relative directory taken from `cwd` (the invoking directory)."""
    found = GIT_SOURCE.match(value)
    if found:  # RLAUNCH_CODE_CACHE: another cache (a machine without the repository's host, the tests)
        return checkout(found["url"], found["commit"], Path(os.environ.get("RLAUNCH_CODE_CACHE") or cache))
    path = Path(os.path.expanduser(value))
    path = (cwd or Path.cwd()) / path if not path.is_absolute() else path
    if not path.is_dir():
        raise ConfigError("code.dir", value, "a directory on this machine (absolute, or relative to where make "
                          "runs) or <git url>@<40-hex commit>")
    return path.resolve()


def _git(*args: str, cwd: Path, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=False, check=False,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, ["git", *args], proc.stdout, proc.stderr)
    return proc.stdout.decode("utf-8", "surrogateescape")


def checkout(url: str, commit: str, cache: Path) -> Path:
    """A worktree of `url` at `commit` under cache/<sha of url>/<commit>, made once: written beside
    and renamed into place, so an interrupted fetch leaves nothing that looks done. The plan's fetch
    and a node's (rlaunch.job.codefetch) are this one: a shallow fetch of that commit alone, no
    submodules (pack() leaves a submodule's directory out either way)."""
    dest = cache / hashlib.sha256(url.encode()).hexdigest()[:16] / commit
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=dest.parent))
    try:
        _git("init", "-q", cwd=tmp)
        _git("fetch", "-q", "--depth=1", url, commit, cwd=tmp)
        _git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=tmp)
        got = _git("rev-parse", "HEAD", cwd=tmp).strip()
        if got != commit:
            raise ConfigError("code.dir", f"{url}@{commit}", f"a commit the repository has (it gave {got})")
        tmp.rename(dest)
    except subprocess.CalledProcessError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        why = (err.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise ConfigError("code.dir", f"{url}@{commit}", "a git repository this machine can fetch with that "
                          f"full commit ({why[-1] if why else 'git failed'})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# ---------------------------------------------------------------- what is in it


def _kept(rel: str) -> bool:
    parts = rel.split("/")
    return not any(_OUT_PARTS.match(p) for p in parts) and not rel.endswith(".pyc")


def _git_top(root: Path) -> bool:
    """Inside a git work tree that tracks it: a directory its repository ignores (a checkout under
    another project's build/) is packed by a walk, as outside git."""
    try:
        inside = _git("rev-parse", "--is-inside-work-tree", cwd=root, check=True).strip() == "true"
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    ignored = subprocess.run(["git", "check-ignore", "-q", "."], cwd=root, capture_output=True, check=False)
    return inside and ignored.returncode != 0


def _git_files(root: Path) -> list[str]:
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=root).split("\0")
    deleted = set(_git("ls-files", "-z", "--deleted", cwd=root).split("\0"))
    return [p for p in listed if p and p not in deleted]


def _walk_files(root: Path) -> tuple[list[str], dict[str, str]]:
    """Outside git: every file, less what a .gitignore of its directory or above drops (path -> rule)."""
    from pathspec import GitIgnoreSpec  # only here: a git tree asks git, the nodes never walk

    kept: list[str] = []
    dropped: dict[str, str] = {}
    rules: list[tuple[str, list[str], GitIgnoreSpec]] = []  # (dir prefix, lines, spec)
    for top, dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root).replace(os.sep, "/")
        prefix = "" if rel_top == "." else rel_top + "/"
        ignore = Path(top) / ".gitignore"
        if ignore.is_file():
            lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
            rules.append((prefix, lines, GitIgnoreSpec.from_lines(lines)))
        dirs[:] = sorted(d for d in dirs if _kept(prefix + d))
        for name in names:
            rel = prefix + name
            if not _kept(rel):
                continue
            rule = _ignored_by(rel, rules)
            if rule:
                dropped[rel] = rule
            else:
                kept.append(rel)
    return kept, dropped


def _ignored_by(rel: str, rules: list[tuple[str, list[str], GitIgnoreSpec]]) -> str:
    """The last .gitignore rule that decides `rel` when it ignores it ("" when the file is kept)."""
    verdict = ""
    for prefix, lines, spec in rules:
        if not rel.startswith(prefix):
            continue
        sub = rel[len(prefix):]
        result = spec.check_file(sub)
        parents = [sub.rsplit("/", n)[0] + "/" for n in range(1, sub.count("/") + 1)]
        for parent in parents:  # a dropped directory drops what is in it
            hit = spec.check_file(parent)
            if hit.include:
                result = hit
        if result.include is not None:
            verdict = f"{prefix}.gitignore: {_rule_text(lines, result.index)}" if result.include else ""
    return verdict


def _rule_text(lines: list[str], index: int | None) -> str:
    return lines[index].strip() if index is not None and 0 <= index < len(lines) else "?"


def ignore_rule(root: Path, rel: str) -> str:
    """Why a file on disk is not in the pack: the ignore rule (file: pattern), or '' if none drops it."""
    if not _kept(rel):
        return "always left out: " + ", ".join(ALWAYS_OUT)
    if _git_top(root):
        proc = subprocess.run(["git", "check-ignore", "-v", "--no-index", "--", rel], cwd=root,
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            source, _, _ = proc.stdout.strip().partition("\t")
            where, _, pattern = source.rpartition(":")
            return f"{where.rsplit(':', 1)[0]}: {pattern}"
        return ""
    return _walk_files(root)[1].get(rel, "")


def _entry(root: Path, rel: str) -> Entry | None:
    path = root / rel
    if not path.is_file():  # a submodule's directory, a dangling link
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    st = path.stat()
    return Entry(rel, digest.hexdigest(), bool(st.st_mode & 0o100), st.st_size)


def pack(root: Path, value: str = "", allow_dirty: bool = False, source: str = "") -> Pack:
    """The pack of `root` (code.dir's directory); a dirty git tree without allow_dirty is refused,
    naming CODE (`value`, as given) and the fix."""
    commit, dirty, diff = "", False, ""
    dropped: dict[str, str] = {}
    if _git_top(root):
        files = _git_files(root)
        commit = _git("rev-parse", "HEAD", cwd=root, check=False).strip()
        status = _git("status", "--porcelain", "--untracked-files=all", "--", ".", cwd=root)
        dirty = bool(status.strip())
        if dirty:
            if not allow_dirty:
                changed = status.strip().splitlines()
                raise ConfigError("code.dir", value or str(root), f"a clean git tree: {len(changed)} change(s) "
                                  f"not committed (first: {changed[0].strip()}); {FIX_DIRTY}", source)
            # The untracked files are in the pack but not in the diff: the status names them.
            diff_text = status + _git("diff", "HEAD", "--binary", "--", ".", cwd=root, check=False)
            diff = hashlib.sha256(diff_text.encode("utf-8", "surrogateescape")).hexdigest()
    else:
        files, dropped = _walk_files(root)
    entries = [e for e in (_entry(root, rel) for rel in sorted(set(f for f in files if _kept(f)))) if e]
    return Pack(root, tuple(entries), commit, dirty, diff, dropped)


# ---------------------------------------------------------------- on the nodes


def of(spec: Spec) -> Pack | None:
    """The pack the plan pinned, packed again (a launch, a transport that carries its bytes): the same
    hash, or a ConfigError saying CODE changed since the plan. None without CODE."""
    if not spec.paths.code_dir:
        return None
    value = spec.code.dir
    packed = pack(resolve(value, ROOT / "build" / CACHE), value, spec.code.allow_dirty)
    want = str(spec.pins.code["hash"])
    if packed.hash != want:
        raise ConfigError("code.dir", value, f"the code the plan packed (hash {want[:12]}); it changed since "
                          f"(now {packed.hash[:12]}): plan again")
    return packed


def here(spec: Spec) -> Path | None:
    """CODE's directory on this machine, where the plan's checks read it (None without CODE)."""
    return resolve(spec.code.dir, ROOT / "build" / CACHE) if spec.code.dir else None


def loader_fields(spec: Spec) -> dict[str, str]:
    """What a framework's loader needs to read CODE's files: its directory here, and the pack's hash,
    so that a kept answer is for this content (validate.loaders caches by request)."""
    return {"code_root": str(here(spec) or ""), "code_hash": str(spec.pins.code.get("hash", ""))}


def require(spec: Spec, rels: list[str], key: str, value: str) -> str:
    """The first of `rels` (paths relative to CODE) that the pack holds; else a ConfigError for `key`
    naming the file and CODE, or the ignore rule that dropped it."""
    packed = of(spec)
    if packed is None:
        raise ConfigError(key, value, "a path in CODE: set CODE= to the directory that holds it")
    held = {e.path for e in packed.entries}
    found = next((rel for rel in rels if rel in held), None)
    if found is not None:
        return found
    on_disk = next((rel for rel in rels if (packed.root / rel).is_file()), None)
    if on_disk is not None:
        rule = ignore_rule(packed.root, on_disk) or "not in git's file list"
        raise ConfigError(key, value, f"a file CODE packs: {on_disk} is in {spec.code.dir} but left out by "
                          f"{rule}; change that rule, or force-add the file (git add -f)")
    raise ConfigError(key, value, f"a file in CODE: {' or '.join(rels)} is not in {spec.code.dir}")


def node_path(spec: Spec, key: str, value: str) -> str:
    """A file the framework opens on every node (verl's reward file, its data.custom_cls), as every
    node finds it: relative to CODE -> <paths.code_dir>/<rel> (checked in the pack); a path in CODE's
    directory here -> its place in code_dir; any other path as check_paths allows it."""
    if "${" in value or value in ("", "null", "None"):
        return value  # an interpolation, or no file: the framework's own
    if value.startswith("/"):
        packed = of(spec) if not value.startswith(spec.storage.mount + "/") else None
        if packed is not None and Path(value).is_relative_to(packed.root):
            rel = Path(value).relative_to(packed.root).as_posix()
            return f"{spec.paths.code_dir}/{require(spec, [rel], key, value)}"
    if value.startswith(("/", "~")):
        check_paths(spec, key, value)
        return value
    return _in_code(spec, key, value)


def fix(spec: Spec, key: str) -> str:
    """How to name a file every node finds, for the key a refusal names: an override or CMD's
    key=value (`framework.overrides[k]`, `code.command[k]`), or a key of the YAML CMD names
    (`code.command[<yaml>: k]`)."""
    inner = re.sub(r"^[\w.]+\[(.*)\]$", r"\1", key)
    yaml_file, _, name = inner.rpartition(": ")
    setting = f"{name}: <path in it> in {yaml_file}" if yaml_file else f"{name}=<path in it>"
    return (f"put the file in CODE and give its path relative to CODE (CODE=<its directory>, {setting}), "
            f"or on the shared storage under {spec.storage.mount}")


def check_paths(spec: Spec, key: str, value: str) -> None:
    """An argument of the user's (an override, CMD's key=value) that is a path of this machine: `~...`
    refused (nothing expands it there); an absolute one outside storage.mount refused, but on
    INFRA=local, whose nodes share this disk."""
    mount, path = spec.storage.mount, value.strip("'\"")
    if path.startswith("~"):
        raise ConfigError(key, value, f"a path every node finds: the framework does not expand ~, and no other "
                          f"node has this machine's home; {fix(spec, key)}")
    if path.startswith("/") and not path.startswith(mount + "/") and path != mount and spec.infra.name != "local":
        raise ConfigError(key, value, f"a path every node finds: {path} is on this machine, outside "
                          f"storage.mount and outside CODE; {fix(spec, key)}")


def _in_code(spec: Spec, key: str, value: str) -> str:
    how = fix(spec, key)
    rel = os.path.normpath(value)
    if rel.startswith(".."):
        raise ConfigError(key, value, f"a path inside CODE (no '..'); {how}")
    if not spec.paths.code_dir:
        raise ConfigError(key, value, f"an absolute path, or a path relative to CODE= (not set): the framework's "
                          f"workers resolve a relative one from their own directory; {how}")
    return f"{spec.paths.code_dir}/{require(spec, [rel], key, value)}"


_SIZES: dict[str, int] = {}  # content hash -> its tar.gz's bytes


def packed_size(spec: Spec) -> int:
    """The pack's tar.gz in bytes (0 without CODE). Kept per content hash: the archive follows from
    the hash alone, and the plan, the render and the launch each ask."""
    packed = of(spec) if spec.paths.code_dir and spec.pins.code["hash"] not in _SIZES else None
    if packed is not None:
        _SIZES[packed.hash] = len(packed.tar_gz())
    return _SIZES.get(str(spec.pins.code.get("hash", "")), 0) if spec.paths.code_dir else 0


def by_fetch(spec: Spec) -> bool:
    """CODE travels by its repository, not as a pack: a `<url>@<commit>` CODE over its infrastructure's
    code_limit, where that infrastructure fetches on the cluster (Infra.code_fetch; KubeRay's inputs
    Job: fetch_lines)."""
    where = backends.infra(spec.infra.name)
    return bool(where.code_fetch and where.code_limit and GIT_SOURCE.match(spec.code.dir)
                and packed_size(spec) > where.code_limit)


def check_limit(spec: Spec, limit: int, via: str, source: str = "") -> None:
    """CODE fits its transport: the pack's tar.gz at most `limit` bytes (0: no limit), unless the
    infrastructure fetches a git CODE itself (by_fetch)."""
    if not limit or not spec.paths.code_dir:
        return
    if by_fetch(spec):
        url = str(GIT_SOURCE.match(spec.code.dir)["url"])  # type: ignore[index]  # by_fetch: it matches
        if url.startswith(("file:", "/", ".", "~")) or os.path.isdir(url):
            raise ConfigError("code.dir", spec.code.dir, f"a repository the cluster can fetch (https://, ssh://, "
                              f"git@<host>:...): this CODE is over the {limit // 1024} KiB {via} carries on "
                              f"INFRA={spec.infra.name}, so the cluster fetches it, and {url} is on this machine; "
                              "push it and give that repository's URL", source)
        return
    size = packed_size(spec)
    if size > limit:
        packed = of(spec)
        assert packed is not None
        push = ("push it where the cluster can fetch it and give CODE=<its url>@<40-hex commit> (any size), or "
                if backends.infra(spec.infra.name).code_fetch and not GIT_SOURCE.match(spec.code.dir) else "")
        raise ConfigError("code.dir", spec.code.dir, f"a pack of at most {limit // 1024} KiB compressed on "
                          f"INFRA={spec.infra.name}, which carries it in {via}: this one is {size // 1024} KiB "
                          f"({len(packed.entries)} files, {packed.size // 1024} KiB); {push}leave large files "
                          "out (.gitignore) or put them on the shared storage", source)


def fetch_lines(spec: Spec, cache: str) -> list[str]:
    """Shell lines (KubeRay's inputs Job) that put a by_fetch CODE at paths.code_dir: the commit fetched
    from its repository into `cache` (the pod's own disk), packed as the plan packed it, its content hash
    compared with the plan's (a mismatch fails naming both), staged as stage() does. A directory of that
    hash already there is kept. A public repository: the Job carries no git credentials."""
    found = GIT_SOURCE.match(spec.code.dir)
    assert found is not None
    args = [f"--url={found['url']}", f"--commit={found['commit']}", f"--hash={spec.pins.code['hash']}",
            f"--dest={spec.paths.code_dir}", f"--cache={cache}"]
    return ["# CODE=<url>@<commit> over the ConfigMap's limit (rlaunch.config.code.by_fetch): fetched here, that",
            "# commit alone, packed as the plan packed it and checked against the plan's content hash.",
            '"${RLAUNCH_PYTHON:-python3}" -m rlaunch.job.codefetch ' + " ".join(shlex.quote(a) for a in args)]


def outbox(spec: Spec) -> str:
    """Where launch stages the pack on this machine for a transport that uploads a directory (SkyPilot's
    file mount): beside the run's artifacts, named by the hash."""
    return f"{spec.run.out}/code/{spec.pins.code['hash']}"


def unpack_lines(spec: Spec, archive: str) -> list[str]:
    """Shell lines (for a setup script on a node that sees the shared storage) that put the pack's
    tar.gz `archive` at paths.code_dir as stage() does: extracted beside it, then renamed; a directory
    of that hash already there is kept."""
    dest = shlex.quote(spec.paths.code_dir)
    parent = shlex.quote(os.path.dirname(spec.paths.code_dir))
    return [
        "# CODE's pack (rlaunch.config.code): extracted beside its directory, then renamed into place;",
        "# a directory of that hash (its name) is the same code, kept as it is.",
        f"if [[ ! -d {dest} ]]; then",
        f"  mkdir -p {parent}",
        f'  code_tmp="$(mktemp -d {parent}/.code-XXXXXX)"',
        f'  tar -xzf {shlex.quote(archive)} -C "$code_tmp"',
        f'  chmod 755 "$code_tmp"',
        f'  mv -T "$code_tmp" {dest} 2>/dev/null || {{ rm -rf "$code_tmp"; [[ -d {dest} ]]; }}',
        "fi",
    ]


def stage(code: Pack, dest: Path | str) -> bool:
    """Copy the pack to `dest` (`<mount>/code/<hash>`) atomically: written to a temporary directory
    beside it, then renamed. An existing `dest` holds the same hash by its name and is kept as it is.
    True when it copied."""
    dest = Path(dest)
    if dest.is_dir():
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name[:12]}-", dir=dest.parent))
    try:
        for entry in code.entries:
            target = tmp / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(code.root / entry.path, target)
            target.chmod(0o755 if entry.executable else 0o644)
        (tmp / MANIFEST).write_text(code.manifest, encoding="utf-8")
        tmp.chmod(0o755)
        try:
            tmp.rename(dest)
        except OSError:
            if not dest.is_dir():  # another launch staged the same hash first: theirs is the same
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            return False
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True

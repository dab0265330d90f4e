"""CODE= (issue 47): the user's code packed deterministically, named by its content, pinned in the
spec, refused when dirty without the opt-in, staged once per hash and checked on the nodes."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from rlaunch.config import code
from rlaunch.config import load as config
from rlaunch.errors import ConfigError

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def tree(root: Path) -> Path:
    """A user's project: a package, a script, what ignore rules and caches leave out."""
    files = {
        "pkg/__init__.py": "", "pkg/reward.py": "def score(x):\n    return 1.0\n", "run.sh": "#!/bin/sh\n",
        ".gitignore": "*.log\nout/\n", "train.log": "noise", "out/model.bin": "big",
        "pkg/__pycache__/reward.cpython-311.pyc": "x", "pkg/old.pyc": "x", ".venv-x/lib.py": "x",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "run.sh").chmod(0o755)
    return root


def repo(root: Path) -> Path:
    tree(root)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    return root


def load(**knobs):
    return config.load("rehearsal", {"RUN_ID": "t", **knobs})


KEPT = [".gitignore", "pkg/__init__.py", "pkg/reward.py", "run.sh"]


def test_a_walk_packs_what_the_ignore_rules_keep_and_names_the_rule(tmp_path):
    packed = code.pack(tree(tmp_path))
    assert [e.path for e in packed.entries] == KEPT
    assert [e.executable for e in packed.entries] == [False, False, False, True]
    assert packed.dropped == {"train.log": ".gitignore: *.log", "out/model.bin": ".gitignore: out/"}
    assert packed.commit == "" and not packed.dirty
    assert code.ignore_rule(tmp_path, "out/model.bin") == ".gitignore: out/"
    assert code.ignore_rule(tmp_path, "pkg/reward.py") == ""


def test_the_hash_is_the_manifests_and_follows_content_alone(tmp_path):
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    os.utime(b / "pkg" / "reward.py", (1, 1))  # times never count
    first = code.pack(a)
    assert first.hash == code.pack(b).hash == hashlib.sha256(first.manifest.encode()).hexdigest()
    assert first.manifest.splitlines()[-1].endswith(" x run.sh")
    assert first.tar_gz() == code.pack(b).tar_gz()  # byte for byte: the transports carry it
    (b / "pkg" / "reward.py").write_text("def score(x):\n    return 0.0\n")
    assert code.pack(b).hash != first.hash
    (a / "run.sh").chmod(0o644)  # the x bit counts
    assert code.pack(a).hash != first.hash


def test_a_git_tree_packs_gits_list_with_its_commit(tmp_path):
    root = repo(tmp_path)
    packed = code.pack(root)
    assert [e.path for e in packed.entries] == KEPT
    assert packed.commit == git(root, "rev-parse", "HEAD") and not packed.dirty
    assert packed.hash == code.pack(tree(tmp_path.parent / f"{tmp_path.name}-walk")).hash
    assert code.ignore_rule(root, "train.log") == ".gitignore: *.log"


def test_a_dirty_tree_is_refused_naming_code_and_the_fix_unless_allowed(tmp_path):
    root = repo(tmp_path / "user")
    (root / "pkg" / "reward.py").write_text("def score(x):\n    return 2.0\n")
    with pytest.raises(ConfigError) as err:
        load(CODE=str(root))
    assert err.value.key == "code.dir" and err.value.source == "CODE"
    assert "CODE_DIRTY=1" in str(err.value) and "pkg/reward.py" in str(err.value)
    spec = load(CODE=str(root), CODE_DIRTY="1")
    assert spec.pins.code["dirty"] is True and len(str(spec.pins.code["diff_sha256"])) == 64
    (root / "pkg" / "reward.py").unlink()  # deleted, not committed: out of the pack
    assert "pkg/reward.py" not in [e.path for e in code.pack(root, allow_dirty=True).entries]


def test_the_spec_pins_code_at_the_same_path_on_every_node(tmp_path, monkeypatch):
    root = repo(tmp_path / "user")
    monkeypatch.chdir(tmp_path)
    spec = load(CODE="user")  # relative to where make runs
    packed = code.pack(root)
    assert spec.code.dir == str(root)
    assert spec.paths.code_dir == f"{spec.storage.mount}/code/{packed.hash}"
    assert spec.pins.code == {"hash": packed.hash, "commit": packed.commit, "dirty": False, "diff_sha256": "",
                              "files": 4, "bytes": packed.size}
    assert load().paths.code_dir == "" and load().pins.code == {}
    with pytest.raises(ConfigError, match="code.dir='nowhere'.*a directory on this machine"):
        load(CODE="nowhere")


def test_a_git_url_at_a_commit_is_fetched_once(tmp_path):
    root = repo(tmp_path / "upstream")
    commit = git(root, "rev-parse", "HEAD")
    cache = tmp_path / "cache"
    first = code.resolve(f"file://{root}@{commit}", cache)
    assert code.pack(first).hash == code.pack(root).hash and code.pack(first).commit == commit
    assert code.resolve(f"file://{root}@{commit}", cache) == first
    with pytest.raises(ConfigError, match="a git repository this machine can fetch"):
        code.resolve(f"file://{root}@{'0' * 40}", cache)
    assert sorted(p.name for p in first.parent.iterdir()) == [commit]  # a failed fetch leaves nothing


def test_staging_is_atomic_idempotent_and_the_nodes_check_the_manifest(tmp_path):
    packed = code.pack(tree(tmp_path / "user"))
    dest = tmp_path / "mount" / "code" / packed.hash
    assert code.stage(packed, dest) is True
    assert code.stage(packed, dest) is False  # the same hash: kept, nothing copied
    assert code.verify(dest) == packed.hash
    assert os.access(dest / "run.sh", os.X_OK)
    assert [p.name for p in dest.parent.iterdir()] == [packed.hash]
    (dest / "pkg" / "reward.py").write_text("tampered")
    with pytest.raises(ValueError, match="pkg/reward.py: differs from its manifest"):
        code.verify(dest)


def test_the_plan_line_says_hash_files_size_commit_and_state():
    line = code.describe({"hash": "a" * 64, "commit": "b" * 40, "dirty": False, "diff_sha256": "",
                          "files": 3, "bytes": 2048}, "/src")
    assert line == f"/src -> hash {'a' * 12}, 3 files, 2.0 KiB, commit {'b' * 12}, clean"

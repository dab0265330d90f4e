"""rlaunch.validate.upstream: a framework's pinned files that its packages lack, from the cache, a
local clone holding the commit or a copy, or (make upstream) the download, and only with the pinned
SHA256. A throwaway git repository stands in for the framework's; the versions file pins it."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rlaunch.errors import MissingPrerequisite
from rlaunch.validate import upstream

ROOT = Path(__file__).resolve().parents[2]
PATH = "tests/e2e_tests/reasoning/e2e.yaml"
TEXT = b"cluster:\n  num_nodes: 1\n"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def pinned(tmp_path, monkeypatch):
    """A clone holding the pinned commit (the file changed after it), and the pins naming it."""
    repo = tmp_path / "clone"
    (repo / PATH).parent.mkdir(parents=True)
    (repo / PATH).write_bytes(TEXT)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "pinned")
    commit = _git(repo, "rev-parse", "HEAD")
    (repo / PATH).write_bytes(b"changed later\n")
    _git(repo, "commit", "-qam", "later")
    versions = yaml.safe_load((ROOT / "configs/versions.yaml").read_text())
    versions["frameworks"]["rlinf"].update(commit=commit, files=[
        {"path": PATH, "sha256": hashlib.sha256(TEXT).hexdigest()}])
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    monkeypatch.setenv("RLAUNCH_UPSTREAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("RLAUNCH_UPSTREAM_DIR", raising=False)
    [f] = upstream.pinned("rlinf")
    return {"repo": repo, "commit": commit, "file": f, "cache": tmp_path / "cache"}


def test_missing_says_how_to_get_it(pinned):
    with pytest.raises(MissingPrerequisite) as err:
        upstream.read(pinned["file"])
    assert err.value.exit_code == 3
    assert "run `make upstream`" in str(err.value) and "RLAUNCH_UPSTREAM_DIR" in str(err.value)
    assert f"raw.githubusercontent.com/RLinf/RLinf/{pinned['commit']}/{PATH}" in str(err.value)


def test_a_clone_holding_the_commit_is_read_at_the_commit_not_its_work_tree(pinned, monkeypatch, tmp_path):
    monkeypatch.setenv("RLAUNCH_UPSTREAM_DIR", f"{tmp_path / 'nothing-here'}:{pinned['repo']}")
    data, where = upstream.read(pinned["file"])
    assert data == TEXT and f"in {pinned['repo']}" in where
    dest = upstream.tree("rlinf", tmp_path / "tree")
    assert (dest / PATH).read_bytes() == TEXT
    assert "git show" in upstream.fetch_one(pinned["file"])
    monkeypatch.delenv("RLAUNCH_UPSTREAM_DIR")
    assert upstream.read(pinned["file"])[1] == str(pinned["cache"] / pinned["file"].folder / PATH)
    assert "already in" in upstream.fetch_one(pinned["file"])


def test_other_bytes_are_refused_wherever_they_come_from(pinned, monkeypatch, tmp_path):
    copy = tmp_path / "copies" / PATH
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"not the pinned bytes\n")
    monkeypatch.setenv("RLAUNCH_UPSTREAM_DIR", str(tmp_path / "copies"))
    with pytest.raises(upstream.HashMismatch, match="is not the pinned rlinf"):
        upstream.fetch_one(pinned["file"])
    assert not (pinned["cache"] / pinned["file"].folder / PATH).exists()  # nothing written
    cached = pinned["cache"] / pinned["file"].folder / PATH
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"corrupt\n")
    with pytest.raises(MissingPrerequisite, match="sha256"):
        upstream.read(pinned["file"])


def test_make_upstream_downloads_the_file_at_the_commit(pinned, monkeypatch, tmp_path):
    served = tmp_path / "raw" / "RLinf/RLinf" / pinned["commit"] / PATH
    served.parent.mkdir(parents=True)
    served.write_bytes(TEXT)
    monkeypatch.setattr(upstream, "RAW", f"file://{tmp_path}/raw/{{owner_repo}}/{{commit}}/{{path}}")
    assert upstream.main(["fetch", "rlinf"]) == 0
    assert upstream.main(["where", "rlinf"]) == 0
    assert upstream.read(pinned["file"])[0] == TEXT
    served.write_bytes(b"moved on\n")
    (pinned["cache"] / pinned["file"].folder / PATH).unlink()
    assert upstream.main(["fetch", "rlinf"]) == 1  # a hash mismatch: exit 1, nothing cached
    assert upstream.main(["where", "rlinf"]) == 3


def test_the_real_pins_name_the_e2e_config_of_seed_003():
    files = {f.path: f for f in upstream.pinned("rlinf")}
    assert set(files) == {"tests/e2e_tests/reasoning/qwen2.5-1.5b-grpo-pipeline-fsdp-sgl.yaml",
                          "examples/reasoning/config/hybrid_engines/fsdp.yaml"}
    assert all(len(f.sha256) == 64 and f.commit == files[next(iter(files))].commit for f in files.values())

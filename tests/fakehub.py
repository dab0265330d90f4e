"""A Hugging Face Hub stand-in for tests: the few HTTP endpoints that huggingface_hub's
snapshot_download / hf_hub_download and datasets' load_dataset call, serving repositories from a
local folder, so rlaunch's real download code runs offline (HF_ENDPOINT=http://127.0.0.1:PORT).

    root/models/<org>/<name>/<commit>/...     a model repository at one commit (40 hex)
    root/datasets/<org>/<name>/<commit>/...   a dataset repository

Endpoints (as huggingface_hub 1.x and datasets 5.x call them): repository info by revision
(/api/{models,datasets}/<repo>[/revision/<rev>]), the file tree (/api/.../tree/<rev>[/<path>]),
paths-info (POST /api/.../paths-info/<rev>), and files (HEAD/GET [/datasets]/<repo>/resolve/<rev>/<path>,
with the X-Repo-Commit and ETag headers the client keys its cache on). A revision is the commit or
`main` (the newest commit folder). Anything else is 404, as the Hub answers an unknown repository.

Every request is recorded in `requests` (method, path), so a test can assert a second preparation
fetched nothing. Standard library only (gsm8k_repo, which writes parquet, loads pyarrow when called).

    with FakeHub(root) as hub:           # hub.url: http://127.0.0.1:<port>
        os.environ["HF_ENDPOINT"] = hub.url  # a subprocess's env; in this process: use_in_process
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from fakeserver import FakeServer


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_blob_sha(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def gsm8k_repo(root: Path, hf_id: str, revision: str) -> None:
    """A GSM8K dataset repository under `root` at `revision`, three rows in the Hub's layout
    (README configs, main/{train,test}-*.parquet): what rlaunch's --dataset=gsm8k downloads."""
    import pyarrow as pa  # the only test helper here that writes parquet: loaded when called
    import pyarrow.parquet as pq

    d = root / "datasets" / hf_id / revision
    (d / "main").mkdir(parents=True)
    (d / "README.md").write_text("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n"
                                 "    path: main/train-*\n  - split: test\n    path: main/test-*\n---\n")
    pq.write_table(pa.table({"question": ["1+1?", "2+3?"], "answer": ["so\n#### 2", "#### 5"]}),
                   d / "main" / "train-00000-of-00001.parquet")
    pq.write_table(pa.table({"question": ["4+4?"], "answer": ["#### 8"]}), d / "main" / "test-00000-of-00001.parquet")


class FakeHub(FakeServer):
    def file_gets(self) -> list[str]:
        """The files downloaded so far (GET .../resolve/...)."""
        return [p for m, p in self.requests if m == "GET" and "/resolve/" in p]

    # ------------------------------------------------------------ repositories

    def _repo(self, kind: str, repo: str, rev: str) -> tuple[Path, str] | None:
        base = self.root / kind / repo
        if not base.is_dir():
            return None
        commits = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        if rev == "main" and commits:
            return commits[-1], commits[-1].name
        target = base / rev
        return (target, rev) if target.is_dir() else None

    @staticmethod
    def _files(top: Path) -> list[Path]:
        return sorted(p for p in top.rglob("*") if p.is_file())

    def _entry(self, top: Path, path: Path) -> dict:
        rel = path.relative_to(top).as_posix()
        if path.is_dir():
            return {"type": "directory", "path": rel, "oid": hashlib.sha1(rel.encode()).hexdigest()}
        return {"type": "file", "path": rel, "size": path.stat().st_size, "oid": git_blob_sha(path),
                "lfs": {"oid": _sha256(path), "size": path.stat().st_size, "pointerSize": 134}}

    def _info(self, kind: str, repo: str, top: Path, commit: str) -> dict:
        siblings = [{"rfilename": p.relative_to(top).as_posix()} for p in self._files(top)]
        return {"id": repo, "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "sha": commit,
                "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0,
                "tags": [], "siblings": siblings, "lastModified": "2025-01-01T00:00:00.000Z",
                "createdAt": "2025-01-01T00:00:00.000Z", "cardData": {}, "author": repo.split("/")[0]}

    # ------------------------------------------------------------ HTTP

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        with self.lock:
            self.requests.append((method, path))
        body = b""
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        parts = path.strip("/").split("/")
        try:
            if parts[0] == "api" and len(parts) >= 4 and parts[1] in ("models", "datasets"):
                return self._api(h, parts[1], parts[2:], urllib.parse.parse_qs(url.query), body, method)
            kind = "models"
            if parts[0] == "datasets":
                kind, parts = "datasets", parts[1:]
            if len(parts) >= 5 and parts[2] == "resolve":
                return self._resolve(h, kind, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), method)
        except (IndexError, ValueError):
            pass
        self._send(h, 404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, method)

    def _api(self, h, kind: str, rest: list[str], query: dict, body: bytes, method: str) -> None:
        repo = "/".join(rest[:2])
        tail = rest[2:]
        rev = "main"
        if tail[:1] in (["revision"], ["tree"], ["paths-info"]) and len(tail) >= 2:
            rev = urllib.parse.unquote(tail[1])
        found = self._repo(kind, repo, rev)
        if found is None:
            return self._send(h, 404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, method)
        top, commit = found
        if not tail or tail[0] == "revision":
            return self._json(h, self._info(kind, repo, top, commit), method)
        if tail[0] == "tree":
            sub = "/".join(tail[2:])
            start = top / sub if sub else top
            if not start.exists():
                return self._send(h, 404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"}, method)
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            items = start.rglob("*") if recursive else start.iterdir()
            return self._json(h, [self._entry(top, p) for p in sorted(items)], method)
        if tail[0] == "paths-info":
            form = urllib.parse.parse_qs(body.decode())
            wanted = form.get("paths", [])
            if not wanted and body.startswith(b"{"):
                wanted = json.loads(body).get("paths", [])
            out = [self._entry(top, top / p) for p in wanted if (top / p).exists()]
            return self._json(h, out, method)
        self._send(h, 404, b'{"error": "not found"}', {}, method)

    def _resolve(self, h, kind: str, repo: str, rev: str, rel: str, method: str) -> None:
        found = self._repo(kind, repo, urllib.parse.unquote(rev))
        if found is None:
            return self._send(h, 404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, method)
        top, commit = found
        target = top / rel
        if not target.is_file():
            return self._send(h, 404, b'{"error": "Entry not found"}',
                              {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, method)
        self._bytes(h, target.read_bytes(), {"X-Repo-Commit": commit, "ETag": f'"{_sha256(target)}"'}, method)

    def _json(self, h, value, method: str) -> None:
        self._send(h, 200, json.dumps(value).encode(), {"Content-Type": "application/json"}, method)



def use_in_process(monkeypatch, url: str) -> None:
    """Point this process's huggingface_hub at `url`, online: HF_ENDPOINT (rlaunch passes it as
    `endpoint=` on each call), and HF_HUB_OFFLINE both in the environment and in the constant
    huggingface_hub read from it when an earlier test first imported it."""
    import sys

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

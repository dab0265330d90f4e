"""A ModelScope stand-in for tests: the few HTTP endpoints the real `modelscope` client
(snapshot_download, dataset_snapshot_download, HubApi) calls, serving repositories from a local
folder, so rlaunch's real download code runs offline (MODELSCOPE_ENDPOINT=http://127.0.0.1:PORT).

    root/models/<org>/<name>/<commit>/...     a model repository at one commit (40 hex)
    root/datasets/<org>/<name>/<commit>/...   a dataset repository

Endpoints, as modelscope 1.40 (modelscope-hub 0.5) calls them, under /api/v1/: the file list
(models/<repo>/repo/files?Revision=..., datasets/<repo>/repo/tree?Revision=...), the revisions
(<kind>/<repo>/revisions), the repository's info (<kind>/<repo>), and the files
(<kind>/<repo>/repo?Revision=...&FilePath=...). A revision is a commit or `master` (the newest
commit folder). Anything else is 404 in ModelScope's envelope, as the service answers.

Every request is recorded in `requests` (method, path with query), so a test can assert a second
preparation fetched nothing. Standard library only.

    with FakeModelScope(root) as ms:       # ms.url: http://127.0.0.1:<port>
        env["MODELSCOPE_ENDPOINT"] = ms.url
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from fakeserver import FakeServer

MOVING = "master"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeModelScope(FakeServer):
    def file_gets(self) -> list[str]:
        """The files downloaded so far (GET .../repo?...FilePath=...)."""
        return [p for m, p in self.requests if m == "GET" and "FilePath=" in p]

    # ------------------------------------------------------------ repositories

    def _commits(self, kind: str, repo: str) -> list[Path]:
        base = self.root / kind / repo
        if not base.is_dir():
            return []
        return sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)

    def _repo(self, kind: str, repo: str, rev: str) -> tuple[Path, str] | None:
        commits = self._commits(kind, repo)
        if rev in ("", MOVING) and commits:
            return commits[-1], commits[-1].name
        for c in commits:
            if c.name == rev:
                return c, rev
        return None

    @staticmethod
    def _entry(top: Path, path: Path, commit: str) -> dict:
        rel = path.relative_to(top).as_posix()
        if path.is_dir():
            return {"Name": path.name, "Path": rel, "Type": "tree", "Size": 0, "Revision": commit}
        return {"Name": path.name, "Path": rel, "Type": "blob", "Size": path.stat().st_size,
                "Sha256": _sha256(path), "IsLFS": path.suffix in (".safetensors", ".bin", ".parquet"),
                "Revision": commit, "CommitId": commit, "CommittedDate": 1735689600}

    # ------------------------------------------------------------ HTTP

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(h.path)
        with self.lock:
            self.requests.append((method, h.path))
        if method == "POST":
            h.rfile.read(int(h.headers.get("Content-Length") or 0))
        parts = urllib.parse.unquote(url.path).strip("/").split("/")
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        if parts[:2] == ["api", "v1"] and len(parts) >= 5 and parts[2] in ("models", "datasets"):
            return self._api(h, parts[2], "/".join(parts[3:5]), parts[5:], query, method)
        self._error(h, 404, "not found", method)

    def _api(self, h, kind: str, repo: str, tail: list[str], query: dict, method: str) -> None:
        commits = self._commits(kind, repo)
        if not commits:
            return self._error(h, 404, f"{repo} not found", method)
        if not tail:
            newest = commits[-1].name
            return self._ok(h, {"Id": 1, "Name": repo.split("/")[1], "Path": repo.split("/")[0],
                                "ChineseName": "", "Revision": newest, "LatestCommitId": newest,
                                "Private": False, "Visibility": 5}, method)
        if tail == ["revisions"]:
            return self._ok(h, {"RevisionMap": {"Branches": [{"Revision": MOVING, "CommitId": commits[-1].name}],
                                                "Tags": []}}, method)
        found = self._repo(kind, repo, query.get("Revision", MOVING))
        if found is None:
            return self._error(h, 404, f"revision {query.get('Revision')} of {repo} not found", method)
        top, commit = found
        if tail in (["repo", "files"], ["repo", "tree"]):
            root = (query.get("Root") or "").strip("/")
            start = top / root if root else top
            recursive = query.get("Recursive", "False").lower() == "true"
            items = sorted(start.rglob("*") if recursive else start.iterdir())
            files = [self._entry(top, p, commit) for p in items]
            if kind == "datasets":
                return self._ok(h, {"Files": files, "TotalCount": len(files)}, method)
            return self._ok(h, {"Files": files}, method)
        if tail == ["repo"] and query.get("FilePath"):
            target = top / query["FilePath"].lstrip("/")
            if not target.is_file():
                return self._error(h, 404, f"{query['FilePath']} not found", method)
            return self._bytes(h, target.read_bytes(), {"ETag": f'"{_sha256(target)}"'}, method)
        self._error(h, 404, "not found", method)

    def _ok(self, h, data, method: str) -> None:
        body = {"Code": 200, "Data": data, "Message": "success", "RequestId": "fake", "Success": True}
        self._send(h, 200, json.dumps(body).encode(), {"Content-Type": "application/json"}, method)

    def _error(self, h, status: int, message: str, method: str) -> None:
        body = {"Code": 10010205001, "Message": message, "RequestId": "fake", "Success": False}
        self._send(h, status, json.dumps(body).encode(), {"Content-Type": "application/json"}, method)



def use_in_process(monkeypatch, url: str) -> None:
    """Point this process's modelscope client at `url`: MODELSCOPE_ENDPOINT, and a fresh default
    config, which the client builds from the environment once per process (a subprocess reads it anew)."""
    import sys

    monkeypatch.setenv("MODELSCOPE_ENDPOINT", url)
    config = sys.modules.get("modelscope_hub.config")
    if config is not None:
        monkeypatch.setattr(config, "_default_config", None)

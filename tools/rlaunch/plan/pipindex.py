"""A local package index for pip's resolver that serves wheel metadata only (PEP 691 + PEP 658).

Why: `pip install --dry-run --report` resolves without installing, but it reads each candidate's
metadata from the wheel unless the index advertises the metadata file (PEP 658). The index this
machine reaches serves `<wheel>.metadata` but does not advertise it, so pip downloaded whole wheels:
measured here, 4.3 GB in 10 minutes for verl + vLLM + torch before it was stopped (and
`--use-feature=fast-deps` took over 8 minutes of range requests). This index sits between pip and
the real one (127.0.0.1, a port of its own): it passes the project pages through with every wheel
marked as having its metadata, serves `.metadata` files, drops source distributions (pip would
build them) and refuses to serve a wheel itself. pip's own resolver does all the resolving.

Everything it fetched is kept in a cache directory, in the upstream's own bytes:
    pages/<project>.json        the project's PEP 691 page, as the upstream sent it
    metadata/<filename>.metadata the wheel's METADATA
so a second resolution is offline. With `offline=True` only the cache is read (an unknown page
is a 404, which pip reports as "no matching distribution"; `misses` names them).

`record(dest)` writes a trimmed copy for test fixtures: each page keeps only the wheels whose
metadata pip fetched, each METADATA its headers (not the long description). pip rejects the other candidates without reading their metadata (their
version, tags or Requires-Python rule them out), so the same resolution over the trimmed pages
visits the same candidates and gives the same answer.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import threading
from typing import Any
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
DEFAULT_UPSTREAM = "https://pypi.org/simple"
FETCH_TIMEOUT_S = 60
SDIST_MARK = "sdist/"             # in a synthetic wheel's URL: its metadata is an sdist's PKG-INFO
SDIST_MAX_BYTES = 20 * 1024 * 1024  # larger sdists (CUDA extensions) are never read for PKG-INFO


class Unreachable(Exception):
    """The upstream index did not answer (no network, DNS, refused, timeout)."""


def upstream_url() -> str:
    """The index pip would use here: PIP_INDEX_URL, else pip's default (PyPI)."""
    return (os.environ.get("PIP_INDEX_URL") or DEFAULT_UPSTREAM).rstrip("/")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class MetadataIndex:
    """Serve pip a metadata-only view of `upstream`, cached in `cache`; use as a context manager."""

    def __init__(self, cache: Path, upstream: str | None = None, offline: bool = False):
        self.cache = Path(cache)
        self.upstream = (upstream or upstream_url()).rstrip("/")
        self.offline = offline
        self.misses: list[str] = []       # what an offline index was asked for and did not have
        self.failures: list[str] = []     # upstream errors (unreachable, 5xx)
        self.used: dict[str, set[str]] = {}  # project -> wheel filenames whose metadata pip read
        self._urls: dict[str, str] = {}      # wheel filename -> its upstream URL
        self._sdists: dict[str, str] = {}    # synthetic wheel filename -> the sdist it stands for
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -------------------------------------------------------------- upstream and cache

    def _get(self, url: str, accept: str | None = None) -> bytes:
        req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        try:
            with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 - an index URL
                body: bytes = resp.read()
                return body
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            raise Unreachable(f"{url}: {getattr(err, 'reason', err)}") from None

    def page(self, project: str) -> dict[str, Any] | None:
        """The project's PEP 691 page (cached), or None when the index has no such project."""
        project = canonical(project)
        path = self.cache / "pages" / f"{project}.json"
        data: dict[str, Any]
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
        elif self.offline:
            self.misses.append(f"page {project}")
            return None
        else:
            try:
                body = self._get(f"{self.upstream}/{project}/", JSON_TYPE)
            except urllib.error.HTTPError as err:
                if err.code == 404:
                    return None
                self.failures.append(f"{project}: HTTP {err.code}")
                return None
            except Unreachable as err:
                self.failures.append(str(err))
                return None
            data = json.loads(body)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, json.dumps(data))
        with self._lock:
            for entry in data.get("files", []):
                self._urls[entry["filename"]] = urllib.parse.urljoin(f"{self.upstream}/{project}/", entry["url"])
        return data

    def metadata(self, filename: str) -> bytes | None:
        path = self.cache / "metadata" / f"{filename}.metadata"
        if path.exists():
            body = path.read_bytes()
        elif self.offline:
            self.misses.append(f"metadata {filename}")
            return None
        elif filename in self._sdists:
            try:
                body = sdist_pkg_info(self._urls[self._sdists[filename]])
            except (urllib.error.HTTPError, Unreachable, OSError, ValueError, KeyError, tarfile.TarError) as err:
                self.failures.append(f"{self._sdists[filename]}: no PKG-INFO: {err}")
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, body)
        else:
            url = self._urls.get(filename)
            if not url:
                return None
            try:
                body = self._get(url + ".metadata")
            except urllib.error.HTTPError as err:
                if err.code != 404:
                    self.failures.append(f"{filename}.metadata: HTTP {err.code}")
                    return None
                # Not every upload has its metadata file: read METADATA out of the wheel with
                # HTTP range requests (its zip directory and that one member, a few kB).
                try:
                    body = wheel_metadata(url)
                except (urllib.error.HTTPError, Unreachable, OSError, ValueError, KeyError) as err:
                    self.failures.append(f"{filename}: no metadata file, and range reads failed: {err}")
                    return None
            except Unreachable as err:
                self.failures.append(f"{filename}.metadata: {err}")
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, body)
        project = canonical(filename.split("-", 1)[0])
        with self._lock:
            self.used.setdefault(project, set()).add(filename)
        return body

    def served_page(self, project: str, base: str) -> dict[str, Any] | None:
        """What pip sees: wheels only, each marked as having metadata, its URL on this index.

        A version published only as a source distribution gets a wheel entry of its own
        (`<name>-<version>-py3-none-any.whl`, SDIST_MARK in its URL) whose metadata is the
        sdist's PKG-INFO: pip cannot build sdists for another platform (--platform needs
        --only-binary), yet images carry such packages (antlr4-python3-runtime 4.9.3, which
        hydra-core 1.3 needs, has no wheel)."""
        data = self.page(project)
        if data is None:
            return None
        files: list[dict[str, Any]] = []
        wheel_versions: set[str] = set()
        sdists: dict[str, dict[str, Any]] = {}
        for entry in data.get("files", []):
            name = entry["filename"]
            if name.endswith(".whl"):
                wheel_versions.add(name.split("-")[1])
                files.append(self._entry(entry, name, base))
            elif name.endswith((".tar.gz", ".zip")):
                version = _sdist_version(name, data.get("name", project))
                if version and entry.get("size", 0) <= SDIST_MAX_BYTES:
                    sdists.setdefault(version, entry)
        for version, entry in sdists.items():
            if version in wheel_versions:
                continue
            synthetic = f"{canonical(data.get('name', project)).replace('-', '_')}-{version}-py3-none-any.whl"
            with self._lock:
                self._sdists[synthetic] = entry["filename"]
            files.append(self._entry(entry, synthetic, base, SDIST_MARK))
        return {"meta": {"api-version": "1.0"}, "name": data.get("name", project), "files": files}

    def _entry(self, entry: dict[str, Any], filename: str, base: str, mark: str = "") -> dict[str, Any]:
        out = {k: v for k, v in entry.items() if k not in ("url", "filename", "hashes", "data-dist-info-metadata",
                                                           "dist-info-metadata", "core-metadata")}
        out["filename"] = filename
        out["hashes"] = {} if mark else entry.get("hashes", {})
        out["url"] = f"{base}/files/{mark}{urllib.parse.quote(filename)}"
        # PEP 658's key and PEP 714's newer name: pip versions read one or the other.
        out["dist-info-metadata"] = out["core-metadata"] = True
        return out

    # -------------------------------------------------------------- fixtures

    def record(self, dest: Path) -> None:
        """Write the pages (trimmed to the wheels whose metadata was read) and that metadata."""
        dest = Path(dest)
        for project, used in sorted(self.used.items()):
            data = json.loads((self.cache / "pages" / f"{project}.json").read_text(encoding="utf-8"))
            keep = used | {self._sdists[u] for u in used if u in self._sdists}
            data["files"] = [f for f in data.get("files", []) if f["filename"] in keep]
            (dest / "pages").mkdir(parents=True, exist_ok=True)
            _write(dest / "pages" / f"{project}.json", json.dumps(data, indent=0, sort_keys=True))
            for filename in sorted(used):
                (dest / "metadata").mkdir(parents=True, exist_ok=True)
                src = self.cache / "metadata" / f"{filename}.metadata"
                # The headers only: the body is the long description, which no resolver reads.
                _write(dest / "metadata" / f"{filename}.metadata", src.read_bytes().split(b"\n\n", 1)[0] + b"\n")

    # -------------------------------------------------------------- the server

    @property
    def url(self) -> str:
        assert self._server is not None, "use MetadataIndex as a context manager"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> "MetadataIndex":
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # pip's own output says enough
                pass

            def _send(self, code: int, body: bytes = b"", ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urllib.parse.unquote(self.path.split("?", 1)[0])
                parts = [p for p in path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    page = index.served_page(parts[1], index.url)
                    if page is None:
                        return self._send(404, b"not found")
                    return self._send(200, json.dumps(page).encode(), JSON_TYPE)
                if len(parts) == 3 and parts[0] == "files" and parts[1] == SDIST_MARK.strip("/"):
                    parts = parts[:1] + parts[2:]
                if len(parts) == 2 and parts[0] == "files" and parts[1].endswith(".metadata"):
                    body = index.metadata(parts[1][: -len(".metadata")])
                    return self._send(200, body) if body is not None else self._send(404, b"not found")
                if len(parts) == 2 and parts[0] == "files":
                    # A dry run reads metadata only; a wheel asked for means pip wanted to unpack one.
                    index.failures.append(f"pip asked for the wheel {parts[1]} (this index serves metadata only)")
                    return self._send(403, b"metadata only")
                return self._send(404, b"not found")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="rlaunch-pipindex", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _RangeFile(io.RawIOBase):
    """A remote file read with HTTP Range requests, in blocks, so zipfile can seek in a wheel."""

    BLOCK = 64 * 1024

    def __init__(self, url: str):
        self.url, self.pos = url, 0
        self.blocks: dict[int, bytes] = {}
        self.size = int(self._range(0, 0)[1])

    def _range(self, start: int, end: int) -> tuple[bytes, str]:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
        try:
            with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310
                if resp.status != 206:
                    raise ValueError(f"{self.url}: the server ignores Range requests")
                total = resp.headers.get("Content-Range", "").rpartition("/")[2]
                return resp.read(), total
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, TimeoutError) as err:
            raise Unreachable(f"{self.url}: {getattr(err, 'reason', err)}") from None

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        out = bytearray()
        while self.pos < end:
            block = self.pos // self.BLOCK
            if block not in self.blocks:
                start = block * self.BLOCK
                self.blocks[block] = self._range(start, min(self.size, start + self.BLOCK) - 1)[0]
            data = self.blocks[block][self.pos - block * self.BLOCK: end - block * self.BLOCK]
            out += data
            self.pos += len(data)
        return bytes(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def wheel_metadata(url: str) -> bytes:
    """The METADATA of the wheel at `url`, read with range requests (zip directory + one member)."""
    with zipfile.ZipFile(io.BufferedReader(_RangeFile(url), buffer_size=_RangeFile.BLOCK)) as wheel:
        names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise ValueError(f"{url}: {len(names)} .dist-info/METADATA members")
        return wheel.read(names[0])


def _sdist_version(filename: str, project: str) -> str:
    """The version in an sdist's file name: what follows the project's name (spelt any way)."""
    stem = re.sub(r"\.(tar\.gz|zip)$", "", filename)
    words = re.split(r"[-_.]+", project)
    match = re.match("(?i)" + "[-_.]".join(map(re.escape, words)) + r"-(.+)$", stem)
    return match.group(1) if match else ""


def sdist_pkg_info(url: str) -> bytes:
    """The PKG-INFO at the top of a source distribution (downloaded whole: SDIST_MAX_BYTES at most)."""
    req = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310
            data = resp.read(SDIST_MAX_BYTES + 1)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, TimeoutError) as err:
        raise Unreachable(f"{url}: {getattr(err, 'reason', err)}") from None
    if url.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            name = min((n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")), key=len)
            return archive.read(name)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        member = min((m for m in archive.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")),
                     key=lambda m: len(m.name))
        found = archive.extractfile(member)
        return found.read() if found is not None else b""


def _write(path: Path, data: str | bytes) -> None:
    """Write through a temporary name, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)

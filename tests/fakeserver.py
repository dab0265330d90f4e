"""What the hub stand-ins (tests/fakehub.py, tests/fakemodelscope.py) share: a threaded HTTP server
on 127.0.0.1 that hands every GET/HEAD/POST to the subclass's `_handle`, the request record tests
assert on, and responses with byte ranges (the clients resume and split downloads). Standard
library only."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FakeServer:
    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0):
        self.root = Path(root)
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                owner._handle(self, "GET")

            def do_HEAD(self):
                owner._handle(self, "HEAD")

            def do_POST(self):
                owner._handle(self, "POST")

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        raise NotImplementedError

    def _bytes(self, h: BaseHTTPRequestHandler, data: bytes, headers: dict, method: str) -> None:
        """A file's bytes, or the Range the client asked for (206)."""
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **headers}
        status = 200
        ranged = h.headers.get("Range", "")
        if method == "GET" and ranged.startswith("bytes="):
            start, _, end = ranged[6:].partition("-")
            lo = int(start or 0)
            hi = int(end) if end else len(data) - 1
            headers["Content-Range"] = f"bytes {lo}-{hi}/{len(data)}"
            data, status = data[lo:hi + 1], 206
        self._send(h, status, data, headers, method)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict, method: str) -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if method != "HEAD":
            h.wfile.write(data)

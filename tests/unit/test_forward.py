"""The dashboard's port forwarder (rlaunch.backends.local.forward) between two sockets of this host: whole responses,
several connections, Ctrl-C, a target that does not answer. tests/e2e/test_observe.py forwards into a
real head's network namespace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rlaunch.errors import MissingPrerequisite

ROOT = Path(__file__).resolve().parents[2]


class _Big(BaseHTTPRequestHandler):
    body = os.urandom(3 << 20)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_forward_relays_whole_responses_and_stops_on_ctrl_c(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    code = ("import sys; from rlaunch.backends.local import forward; sys.exit(forward.forward(None, '127.0.0.1', "
            f"{port}, 0, '/', lambda url, answer: f'open {{url}} ({{len(answer)}} bytes)'))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tools")})
    try:
        banner = proc.stdout.readline()
        assert banner.endswith(f"({len(_Big.body)} bytes)\n"), banner + proc.stderr.read()
        url = banner.split()[1]
        for _ in range(3):  # several connections, one after another
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.read() == _Big.body
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        server.shutdown()
    assert proc.returncode == 0 and "forward stopped" in err


def test_forward_to_nothing_is_a_missing_prerequisite():
    from rlaunch.backends.local import forward

    with pytest.raises(MissingPrerequisite, match="an answer from http://127.0.0.1:9/api/version"):
        forward.forward(None, "127.0.0.1", 9, 0, "/api/version", lambda *_: "")


def test_listen_takes_another_port_when_the_wanted_one_is_busy():
    from rlaunch.backends.local import forward

    with forward.listen(0) as busy:
        taken = busy.getsockname()[1]
        with forward.listen(taken) as other:
            assert other.getsockname()[1] not in (taken, 0)



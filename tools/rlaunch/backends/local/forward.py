"""Forward a port on the host's 127.0.0.1 to an address inside a network namespace, until Ctrl-C.

The local infra's nodes live in their own network namespaces with no route from the host (by
design: the nodes never touch the host's network). To open the head's dashboard in a browser, this
process binds its listening socket on the host, then enters the head's namespace (setns), so every
connection it makes to the target starts there. The bytes are moved by asyncio's own streams.

Both sockets belong to the namespace they were created in, whatever namespace the process is in
later: that is what lets one process listen on the host and connect inside the namespace.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import socket
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rlaunch.errors import MissingPrerequisite

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")  # where `ip netns add` puts its handles
CHUNK = 1 << 16


def listen(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket on `port`, or on a free port when that one is taken (port 0: any)."""
    try:
        return socket.create_server((host, port))
    except OSError:
        if port == 0:
            raise
        return socket.create_server((host, 0))


def enter_netns(name: str) -> None:
    """Move this thread into the network namespace `ip netns` calls `name` (needs CAP_SYS_ADMIN)."""
    path = NETNS_DIR / name
    if not path.exists():
        raise MissingPrerequisite(f"network namespace {name}", "the cluster is not up (make status)")
    fd = os.open(path, os.O_RDONLY)
    try:
        if hasattr(os, "setns"):  # Python 3.12+
            os.setns(fd, CLONE_NEWNET)
        elif ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise MissingPrerequisite(f"entering network namespace {name} ({os.strerror(err)})",
                                      "run as root, as `make launch` did for this cluster")
    finally:
        os.close(fd)


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - our own cluster's URL
        body: bytes = resp.read()
        return body


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _serve(server_sock: socket.socket, host: str, port: int) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            target_r, target_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, target_w), _pipe(target_r, client_w))

    server = await asyncio.start_server(handle, sock=server_sock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def serve(server_sock: socket.socket, host: str, port: int) -> None:
    """Relay every connection to server_sock to host:port until SIGINT or SIGTERM."""
    asyncio.run(_serve(server_sock, host, port))


def forward(netns: str | None, host: str, port: int, local_port: int, check_path: str,
            banner: Callable[[str, bytes], str]) -> int:
    """Listen on 127.0.0.1:local_port (or a free port), enter `netns`, check that
    http://host:port<check_path> answers, print banner(url, answer), forward until Ctrl-C."""
    server_sock = listen(local_port)
    local = server_sock.getsockname()[1]
    try:
        if netns:
            enter_netns(netns)
        target = f"http://{host}:{port}{check_path}"
        try:
            answer = http_get(target)
        except OSError as err:
            raise MissingPrerequisite(f"an answer from {target} ({err})",
                                      "the cluster's head is not serving it: `make status` shows the nodes") from None
        print(banner(f"http://127.0.0.1:{local}", answer), flush=True)
        serve(server_sock, host, port)
    finally:
        server_sock.close()
    print("forward stopped", file=sys.stderr)
    return 0

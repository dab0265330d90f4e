"""`make tensorboard`: TensorBoard on 127.0.0.1 for one run or several side by side, until Ctrl-C.

Each run is one TensorBoard run named by its run id (a link per run under build/tensorboard/), so
the same tag of every run lands in one chart. Event files are read where the run directory is on this
machine: the local infra's shared storage, or a mounted or synced bucket passed as a directory.
A KubeRay run whose directory is only on the cluster's volume gets a TensorBoard next to its head
instead (rlaunch.backends.kuberay.backend). TensorBoard's own output goes to a log file; this prints the
URL to open once TensorBoard answers.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from rlaunch import ROOT, progress
from rlaunch.errors import MissingPrerequisite
from rlaunch.registry import backends
from rlaunch.runs.lookup import RunDir, require_local

DEFAULT_PORT = 6006
START_DEADLINE_S = 120.0  # TensorBoard imports and its first scan of the event files


def free_port(preferred: int) -> int:
    """`preferred` when nothing listens on it on 127.0.0.1, else one the kernel picks."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise MissingPrerequisite("a free local port", "close something listening on 127.0.0.1")


def event_dir(run_dir: Path) -> Path:
    """tensorboard/ when the run has one (the rehearsal, RLinf); else the whole run directory."""
    return run_dir / "tensorboard" if (run_dir / "tensorboard").is_dir() else run_dir


def link_farm(named: dict[str, Path], farm: Path) -> Path:
    """A directory of one link per run, named by its id, to its event directory: TensorBoard then
    names each run by its id alone (`--logdir_spec` would call them `id/.`)."""
    if farm.is_dir():
        for entry in farm.iterdir():
            if entry.is_symlink():
                entry.unlink()
    farm.mkdir(parents=True, exist_ok=True)
    for name, path in named.items():
        (farm / name).symlink_to(Path(path).resolve(), target_is_directory=True)
    return farm


def wait_until_answering(url: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    with progress.Wait("tensorboard", deadline_s, "starting") as wait:
        while True:
            if proc.poll() is not None:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:]) if log.exists() else ""
                raise MissingPrerequisite(f"a running TensorBoard (it exited {proc.returncode})",
                                          f"see {log}:\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - our own localhost
                    json.loads(resp.read())
                wait.update("ready")
                return
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                proc.terminate()
                raise MissingPrerequisite(f"an answer from TensorBoard at {url} within {deadline_s:.0f} s",
                                          f"see {log}")
            wait.update()
            time.sleep(0.5)


def serve_dirs(named: dict[str, Path], port: int | None, farm: Path) -> int:
    """TensorBoard over these event directories (name -> dir) on 127.0.0.1 until Ctrl-C."""
    empty = [name for name, path in named.items() if not any(Path(path).rglob("events.out.tfevents.*"))]
    for name in empty:
        print(f"tensorboard: no event files under {named[name]} yet (run {name}); TensorBoard shows them "
              "when they appear", file=sys.stderr)
    chosen = free_port(DEFAULT_PORT if port is None else port)
    logdir = link_farm(named, farm)
    log = farm.with_suffix(".log")
    argv = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
            "--host", "127.0.0.1", "--port", str(chosen), "--reload_interval", "5"]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{chosen}"
    try:
        wait_until_answering(f"{url}/data/runs", proc, log, START_DEADLINE_S)
        print(f"tensorboard: {', '.join(named)}: open {url}", flush=True)
        print(f"tensorboard: reading {', '.join(str(p) for p in named.values())}; log {log}; "
              "Ctrl-C stops it", flush=True)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    print("tensorboard stopped", file=sys.stderr)
    return 0


def serve(runs: list[RunDir], port: int | None) -> int:
    handle = runs[0].handle if len(runs) == 1 and not runs[0].local else None
    if handle is not None and backends.infra(handle.place.infra).tensorboard:
        # Not on this machine: the run's infrastructure serves it from the cluster.
        backend = backends.get(handle.place.infra)
        return int(backend.tensorboard(handle, DEFAULT_PORT if port is None else port))
    named = {run.id: event_dir(require_local(run)) for run in runs}
    name = "-".join(named)
    if len(name) > 100:
        name = f"{name[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return serve_dirs(named, port, ROOT / "build" / "tensorboard" / name)

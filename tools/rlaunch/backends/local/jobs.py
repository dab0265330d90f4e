"""Ray job submission through Ray's own SDK, run where the dashboard is reachable (for the local
infra: inside the head's network namespace). Secrets named in the spec travel from this process's
environment into the job's runtime env in memory: never through argv or a file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from rlaunch import progress

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def _client(address: str) -> Any:
    from ray.job_submission import JobSubmissionClient  # heavy: only where a job is submitted

    return JobSubmissionClient(address)


def _names(secrets: str | Iterable[object]) -> list[str]:
    # fire hands "A,B" over as a tuple and "" as a string.
    items = secrets.split(",") if isinstance(secrets, str) else list(secrets)
    return [str(name) for name in items if name]


def submit(address: str, submission_id: str, entrypoint: str, env_json: str = "{}",
           secrets: str | Iterable[object] = "") -> int:
    """Submit once: an id already known to the cluster is left alone (idempotent launch)."""
    client = _client(address)
    try:
        info = client.get_job_info(submission_id)
        print(f"job {submission_id} already submitted ({info.status}); not submitting again")
        return 0
    except Exception:  # noqa: BLE001 - the SDK raises RuntimeError for an unknown id
        pass
    env_vars = dict(json.loads(env_json) if isinstance(env_json, str) else env_json)
    missing = [name for name in _names(secrets) if name not in os.environ]
    if missing:
        print(f"job: secret(s) {', '.join(missing)} named in the config but not set in the environment",
              file=sys.stderr)
        return 3
    env_vars.update({name: os.environ[name] for name in _names(secrets)})
    client.submit_job(entrypoint=entrypoint, submission_id=submission_id,
                      runtime_env={"env_vars": env_vars})
    print(f"job {submission_id} submitted")
    return 0


def follow(address: str, submission_id: str, deadline_s: float = 3600) -> int:
    """Say while the job is pending, then stream its log until it ends (training progress as one
    live line on a terminal: rlaunch.progress); exit 0 only if Ray says SUCCEEDED."""
    client = _client(address)
    started = time.monotonic()
    if wait_pending(client, submission_id, deadline_s) == "PENDING":
        print(f"job {submission_id}: still PENDING after {deadline_s:.0f} s; stopped following",
              file=sys.stderr)
        return 4
    view = progress.LogView()

    async def _tail() -> None:
        async for chunk in client.tail_job_logs(submission_id):
            view.feed(chunk)

    try:
        asyncio.run(asyncio.wait_for(_tail(), timeout=max(1.0, deadline_s - (time.monotonic() - started))))
    except KeyboardInterrupt:  # Ctrl-C reaches this follower too; the launch that started it acts
        view.close()
        return 130
    except asyncio.TimeoutError:
        view.close()
        print(f"job {submission_id}: still running after {deadline_s:.0f} s; stopped following",
              file=sys.stderr)
        return 4
    view.close()
    return status(address, submission_id, wait_s=30, client=client)


def wait_pending(client: Any, submission_id: str, deadline_s: float, poll_s: float = 0.5) -> str:
    """Poll until the job leaves PENDING (Ray is still setting up its runtime env or waiting for
    resources), showing so; returns the status it reached, PENDING at the deadline."""
    info = client.get_job_info(submission_id)
    if str(info.status) != "PENDING":
        return str(info.status)
    deadline = time.monotonic() + deadline_s
    with progress.Wait(f"job {submission_id}", deadline_s, "PENDING") as wait:
        while str(info.status) == "PENDING" and time.monotonic() < deadline:
            wait.update("PENDING" + (f": {info.message}" if info.message else ""))
            time.sleep(poll_s)
            info = client.get_job_info(submission_id)
        wait.update(str(info.status))
    return str(info.status)


def status(address: str, submission_id: str, wait_s: float = 0, client: Any = None) -> int:
    client = client or _client(address)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = client.get_job_info(submission_id)
        except Exception as err:  # noqa: BLE001 - Ray answers an unknown id with an error
            print(f"job {submission_id}: not on this cluster ({str(err).strip().splitlines()[-1][:200]})")
            return 1
        if str(info.status) in TERMINAL or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    print(f"job {submission_id}: {info.status}" + (f" ({info.message})" if info.message else ""))
    return 0 if str(info.status) in ("SUCCEEDED", "RUNNING", "PENDING") else 1


def stop(address: str, submission_id: str) -> int:
    client = _client(address)
    try:
        client.stop_job(submission_id)
    except Exception as err:  # noqa: BLE001 - unknown id or cluster gone: nothing to stop
        print(f"job {submission_id}: nothing to stop ({err.__class__.__name__})")
    return 0

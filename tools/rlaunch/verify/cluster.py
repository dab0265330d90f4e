"""The round on every node: join the Ray cluster at RAY_ADDRESS, list its alive nodes, and run one
function (or place one actor) on each, pinned there, under a deadline.

Shared by accel (the workaround), preflight (its two probe rounds) and collective (one actor per
node). A task is pinned by hard node affinity and asks for no CPU, so a busy cluster still runs it;
it gets the job's env as its runtime_env (verify.task_env), so it sees what the job will see. A node
that does not answer within the deadline, or whose function raises, is a finding ({"error": why}),
never a crash. The node-side code is shipped by value (ship_by_value): a node need not import rlaunch.

Ray is imported inside the functions: it is heavy, and `collective exports` in job.sh needs none of it.
Env: RAY_ADDRESS (default: auto), RLAUNCH_PREFLIGHT_TIMEOUT_S (default 120): the deadline of a round.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

DEFAULT_TIMEOUT_S = 120.0
GCS_WAIT_S = 30.0  # at most this long for the head's port before ray.init


def address() -> str:
    return os.environ.get("RAY_ADDRESS") or "auto"


def round_timeout(timeout_s: float | None) -> float:
    """The deadline of one round: the caller's, else RLAUNCH_PREFLIGHT_TIMEOUT_S, else 120 s."""
    if timeout_s is not None:
        return timeout_s
    return float(os.environ.get("RLAUNCH_PREFLIGHT_TIMEOUT_S") or DEFAULT_TIMEOUT_S)


def unreachable(err: Exception) -> str:
    """The one-line finding when there is no cluster at RAY_ADDRESS."""
    return f"cannot connect to RAY_ADDRESS={address()}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"


def wait_for_gcs(where: str, timeout_s: float) -> None:
    """ray.init retries an unreachable GCS for minutes: give it a deadline of our own first."""
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or "://" in where:
        return  # "auto" (the local cluster's file) fails fast by itself; ray:// is not ours to probe
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise ConnectionError(f"{where} not reachable after {timeout_s:.0f} s ({err})") from None
            time.sleep(0.5)


@contextmanager
def joined(timeout_s: float) -> Iterator[None]:
    """Inside: connected to the cluster at RAY_ADDRESS (ConnectionError or TimeoutError when there is
    none). A driver that was already connected stays so; one this call connected is disconnected."""
    import ray

    if ray.is_initialized():
        yield
        return
    where = address()
    wait_for_gcs(where, min(timeout_s, GCS_WAIT_S))
    ray.init(address=where, logging_level="WARNING", log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def alive_nodes() -> list[dict[str, Any]]:
    """The alive nodes: node_id, ip, hostname, is_head, cpus, gpus; the head first, then by IP."""
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        out.append({"node_id": n["NodeID"], "ip": n["NodeManagerAddress"],
                    "hostname": n.get("NodeManagerHostname", ""),
                    "is_head": "node:__internal_head__" in res,
                    "cpus": res.get("CPU", 0), "gpus": res.get("GPU", 0)})
    return sorted(out, key=lambda n: (not n["is_head"], [int(p) if p.isdigit() else 0 for p in n["ip"].split(".")]))


def ship_by_value(*modules: ModuleType) -> None:
    """Make cloudpickle send these modules' functions as code: the nodes need not import rlaunch.
    Such a module uses only the standard library, Ray, torch and other modules shipped so."""
    from ray import cloudpickle

    for module in modules:
        if module.__name__ != "__main__":  # __main__'s functions already travel by value
            cloudpickle.register_pickle_by_value(module)


def pinned(node_id: str, env: dict[str, str], **options: object) -> dict[str, object]:
    """Ray options for a task or actor on exactly this node, with no CPU and the job's env."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    out = {"num_cpus": 0, **options, "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}
    if env:
        out["runtime_env"] = {"env_vars": env}
    return out


def gather(refs: dict[str, object], timeout_s: float, late: str,
           cancel: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """Wait up to timeout_s for every ref: (key -> result, key -> why there is none). `late` is the
    reason for one that did not answer in time (cancel: its task is force-cancelled)."""
    import ray

    ready = set(ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)[0])
    done, errors = {}, {}
    for key, ref in refs.items():
        if ref not in ready:
            if cancel:
                ray.cancel(ref, force=True)
            errors[key] = late
            continue
        try:
            done[key] = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - a node's failure is a finding, not a crash
            errors[key] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return done, errors


def on_every_node(fn: Callable[[dict[str, Any]], Mapping[str, object]], nodes: list[dict[str, Any]],
                  ctx: dict[str, Any], env: dict[str, str], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Run fn(ctx) once on every node: node_id -> its result (a plain dict, back from Ray), or {"error": why}."""
    import ray

    remote = ray.remote(fn)
    refs = {n["node_id"]: remote.options(**pinned(n["node_id"], env, max_retries=0)).remote(ctx) for n in nodes}
    done, errors = gather(refs, timeout_s, f"no answer within {timeout_s:.0f} s", cancel=True)
    return {k: done[k] if k in done else {"error": errors[k]} for k in refs}

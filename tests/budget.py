"""The time budget of `make test`'s cluster and end-to-end tests, and the isolation check of the tests
that run in parallel: the one place both are written (tests/conftest.py wires them into pytest).

Budget. The tests marked `cluster` or `e2e` run one after another, on an otherwise idle machine
(scripts/test), and their recorded durations (setup, call and teardown, so a session fixture's launch
counts where it is made) are summed at the end of the session. A sum over CLUSTER_E2E_BUDGET_S fails
the session, naming the slowest, so a new slow test is a decision made here rather than a surprise at
landing. The budget is in seconds of the reference machine (2 idle cores of the kind CI runs on); a
slower or busier machine is measured against the same run's own baseline: CALIBRATION's work, timed
at the start and at the end of the session, divided by its time on the reference machine, scales the
budget (never below 1: a faster machine gets no tighter budget).

Isolation. A test that starts no cluster may run beside another one (pytest-xdist, scripts/test), so
each must keep its files, namespaces, environment and working directory its own. Each such test
must leave its process's environment and working directory as it found them (checked after every
test: monkeypatch restores both). The session must leave nothing new at the top of the repository or
of build/ (build's shared caches excepted) and, on a machine that is the run's alone (CI=true), no
network namespace: a fixed name there is what two workers would fight over. Ports are not checked:
the tests bind port 0 (a free one).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

# Seconds the cluster and end-to-end tests of `make test` may take together on the reference machine.
# Measured there (2 idle cores, a fresh clone, CI=true): 1,010 to 1,063 s for 34 tests; the budget
# leaves about 25% for noise. See git log -- tests/budget.py for each change and its why.
CLUSTER_E2E_BUDGET_S = 1300.0

# The calibration's time on the reference machine: the median of the sessions measured there, idle
# (0.175 to 0.255 s).
CALIBRATION_REFERENCE_S = 0.22

# build/ entries the tests share by design: caches written atomically or under a lock by their owners,
# the records of what a harness or benchmark owns (one file per owner), the local shared storage
# (runs/<preset>/<run id>), and the last launch's pointer, which the end-to-end tests set as a user does.
SHARED_BUILD = {"mypy", "model-facts", "crds", "upstream", "locks", "imagecheck", "bench", "storage",
                "kuberay-harness", "last-run",
                # rlaunch's cache of CODE=<url>@<commit> checkouts, and the fixed repository the KubeRay
                # golden's git CODE is read from (tests/gitcode.py): both made once, when cases are collected
                "code-cache", "golden-code"}
# The repository's top-level entries the test runner itself writes: pytest's cache (--lf, --ff), made by
# the first pytest of a fresh clone.
RUNNER_OWN = {".pytest_cache"}
NETNS = Path("/run/netns")
# Set by a library inside the test's process, once, for the process: not the test's to restore.
LIBRARY_ENV = {
    "PYTEST_CURRENT_TEST",      # pytest's own, per phase
    "RAY_CLIENT_MODE",          # ray.init
    "TORCHINDUCTOR_CACHE_DIR",  # torch's first compile
}


def calibration() -> float:
    """Seconds for a fixed piece of the work the cluster tests do most: start Python processes and
    run Python code on one core (hashing, a loop)."""
    started = time.perf_counter()
    for _ in range(3):
        subprocess.run([sys.executable, "-c", "import json, subprocess"], check=True)
    digest = hashlib.sha256()
    block = b"x" * (1 << 20)
    for _ in range(64):
        digest.update(block)
    total = 0
    for i in range(600_000):
        total += i * i
    return time.perf_counter() - started


def speed_factor(measured: list[float]) -> float:
    """How much slower than the reference machine this run was (>= 1)."""
    return max(1.0, max(measured) / CALIBRATION_REFERENCE_S) if measured else 1.0


def over_budget(durations: dict[str, float], factor: float) -> str:
    """'' when the cluster and e2e tests' durations fit the budget at this speed factor; else the
    message that fails the session, with the slowest tests."""
    total = sum(durations.values())
    if total <= CLUSTER_E2E_BUDGET_S * factor:
        return ""
    slowest = sorted(durations.items(), key=lambda kv: -kv[1])[:5]
    top = "; ".join(f"{name} {seconds:.0f} s" for name, seconds in slowest)
    return (f"budget: the cluster and e2e tests took {total:.0f} s, over {_budget(factor)}: make the new "
            f"test cheaper, share a launch, or raise CLUSTER_E2E_BUDGET_S there saying why. Slowest: {top}")


def within(durations: dict[str, float], factor: float) -> str:
    return f"budget: the cluster and e2e tests took {sum(durations.values()):.0f} s of {_budget(factor)}"


def calibrated(measured: list[float]) -> str:
    """The calibration's times this session, for the record that sets CALIBRATION_REFERENCE_S."""
    return (f"budget: the calibration took {', '.join(f'{t:.3f}' for t in measured)} s "
            f"(the reference machine: {CALIBRATION_REFERENCE_S:.3f} s)")


def _budget(factor: float) -> str:
    return (f"their budget of {CLUSTER_E2E_BUDGET_S * factor:.0f} s ({CLUSTER_E2E_BUDGET_S:.0f} s on the "
            f"reference machine x {factor:.2f}, this run's speed against it; tests/budget.py)")


def shared_state(root: Path, netns: bool) -> dict[str, list[str]]:
    """What the tests share through the filesystem: the top of the repository and of build/ (its
    shared caches excepted) and, where the machine is the run's alone (CI), the network namespaces."""
    build = root / "build"
    state = {
        "the repository": sorted(p.name for p in root.iterdir() if p.name not in RUNNER_OWN),
        "build/": sorted(p.name for p in build.iterdir() if p.name not in SHARED_BUILD) if build.is_dir() else [],
    }
    if netns:
        state["the network namespaces"] = sorted(p.name for p in NETNS.iterdir()) if NETNS.is_dir() else []
    return state


def left_behind(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """What is there now that was not before, one line per place."""
    out = []
    for where, was in before.items():
        added = sorted(set(after.get(where, [])) - set(was))
        if added:
            out.append(f"{where}: {', '.join(added)}")
    return out


def process_state() -> dict[str, object]:
    """What a test must restore in its own process: environment and working directory."""
    env = {k: v for k, v in os.environ.items() if k not in LIBRARY_ENV}
    return {"environment": env, "working directory": os.getcwd()}


def process_changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    out = []
    env_was, env_now = before["environment"], after["environment"]
    assert isinstance(env_was, dict) and isinstance(env_now, dict)
    keys = sorted(k for k in env_was.keys() | env_now.keys() if env_was.get(k) != env_now.get(k))
    if keys:
        out.append(f"environment variables {', '.join(keys)} changed and not restored (use monkeypatch.setenv)")
    if before["working directory"] != after["working directory"]:
        out.append(f"working directory {before['working directory']} -> {after['working directory']} "
                   "(use monkeypatch.chdir)")
    return out

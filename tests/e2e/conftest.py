"""Session fixtures of the end-to-end tests:
- rehearsal: the README's rehearsal, launched once per session for every end-to-end test that reads
  a real run (test_rehearsal: the launch itself; test_observe: tensorboard, compare, progress in a pipe);
- runner_user: as on a GitHub-hosted runner, a user that is not root but has passwordless sudo
  (tests/actrun.py hosted_runner_user: a throwaway one when the tests run as root), for the
  workflows act runs (test_workflow_launch, test_workflow_down)."""

from __future__ import annotations

import os

import needs
import pytest
from actrun import hosted_runner_user
from e2e_support import make


@pytest.fixture(scope="session")
def rehearsal():
    """`make launch` of the rehearsal through a pipe (no TTY): (run_id, cluster name, the process)."""
    if os.geteuid() != 0:
        needs.missing("the 2-node rehearsal needs root for network namespaces")
    run_id = f"e2e-{os.getpid()}"
    from rlaunch.backends.local.backend import cluster_name

    name = cluster_name(run_id)
    proc = make("launch", f"RUN_ID={run_id}", timeout=600)
    yield run_id, name, proc
    make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)


@pytest.fixture(scope="session")
def runner_user():
    with hosted_runner_user() as name:
        yield name

"""Session fixtures of the end-to-end tests:
- rehearsal: the README's rehearsal, launched once per session for every end-to-end test that reads
  a real run (test_rehearsal: the launch itself, and the launch benchmark's smoke on its figures;
  test_observe: tensorboard, compare, progress in a pipe);
- runner_user: as on a GitHub-hosted runner, a user that is not root but has passwordless sudo
  (tests/actrun.py hosted_runner_user: a throwaway one when the tests run as root), for the
  workflows act runs (test_workflow_launch, test_workflow_down)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import needs
import pytest
from actrun import hosted_runner_user
from e2e_support import ROOT, make, start_make

sys.path.insert(0, str(ROOT / "tests" / "bench"))
import launch as launch_bench  # noqa: E402 - tests/bench/, just put on the path


REHEARSAL_CODE = ("CODE=tests/fixtures/code/rehearsal", "DATA=tests/fixtures/data/digits-jsonl",
                  'SET=framework.overrides=["reward=rehearsal_reward:copy_reward"]')


@pytest.fixture(scope="session")
def rehearsal():
    """`make launch` of the rehearsal through a pipe (no TTY): (run_id, cluster name, the process as a
    CompletedProcess, and rlaunch's path measured as the launch benchmark measures it: its smoke
    reads this launch instead of making one of its own)."""
    if os.geteuid() != 0:
        needs.missing("the 2-node rehearsal needs root for network namespaces")
    run_id = f"e2e-{os.getpid()}"
    from rlaunch.backends.local.backend import cluster_name

    name = cluster_name(run_id)
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        # With the user's own code (issue 47) and rows (issue 44): the reward the workers import comes
        # from CODE, the rows they train on from DATA, both staged on the host's storage; test_rehearsal
        # reads where each node found them.
        proc = start_make("launch", f"RUN_ID={run_id}", *REHEARSAL_CODE, stdout=out, stderr=err)
        ended: list[float] = []

        def wait(deadline_s: float) -> int:
            rc = proc.wait(timeout=min(deadline_s, 600))
            ended.append(time.time())
            return rc

        try:
            bench = launch_bench.measure(run_id, t0, lambda: proc.poll() is None, wait, lambda: ended[0])
        except (RuntimeError, AssertionError, OSError, subprocess.TimeoutExpired) as err_:
            bench = {"error": str(err_)}  # the tests name what went wrong from the launch's own output
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    yield run_id, name, done, bench
    make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)


@pytest.fixture(scope="session")
def runner_user():
    with hosted_runner_user() as name:
        yield name

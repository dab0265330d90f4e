"""The suite's own guards (tests/budget.py, wired in tests/conftest.py): the cluster and e2e tests'
time budget fails the session when it is passed, scaled by the run's own speed; the isolation check
names what a test left changed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import budget
import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def suite(request, monkeypatch):
    """tests/conftest.py as pytest loaded it (every conftest is a module named conftest), its
    session state emptied for the test."""
    module = next(p for p in request.config.pluginmanager.get_plugins() if getattr(p, "__file__", "") == str(CONFTEST))
    for name, empty in (("_durations", {}), ("_calibrations", []), ("_report", []), ("_shared", {})):
        monkeypatch.setattr(module, name, empty)
    monkeypatch.setattr(budget, "calibration", lambda: budget.CALIBRATION_REFERENCE_S)
    return module


@pytest.fixture
def session():
    return SimpleNamespace(config=SimpleNamespace(), exitstatus=pytest.ExitCode.OK)


def test_cluster_tests_over_their_budget_fail_the_session_naming_the_slowest(suite, session):
    suite._durations.update({"tests/e2e/test_new.py::test_slow": budget.CLUSTER_E2E_BUDGET_S, "tests/e2e/a.py::t": 60})
    suite.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    (line, fails), (calibrated, _) = suite._report
    assert calibrated.startswith("budget: the calibration took ")
    assert fails and line.startswith(f"budget: the cluster and e2e tests took {budget.CLUSTER_E2E_BUDGET_S + 60:.0f} s")
    assert "Slowest: tests/e2e/test_new.py::test_slow" in line and "tests/budget.py" in line


def test_within_the_budget_the_session_passes_and_says_how_much_it_used(suite, session):
    suite._durations.update({"tests/e2e/a.py::t": 100.0})
    suite.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.OK
    assert suite._report == [(f"budget: the cluster and e2e tests took 100 s of their budget of "
                              f"{budget.CLUSTER_E2E_BUDGET_S:.0f} s ({budget.CLUSTER_E2E_BUDGET_S:.0f} s on the "
                              "reference machine x 1.00, this run's speed against it; tests/budget.py)", False),
                             (budget.calibrated([budget.CALIBRATION_REFERENCE_S]), False)]


def test_a_slower_machine_gets_a_budget_in_proportion_never_a_tighter_one():
    assert budget.speed_factor([budget.CALIBRATION_REFERENCE_S * 0.5]) == 1.0
    assert budget.speed_factor([budget.CALIBRATION_REFERENCE_S, budget.CALIBRATION_REFERENCE_S * 1.5]) == pytest.approx(1.5)
    over = {"t": budget.CLUSTER_E2E_BUDGET_S * 1.4}
    assert budget.over_budget(over, 1.0) and not budget.over_budget(over, 1.5)


def test_a_session_that_leaves_a_file_in_build_fails(suite, session, monkeypatch):
    monkeypatch.setattr(suite, "_shared", {"build/": ["a"], "the repository": ["x"]})
    monkeypatch.setattr(budget, "shared_state", lambda root, netns: {"build/": ["a", "t-make-knobs"],
                                                                      "the repository": ["x"]})
    suite.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert suite._report == [("isolation: the tests left behind build/: t-make-knobs", True)]


def test_the_shared_state_leaves_out_builds_shared_caches_and_pytests_own(tmp_path):
    (tmp_path / "build" / "mypy").mkdir(parents=True)
    (tmp_path / "build" / "r-1").mkdir()
    (tmp_path / ".pytest_cache").mkdir()  # a fresh clone's first pytest makes it: not a test's leftover
    assert budget.shared_state(tmp_path, netns=False) == {"the repository": ["build"], "build/": ["r-1"]}


def test_a_changed_environment_or_working_directory_is_named(monkeypatch, tmp_path):
    before = budget.process_state()
    monkeypatch.setenv("RLAUNCH_LEAK", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAY_CLIENT_MODE", "0")  # a library's own: not the test's to restore
    problems = budget.process_changes(before, budget.process_state())
    assert problems == ["environment variables RLAUNCH_LEAK changed and not restored (use monkeypatch.setenv)",
                        f"working directory {before['working directory']} -> {tmp_path} "
                        "(use monkeypatch.chdir)"]

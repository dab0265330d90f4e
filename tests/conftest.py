"""Shared pytest setup: rlaunch importable from tools/ and the test helpers from tests/ (actrun),
markers registered, need_crds and the `crds`, `dra_crd` and `host_ok` fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

import budget  # noqa: E402 - from tests/, just put on the path
import needs  # noqa: E402


def _offline_imagecheck() -> None:
    """The plan's image check never reaches PyPI from a test: resolutions the lock
    (configs/locks/imagecheck) lacks run offline against the recorded index, with a cache of this
    session's own (a worktree's build/imagecheck would hide a stale lock)."""
    import atexit
    import shutil
    import tarfile
    import tempfile

    if os.environ.get("RLAUNCH_IMAGECHECK_INDEX"):
        return
    tmp = tempfile.mkdtemp(prefix="rlaunch-test-imagecheck-")
    atexit.register(shutil.rmtree, tmp, True)
    with tarfile.open(ROOT / "tests" / "fixtures" / "pipindex-verl.tar.gz") as archive:
        archive.extractall(Path(tmp) / "index", filter="data")
    os.environ["RLAUNCH_IMAGECHECK_INDEX"] = str(Path(tmp) / "index")
    os.environ["RLAUNCH_IMAGECHECK_CACHE"] = str(Path(tmp) / "cache")
    # DATA='s row checks (rlaunch.frameworks.verl.cpu.datacheck) likewise: this session's cache.
    os.environ.setdefault("RLAUNCH_DATACHECK_CACHE", str(Path(tmp) / "datacheck"))
    os.environ.setdefault("RLAUNCH_LOADER_CACHE", str(Path(tmp) / "loader-cache"))  # accepted loader answers


_offline_imagecheck()

# A machine that reaches its registries through a proxy (HTTP_PROXY, ALL_PROXY) would send the
# tests' loopback servers (tests/fakehub.py) there too: httpx, under huggingface_hub, honours both.
_loopback = {"127.0.0.1", "localhost", "::1"}
for _var in ("NO_PROXY", "no_proxy"):
    _have = {h.strip() for h in os.environ.get(_var, "").split(",") if h.strip()}
    os.environ[_var] = ",".join(sorted(_have | _loopback))

# Plan reads the model's config.json and SkyPilot's catalog: from the committed fixtures, never the
# network or this machine's ~/.sky (a test may point elsewhere with monkeypatch).
os.environ.setdefault("RLAUNCH_MODEL_FACTS", str(ROOT / "tests" / "fixtures" / "models"))
# SkyPilot's user hash names the inputs bucket (rlaunch.backends.skypilot): one fixed user, not this machine's.
os.environ["SKYPILOT_USER_ID"] = "rlaunch-test"
os.environ.setdefault("RLAUNCH_SKY_CATALOG", str(ROOT / "tests" / "fixtures" / "skypilot-catalog" / "v8"))
# Plan looks at the inputs' records with the cloud credentials it finds here (rlaunch.job.objects.look):
# none in a test, so its inputs lines are "not checked: no credentials" on every machine, CI's included.
for _var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
             "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "GOOGLE_APPLICATION_CREDENTIALS"):
    os.environ.pop(_var, None)
for _var in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CLOUDSDK_CONFIG"):
    os.environ[_var] = str(ROOT / "tests" / "no-credentials")  # never created


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: starts a real multi-node Ray cluster in network namespaces")
    config.addinivalue_line("markers", "e2e: runs a whole launch end to end")
    config.addinivalue_line("markers", "slow: takes more than a minute")
    config.addinivalue_line("markers", "full: only in `make test-all` (RLAUNCH_TEST_ALL=1): a second case of what a "
                            "test of `make test` already runs for real, left out to keep CI under its hour")


# ---------------------------------------------------------------- budget and isolation (tests/budget.py)

_durations: dict[str, float] = {}  # cluster and e2e tests: seconds, every phase
_calibrations: list[float] = []
_shared: dict[str, list[str]] = {}
_report: list[tuple[str, bool]] = []  # (line, whether it fails the session)


def _controller(config) -> bool:
    """The process that sees the whole session: pytest itself, or xdist's controller."""
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if _controller(session.config):
        _shared.update(budget.shared_state(ROOT, netns=needs.in_ci()))


def pytest_runtest_logreport(report):
    if "cluster" in report.keywords or "e2e" in report.keywords:
        if not _calibrations:
            _calibrations.append(budget.calibration())  # at the first cluster test: the machine as they found it
        _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    if not _controller(session.config):
        return
    left = budget.left_behind(_shared, budget.shared_state(ROOT, netns=needs.in_ci()))
    if left:
        _report.append(("isolation: the tests left behind " + "; ".join(left), True))
    if _durations:
        _calibrations.append(budget.calibration())
        factor = budget.speed_factor(_calibrations)
        message = budget.over_budget(_durations, factor)
        _report.append((message, True) if message else (budget.within(_durations, factor), False))
        _report.append((budget.calibrated(_calibrations), False))
    if any(fails for _, fails in _report):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    for line, fails in _report:
        terminalreporter.write_line(line, red=fails, bold=fails)


@pytest.fixture(autouse=True)
def _own_process_state(request, tmp_path_factory):
    """A test that may run beside others leaves its environment and working directory as it found
    them, and a launch it makes records itself as the last run in a file of its own (RLAUNCH_LAST_RUN),
    not in the build/last-run another test, or the developer, reads."""
    if request.node.get_closest_marker("cluster") or request.node.get_closest_marker("e2e"):
        yield
        return
    was = os.environ.get("RLAUNCH_LAST_RUN")
    os.environ["RLAUNCH_LAST_RUN"] = str(tmp_path_factory.mktemp("last-run", numbered=True) / "last-run")
    before = budget.process_state()
    yield
    problems = budget.process_changes(before, budget.process_state())
    if was is None:
        os.environ.pop("RLAUNCH_LAST_RUN", None)
    else:
        os.environ["RLAUNCH_LAST_RUN"] = was
    if problems:
        pytest.fail("isolation: " + "; ".join(problems), pytrace=False)


def need_crds(*kinds: str) -> dict:
    """The pinned CRD files of these kinds (rlaunch.validate.crds: `make crds` or RLAUNCH_CRDS_DIR).
    Without one the test skips saying how to get it; under CI=true it fails, unless the last
    `make crds` recorded that this machine cannot reach that CRD's upstream (then it skips, saying so)."""
    found, text, offline = needs.crd_gaps(*kinds)
    if text:
        needs.missing(text, unreachable=offline)
    return found


@pytest.fixture
def crds():
    """The KubeRay and PodMonitor CRDs (every KubeRay manifest but A4X's ComputeDomain): need_crds."""
    return need_crds(*needs.kuberay_kinds())


@pytest.fixture
def dra_crd():
    """NVIDIA's DRA driver's ComputeDomain CRD (GKE A4X): need_crds."""
    return need_crds("ComputeDomain")


@pytest.fixture
def host_ok():
    """A host where tests/kuberay_harness.py can run pods (root, ip, iptables, unshare); skip saying
    what is missing, and under CI=true fail instead."""
    import kuberay_harness as kh

    missing = kh.prerequisites()
    if missing:
        needs.missing("the KubeRay harness needs " + ", ".join(missing))

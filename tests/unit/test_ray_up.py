"""scripts/ray_up.py, ray-up's Python half: the head's formation poll and a worker's wait for the head,
against a scripted GCS and a clock that moves only when the code sleeps; its command line; and the
private Ray internals it uses, checked against the pinned Ray. tests/bats/ray-up.bats runs it for
real on network-namespace nodes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ray_up.py"
spec = importlib.util.spec_from_file_location("ray_up", SCRIPT)
ray_up = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ray_up)

ALIVE, DEAD = 0, 1


def node(ip: str, cpus: float = 1, gpus: float = 0, head: bool = False, state: int = ALIVE):
    resources = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
    return SimpleNamespace(node_manager_address=ip, resources_total=resources, is_head_node=head, state=state)


class Clock:
    """Time moves only when the code under test sleeps."""

    def __init__(self, t: float = 1000.0):
        self.t = t
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        assert s >= 0
        self.sleeps.append(s)
        self.t += s


class Script:
    """A GCS that answers each node-table request with the next entry: a list of nodes, or an
    exception to raise; the last entry repeats. `port` says whether anything listens yet."""

    def __init__(self, *answers, port=lambda: True):
        self.answers, self.port, self.connects, self.asked = list(answers), port, 0, 0

    def ray(self):
        return ray_up.Ray(connect=self.connect, alive=ALIVE, cli=None)

    def connect(self, address):
        self.connects += 1
        return self

    def get_all_node_info(self, timeout):
        assert timeout == ray_up.RPC_S
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return {i: n for i, n in enumerate(answer)}

    def gcs(self):
        return ray_up.Gcs("10.0.0.1", 6379, self.ray(), port_open=lambda host, port: self.port())


def formed(script, want=(2, 0, 2), deadline_s=10.0, ips=("10.0.0.1", "10.0.0.2"), clock=None):
    clock = clock or Clock()
    rc = ray_up.wait_formed(script.gcs(), ray_up.Totals(*want), clock() + deadline_s, list(ips), clock() - 1.0,
                            clock=clock, sleep=clock.sleep)
    return rc, clock


# ---------------------------------------------------------------- the head's formation poll


def test_formed_prints_the_totals_once_every_node_is_alive(capsys):
    script = Script([node("10.0.0.1", head=True)], [node("10.0.0.1", head=True), node("10.0.0.2", state=DEAD)],
                    [node("10.0.0.1", head=True), node("10.0.0.2")])
    rc, clock = formed(script)
    out, err = capsys.readouterr()
    assert rc == 0 and out == "2 0 2\n"
    # Each change is said once (a dead node is no node), with the time against the deadline.
    assert err.splitlines() == ["ray-up: 1/2 nodes joined, 0 GPUs, 1 CPUs registered (at 1.0 s of 11 s)",
                                "ray-up: 2/2 nodes joined, 0 GPUs, 2 CPUs registered (at 2.0 s of 11 s)"]
    assert clock.sleeps == [ray_up.POLL_S, ray_up.POLL_S]  # about twice a second, no longer
    assert script.connects == 1


def test_a_long_wait_says_the_state_again_every_30_s(capsys):
    rc, _ = formed(Script([node("10.0.0.1", head=True)]), deadline_s=70.0)
    err = capsys.readouterr().err
    assert rc == 3
    assert [line.split("(at ")[1] for line in err.splitlines() if "nodes joined" in line] == [
        "1.0 s of 71 s)", "31.0 s of 71 s)", "61.0 s of 71 s)"]


def test_a_node_missing_at_the_deadline_is_exit_3_naming_how_many_and_which(capsys):
    script = Script([node("10.0.0.1", cpus=2, head=True), node("10.0.0.2", cpus=2)])
    rc, clock = formed(script, want=(3, 2, 5), deadline_s=4.0, ips=("10.0.0.1", "10.0.0.2", "10.0.0.3"))
    err = capsys.readouterr().err
    assert rc == 3 and clock.t == 1004.0  # by the deadline, not after it
    assert err.splitlines()[-1] == ("ray-up: 1 of 3 nodes missing (2 registered); not joined: 10.0.0.3; "
                                    "rank(s) 2 never arrived; GPUs 0/2, CPUs 4/5")


def test_gpus_count_and_a_cluster_with_enough_is_formed(capsys):
    script = Script([node("10.0.0.1", gpus=8, head=True), node("10.0.0.2", gpus=8)])
    rc, _ = formed(script, want=(2, 16, 0))
    assert rc == 0 and capsys.readouterr().out == "2 16 2\n"


def test_a_gcs_that_never_answers_is_exit_3_with_its_error(capsys):
    rc, _ = formed(Script(RuntimeError("GCS not ready")), deadline_s=2.0)
    err = capsys.readouterr().err
    assert rc == 3
    assert err.splitlines() == ["ray-up: the head's GCS 10.0.0.1:6379 never answered (GCS not ready)"]


def test_a_closed_port_is_no_connection_attempt(capsys):
    script = Script([node("10.0.0.1", head=True)], port=lambda: False)
    rc, _ = formed(script, deadline_s=2.0)
    assert rc == 3 and script.connects == 0
    assert "never answered" in capsys.readouterr().err


def test_an_error_drops_the_connection_and_the_next_poll_connects_again(capsys):
    both = [node("10.0.0.1", head=True), node("10.0.0.2")]
    script = Script(RuntimeError("starting"), both)
    rc, _ = formed(script)
    assert rc == 0 and script.connects == 2


# ---------------------------------------------------------------- a worker's wait for the head


def waited(script, deadline_s=5.0):
    clock = Clock()
    gcs = script.gcs()
    return ray_up.wait_head(gcs, clock() + deadline_s, clock=clock, sleep=clock.sleep), clock


def test_the_worker_waits_for_the_heads_raylet_not_for_any_node(capsys):
    script = Script([], [node("10.0.0.3")], [node("10.0.0.1", head=True, state=DEAD)], [node("10.0.0.1", head=True)])
    rc, clock = waited(script)
    assert rc == 0 and script.asked == 4
    assert clock.sleeps == [ray_up.JOIN_POLL_S] * 3  # 0.2 s: within a fraction of a second of the head
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("port, what", [(False, "was not reachable"), (True, "did not register its raylet")])
def test_no_head_by_the_deadline_is_exit_3_saying_what_was_missing(capsys, port, what):
    rc, clock = waited(Script([], port=lambda: port), deadline_s=1.0)
    assert rc == 3 and clock.t == pytest.approx(1001.0)
    assert capsys.readouterr().err == f"ray-up: the head 10.0.0.1:6379 {what} before the deadline\n"


def joined(script, cli, deadline_s=300.0, running=lambda: True):
    clock = Clock()
    ray = ray_up.Ray(connect=script.connect, alive=ALIVE, cli=cli)
    gcs = ray_up.Gcs("10.0.0.1", 6379, ray, port_open=lambda host, port: True)
    return ray_up.join(gcs, ray, ["--address=10.0.0.1:6379", "--node-ip-address=10.0.0.2"], clock() + deadline_s,
                       clock=clock, sleep=clock.sleep, running=running), clock


def gave_up():
    raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                    "failed to startup or the GCS has become overloaded.")


def test_a_raylet_registering_after_ray_starts_own_30_s_is_joined(capsys):
    # Eight nodes starting at once on two cores: `ray start` gives up, its raylet registers 40 s later.
    script = Script(*[[node("10.0.0.1", head=True)]] * 200, [node("10.0.0.1", head=True), node("10.0.0.2")])
    rc, clock = joined(script, gave_up)
    assert rc == 0 and clock.t == pytest.approx(1040.0)
    err = capsys.readouterr().err
    assert "gave up after Ray's 30 s wait for this node's raylet (10.0.0.2); waiting up to 90 s" in err
    assert "the raylet of 10.0.0.2 registered 40.0 s later: joined" in err


def test_a_raylet_that_never_registers_fails_after_late_s_and_other_failures_at_once(capsys):
    rc, clock = joined(Script([node("10.0.0.1", head=True)]), gave_up)
    assert rc == 1 and clock.t == pytest.approx(1000.0 + ray_up.LATE_S)
    assert "did not register within 90 s" in capsys.readouterr().err

    def exits(code):
        def cli():
            raise SystemExit(code)
        return cli

    assert joined(Script([]), exits(1))[0] == 1 and joined(Script([]), exits(None))[0] == 0
    # A raylet that crashed (it waited for its agents too long) is not waited for.
    rc, clock = joined(Script([node("10.0.0.1", head=True)]), gave_up, running=lambda: False)
    assert rc == 1 and clock.t == 1000.0 and "(it exited: see its raylet.out)" in capsys.readouterr().err
    with pytest.raises(ValueError):  # anything but Ray's startup timeout is not waited out
        joined(Script([]), lambda: (_ for _ in ()).throw(ValueError("bad")))


# ---------------------------------------------------------------- the command line


def run(*args: str, python: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(python or [sys.executable]), str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("args", [[], ["cluster", "h", "1"], ["cluster", "h", "x", "1", "0", "0", "9", "", "0"],
                                  ["join", "h", "6379", "9", "--frob"], ["status"]])
def test_bad_arguments_are_exit_2_with_the_usage(args):
    result = run(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ray_up.py: bad arguments") and "cluster HOST PORT NODES" in result.stderr


@pytest.mark.parametrize("mode, args, what", [
    ("join", ["10.9.9.9", "6379", "1e12", "--", "--address=10.9.9.9:6379"], "CLI"),
    ("cluster", ["10.9.9.9", "6379", "1", "0", "0", "1e12", "", "0"], "GCS client")])
def test_a_python_without_ray_is_exit_5_at_once_naming_itself(mode, args, what):
    result = run(mode, *args, python=[sys.executable, "-I", "-S"])  # no site-packages: no ray
    assert result.returncode == 5, result.stderr
    assert result.stderr.startswith(f"ray-up: {sys.executable} cannot use Ray's {what}: No module named 'ray'")


def test_raylet_running_sees_only_a_live_child_named_raylet(tmp_path):
    assert ray_up.raylet_running() is False  # pytest starts no raylet
    raylet = tmp_path / "raylet"
    raylet.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(raylet), "30"])
    try:
        assert ray_up.raylet_running() is True
    finally:
        child.kill()
        child.wait()
    assert ray_up.raylet_running() is False


def test_it_needs_only_the_standard_library_to_start():
    result = run("--help", python=[sys.executable, "-I", "-S"])
    assert result.returncode == 2 and "Traceback" not in result.stderr


# ---------------------------------------------------------------- the pinned Ray


def test_the_pinned_ray_has_the_internals_ray_up_uses():
    """A Ray pin bump that moves the private GCS client or the node table fails here, not at a
    launch's deadline."""
    import ray
    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    sys.path.insert(0, str(ROOT / "tools"))
    from rlaunch.config import pins

    assert ray.__version__ == pins.get_str("ray", pins.load_versions(ROOT / "configs" / "versions.yaml"))
    loaded = ray_up.load_ray(with_cli=True)
    assert loaded.alive == GcsNodeInfo.GcsNodeState.Value("ALIVE") and callable(loaded.cli)
    fields = {f.name for f in GcsNodeInfo.DESCRIPTOR.fields}
    assert {"state", "resources_total", "node_manager_address", "is_head_node"} <= fields
    from ray._raylet import InnerGcsClient

    # join waits out a raylet that registers after `ray start`'s own 30 s: the message it knows that by.
    import ray._private.node as ray_node

    assert ray_up.STARTUP_TIMEOUT in Path(ray_node.__file__).read_text()
    doc = InnerGcsClient.standalone.__doc__ + InnerGcsClient.get_all_node_info.__doc__
    assert "standalone(unicode gcs_address: str, cluster_id: Optional[str], int timeout_ms: int)" in doc
    assert "Dict[NodeID, gcs_pb2.GcsNodeInfo]" in doc

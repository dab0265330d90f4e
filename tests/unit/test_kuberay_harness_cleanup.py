"""A KubeRay harness run killed mid-run leaves nothing behind: SIGTERM unwinds it (its pods'
processes, namespaces, iptables rules inside them, host links and its record all gone), and after a
SIGKILL, where nothing could run, the next harness run of this checkout sweeps what the first left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import needs
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import kuberay_harness as kh  # noqa: E402 - tests/, just put on the path

# A harness run stopped mid-run: its network up, a pod namespace with the Services' iptables rules
# and a process running in it, as a RayJob's pods have.
CHILD = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    sys.path[:0] = [{tests!r}, {tools!r}]
    import kuberay_harness as kh

    with kh.RayJobRun([], workdir=Path(sys.argv[1]), images={{}}) as run:
        ns = f"{{run.net.tag}}-p0"
        run.net.add_namespace(ns, run.net.pod_ip())
        run.net.set_services(ns, {{"svc": (run.net.service_ip(), "10.0.0.1", {{"gcs": 6379}})}})
        sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])
        print(run.net.tag, sleeper.pid, flush=True)
        time.sleep(600)
""").format(tests=str(ROOT / "tests"), tools=str(ROOT / "tools"))


def start(tmp_path: Path, name: str) -> tuple[subprocess.Popen, str, int]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / name)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline().split()
    assert len(line) == 2, child.stderr.read() if child.poll() is not None else "no tag line"
    return child, line[0], int(line[1])


def left_of(tag: str, pid: int) -> list[str]:
    """Whatever of the run tagged `tag` this host still has."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.split("\n")
    left = [line.split()[0] for line in namespaces if line.startswith(f"{tag}-")]
    left += [line.split(":")[1].strip().split("@")[0] for line in links
             if line.count(":") > 1 and line.split(":")[1].strip().startswith(tag)]
    if (kh.STATE_DIR / f"{tag}.json").exists():
        left.append(f"record {tag}.json")
    try:  # a zombie (killed, its parent gone, not yet reaped by init) runs nothing
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            left.append(f"process {pid}")
    except OSError:
        pass
    return left


@pytest.mark.cluster
def test_a_killed_harness_leaves_nothing(tmp_path):
    missing = kh.prerequisites()
    if missing:
        needs.missing("the KubeRay harness runs pods in network namespaces; missing: " + ", ".join(missing))
    child, tag, sleeper = start(tmp_path, "term")
    assert len(left_of(tag, sleeper)) >= 4  # the pod and operator namespaces, the links, the record
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=120) == 128 + signal.SIGTERM, child.stderr.read()
    assert left_of(tag, sleeper) == []

    # SIGKILL: nothing of the harness runs; the next run's sweep removes it, and only it.
    killed, tag, sleeper = start(tmp_path, "kill")
    killed.kill()
    killed.wait(timeout=30)
    assert left_of(tag, sleeper)
    again, tag_again, sleeper_again = start(tmp_path, "again")
    try:
        assert left_of(tag, sleeper) == []
        assert len(left_of(tag_again, sleeper_again)) >= 4  # a live run's own things are not swept
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=120)
    assert left_of(tag_again, sleeper_again) == []
    assert os.geteuid() == 0

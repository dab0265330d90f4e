"""Looking at real runs: progress on a terminal (tmux) and in a pipe, the dashboard forwarded to the
host, TensorBoard over two runs' events, and `make compare` of two rehearsals.

Two runs: the session's rehearsal (launched through a pipe, tests/e2e/conftest.py) and a second,
shorter one with another learning rate, launched by typing `make launch` into a tmux pane (a real
TTY). Its cluster stays up until this module ends, for the dashboard test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from e2e_support import ROOT, make
from needs import missing

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

TTY_STEPS = 120
TTY_SET = f"train.steps={TTY_STEPS} algo.lr=0.001"
URL = re.compile(r"open (http://127\.0\.0\.1:\d+)")
BAR = re.compile(rf"^training .*\b(\d+)/{TTY_STEPS} reward \S+  \S+ s/step  ETA ", re.M)


def need(tool: str) -> str:
    found = shutil.which(tool)
    if found:
        return found
    missing(f"needs {tool} (apt-get install {tool}; .ci/run installs it)")


def run_dir(run_id: str) -> Path:
    return ROOT / "build" / "storage" / "runs" / "rehearsal" / run_id


def rewards(run_id: str) -> list[float]:
    rows = [json.loads(line) for line in (run_dir(run_id) / "metrics.jsonl").read_text().splitlines()]
    return [r["reward"] for r in rows]


def ray_version(url: str) -> str:
    """The Ray version the dashboard at url reports; "" when it is not a Ray dashboard that answers."""
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=5) as resp:
            return json.loads(resp.read()).get("ray_version", "")
    except (OSError, ValueError, AttributeError):
        return ""


class Tmux:
    """A tmux server of our own (-L), one 200x50 pane running bash; nothing shared with anyone's."""

    def __init__(self, name: str, tmp: Path):
        self.base = [need("tmux"), "-L", name, "-f", "/dev/null"]
        self.raw = tmp / "pane.raw"
        subprocess.run([*self.base, "new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
                        "-c", str(ROOT), "bash --norc --noprofile"], check=True,
                       env={**os.environ, "TERM": "xterm-256color"})
        # Every byte the pane gets (carriage returns and cursor moves included), for the record.
        self.tmux("pipe-pane", "-t", "t", "-o", f"cat >> {self.raw}")

    def tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True, text=True).stdout

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def history(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t", "-S", "-", "-E", "-")

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], check=False, capture_output=True)


@pytest.fixture(scope="module")
def tty_run(tmp_path_factory):
    """`make launch` typed into a tmux pane; screens captured twice a second while it runs."""
    if os.geteuid() != 0:
        missing("the 2-node rehearsal needs root for network namespaces")
    tmp = tmp_path_factory.mktemp("tty")
    run_id = f"e2e-tty-{os.getpid()}"
    rc_file = tmp / "rc"
    pane = Tmux(f"rlaunch-obs-{os.getpid()}", tmp)
    screens = []
    try:
        pane.type(f"make launch RUN_ID={run_id} SET='{TTY_SET}'; echo $? > {rc_file}")
        deadline = time.monotonic() + 600
        while not rc_file.exists() and time.monotonic() < deadline:
            screens.append(pane.screen())
            time.sleep(0.5)
        assert rc_file.exists(), "make launch in tmux did not finish in 600 s:\n" + pane.screen()
        history = pane.history()
        (tmp / "screens.txt").write_text("\n=====\n".join(screens))  # to look at after a failure
        (tmp / "history.txt").write_text(history)
        yield {"run_id": run_id, "rc": int(rc_file.read_text()), "screens": screens,
               "history": history, "raw": pane.raw.read_bytes()}
    finally:
        pane.close()
        make("down", "INFRA=local", f"RUN_ID={run_id}", timeout=120)


def interruptible() -> None:
    """In the child: SIGINT back to its default, which a test runner started in the background
    (`cmd &`, a CI step) hands down as ignored, so the killpg(SIGINT) below would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.full  # the second run, typed into a terminal
def test_tty_shows_formation_then_one_live_training_line(tty_run):
    history, screens = tty_run["history"], tty_run["screens"]
    assert tty_run["rc"] in (0, 1, 2), history[-3000:]  # a run that did not learn enough is fine here
    # Formation: nodes joined out of expected, elapsed against the deadline (10m00s by default).
    name = re.escape(tty_run["run_id"])  # the local cluster is named after the run
    assert re.search(rf"cluster {name}: 2/2 nodes joined \(\d+ s of 10m00s\)", history), history[:3000]
    # While training, the screen held one progress line, and it moved.
    live = [BAR.findall(s) for s in screens if BAR.search(s)]
    assert live, "no live training line on any screen:\n" + "\n---\n".join(screens[-5:])
    assert all(len(found) == 1 for found in live), [f for f in live if len(f) != 1][:3]
    assert len({found[0] for found in live}) >= 2, live
    # Afterwards: one finished bar, and none of the plain `step N/T` lines a pipe gets.
    assert len(BAR.findall(history)) == 1, history
    assert BAR.findall(history)[0] == str(TTY_STEPS)
    assert not re.search(rf"^step \d+/{TTY_STEPS} ", history, re.M), history
    # It was redrawn in place: carriage returns and erase-line in what the pane received.
    assert b"\r\x1b[2K" in tty_run["raw"]


def test_pipe_gets_plain_progress_lines(rehearsal):
    _, name, proc, _ = rehearsal
    out, name = proc.stdout, re.escape(name)
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert re.search(rf"^cluster {name}: starting Ray on 2 node\(s\) \(0 s of 10m00s\)$", out, re.M), out[:3000]
    assert re.search(rf"^cluster {name}: 2/2 nodes joined \(\d+ s of 10m00s\)$", out, re.M), out[:3000]
    steps = re.findall(r"^step (\d+)/300 reward \S+ .* \| \S+ s/step, ETA .+$", out, re.M)
    assert steps[-1] == "300" and len(steps) >= 20, steps  # every 10 steps, as plain lines
    assert "\r" not in out and "\x1b[2K" not in out and "\x1b[?25l" not in out


@pytest.mark.full  # the second run, typed into a terminal
def test_dashboard_forward_opens_from_the_host(tty_run):
    run_id = tty_run["run_id"]
    info = json.loads((ROOT / "build" / run_id / "cluster" / "cluster.json").read_text())
    # The nodes are not on the host's network: from the host, the head's own address does not lead
    # to the dashboard (the connection fails, or something else on the default route answers).
    assert not ray_version(f"http://{info['head_ip']}:{info['dashboard_port']}")
    proc = subprocess.Popen(["make", "dashboard", f"RUN_ID={run_id}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=interruptible)
    try:
        first = proc.stdout.readline()
        match = URL.search(first)
        assert match, first + (proc.stdout.read() if proc.poll() is not None else "")
        url = match.group(1)
        from rlaunch.config import pins

        assert ray_version(url) == pins.get("ray")
        with urllib.request.urlopen(f"{url}/api/cluster_status", timeout=20) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(f"{url}/", timeout=10) as resp:  # the dashboard's page itself
            assert b"<html" in resp.read().lower()
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does to the foreground job
        rest, _ = proc.communicate(timeout=30)
    assert "forward stopped" in rest, rest
    with pytest.raises(OSError):  # the port is closed again
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=2).close()


@pytest.mark.full  # the second run, typed into a terminal
def test_tensorboard_serves_both_runs_reward_scalars(rehearsal, tty_run):
    first, second = rehearsal[0], tty_run["run_id"]
    proc = subprocess.Popen(["make", "tensorboard", f"RUNS={first} {second}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=interruptible)
    seen = ""
    try:
        while (line := proc.stdout.readline()) and not URL.search(line):
            seen += line
        match = URL.search(line)
        assert match, seen
        url = match.group(1)
        with urllib.request.urlopen(f"{url}/data/runs", timeout=30) as resp:
            assert sorted(json.loads(resp.read())) == sorted([first, second])  # side by side, by run id
        for run_id in (first, second):
            query = f"{url}/data/plugin/scalars/scalars?tag=train/reward&run={run_id}"
            with urllib.request.urlopen(query, timeout=30) as resp:
                points = json.loads(resp.read())  # [[wall_time, step, value], ...]
            assert [p[1] for p in points] == list(range(1, len(rewards(run_id)) + 1))
            assert [p[2] for p in points] == pytest.approx(rewards(run_id), abs=1e-6)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)


@pytest.mark.full  # the second run, typed into a terminal
def test_compare_draws_both_runs_and_tables_them(rehearsal, tty_run, tmp_path):
    first, second = rehearsal[0], tty_run["run_id"]
    png = tmp_path / "compare.png"
    proc = make("compare", f"RUNS={first} {second}", f"OUT={png}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith((first, second))}
    assert re.search(r"^\S+\s+300/300\s+0\.\d\d -> \d\.\d\d\s+passed\s+\d+", rows[first]), rows
    assert re.search(r"^\S+\s+120/120\s+0\.\d\d -> \d\.\d\d\s+(passed|FAILED: \S.*)\s+\d+", rows[second]), rows
    # The differing config: exactly what SET changed (and nothing of run ids or paths).
    config = proc.stdout.split("\nconfig ", 1)[1].split("\ncompare: ")[0].splitlines()
    keys = sorted(line.split()[0] for line in config[2:] if line.strip())
    assert keys == ["algo.lr", "train.steps"], config
    # Two curves: the first two colours of the cycle, drawn in quantity.
    from matplotlib import image

    pixels = image.imread(png)[:, :, :3]
    for hex_color in ("#1f77b4", "#ff7f0e"):
        rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        near = (abs(pixels - rgb).sum(axis=2) < 0.05).sum()
        assert near > 500, (hex_color, near)

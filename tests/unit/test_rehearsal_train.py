"""The rehearsal's job driver: config validation (settings), progress and summary helpers, the plot,
and a real end-to-end run on a 2-node Ray cluster on loopback (own ports, own temp dirs, own sessions)."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlaunch.rehearsal import layout, plot, settings, train

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Ray 2.60 turns token auth on wherever ~/.ray/auth_token exists, so a head could demand a token
# its own workers never send; every process of the test cluster agrees on no auth.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_DISABLE_USAGE_STATS": "1"}


def run_main(tmp_path, raw, capsys) -> tuple[int, str]:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(SystemExit) as exc:
        train.main(["--config", str(path)])
    return exc.value.code, capsys.readouterr().err


# ---------------------------------------------------------------- config


def test_defaults_are_the_measured_recipe(tmp_path):
    cfg = settings.parse_config({"run_dir": str(tmp_path)})
    assert (cfg.num_workers, cfg.group_size, cfg.max_completion_length, cfg.use_gpu) == (2, 8, 6, False)
    assert cfg.per_device_batch * cfg.num_workers == 64  # 8 prompts x 8 completions per step


def test_json_ints_are_accepted_for_float_keys(tmp_path):
    cfg = settings.parse_config({"run_dir": str(tmp_path), "learning_rate": 1, "node_wait_s": 5})
    assert cfg.learning_rate == 1.0 and isinstance(cfg.learning_rate, float)


@pytest.mark.parametrize(("raw", "message"), [
    ({"stpes": 3}, "stpes: unknown key; allowed: run_dir, num_workers"),
    ({}, None),  # filled below: run_dir missing
    ({"steps": True}, "steps=True: expected int"),
    ({"steps": "300"}, "steps='300': expected int"),
    ({"use_gpu": 1}, "use_gpu=1: expected bool"),
    ({"learning_rate": "3e-3"}, "learning_rate='3e-3': expected float"),
    ({"steps": 0}, "steps=0: must be >= 1"),
    ({"group_size": 1}, "group_size=1: must be >= 2"),
    ({"group_size": 6}, "group_size=6: must divide per_device_batch x num_workers = 64"),
    ({"learning_rate": -0.1}, "learning_rate=-0.1: must be a finite number > 0"),
    ({"lr_scheduler": "step"}, "lr_scheduler='step': allowed constant, linear, cosine"),
])
def test_bad_values_name_key_value_and_what_is_allowed(tmp_path, raw, message):
    full = {"run_dir": str(tmp_path), **raw} if raw else {}
    with pytest.raises(settings.ConfigError) as err:
        settings.parse_config(full)
    assert str(err.value).startswith(message or "run_dir: required")


def test_relative_run_dir_is_rejected():
    with pytest.raises(settings.ConfigError, match="run_dir='runs/x': must be an absolute path"):
        settings.parse_config({"run_dir": "runs/x"})


def test_bad_config_exits_2_before_touching_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(train, "run", lambda cfg: pytest.fail("run() reached with a bad config"))
    code, err = run_main(tmp_path, {"run_dir": str(tmp_path), "seeds": 1}, capsys)
    assert code == 2
    assert err.startswith("rlaunch.rehearsal.train: seeds: unknown key")


def test_unreadable_config_exits_2(tmp_path, capsys):
    (tmp_path / "cfg.json").write_text("{not json")
    with pytest.raises(SystemExit) as exc:
        train.main(["--config", str(tmp_path / "cfg.json")])
    assert exc.value.code == 2
    assert "cannot read JSON" in capsys.readouterr().err


def test_annotation_keys_are_skipped_when_loading(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"_generated_by": "rlaunch", "run_dir": str(tmp_path), "steps": 7}))
    assert settings.load_config(str(path)).steps == 7


# ---------------------------------------------------------------- driver helpers


def write_metrics(run_dir: Path, rewards: list[float], tail: str = "") -> None:
    lines = [json.dumps({"step": i + 1, "reward": r, "loss": 0.1, "grad_norm": 1.0, "lr": 3e-3,
                         "time_s": float(i)}) for i, r in enumerate(rewards)]
    (run_dir / layout.METRICS).write_text("\n".join(lines) + "\n" + tail)


def test_read_metrics_skips_a_half_written_line(tmp_path):
    write_metrics(tmp_path, [0.1, 0.2], tail='{"step": 3, "rew')
    assert [r["step"] for r in train.read_metrics(tmp_path)] == [1, 2]


def test_summary_means_first_and_last_tenth(tmp_path):
    write_metrics(tmp_path, [0.0] * 10 + [0.5] * 80 + [1.0] * 10)
    (tmp_path / "ray-train").mkdir()
    (tmp_path / layout.WORKERS).write_text(json.dumps(
        {"worker_nodes": ["10.0.0.1", "10.0.0.2"], "worker_node_ids": ["a", "b"], "backend": "gloo"}))
    cfg = settings.parse_config({"run_dir": str(tmp_path), "steps": 100})
    summary = train.summarize(cfg, 12.34)
    assert summary == {
        "steps": 100, "target_steps": 100, "num_workers": 2,
        "worker_nodes": ["10.0.0.1", "10.0.0.2"], "worker_node_ids": ["a", "b"], "backend": "gloo",
        "reward_first": 0.0, "reward_last": 1.0, "duration_s": 12.3,
    }


def test_progress_line_is_short_and_survives_missing_values():
    line = train.progress_line({"step": 40, "reward": 0.625, "loss": None, "grad_norm": 0.5,
                                "time_s": 12.0}, 300)
    assert line == "step 40/300 reward 0.625 loss nan grad_norm 0.5 t 12s"


def test_clear_outputs_removes_only_the_trainers_files(tmp_path):
    for name in (layout.METRICS, layout.EVAL, "preflight.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / layout.FINAL_CHECKPOINT).mkdir(parents=True)
    train.clear_outputs(tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["checkpoint", "preflight.json"]


def test_plot_writes_a_png(tmp_path):
    write_metrics(tmp_path, [i / 50 for i in range(50)])
    out = plot.plot_reward(tmp_path / layout.METRICS, tmp_path / "reward.png")
    assert out.read_bytes()[:8] == PNG_MAGIC


# ---------------------------------------------------------------- a real Ray cluster


def _stat(pid) -> list[str]:
    # Fields after "(comm)": state ppid pgrp session ...; comm itself may hold spaces.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _zombie(pid: int) -> bool:
    try:
        return _stat(pid)[0] == "Z"  # gone, only not yet reaped
    except OSError:
        return True


def _session_pids(sid: int, with_parent: bool = False) -> list:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(entry.name)
        except OSError:  # exited meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pid = int(entry.name)
            found.append((pid, int(fields[1])) if with_parent else pid)
    return found


class LoopbackCluster:
    """Ray nodes on 127.0.0.1, each `ray start` in a session of its own, so teardown signals
    exactly the processes this test started (never `ray stop`, which kills every Ray here)."""

    def __init__(self, root: Path):
        self.root = root
        self.sessions: list[int] = []
        # Below Linux's ephemeral range (32768+), above Ray's default worker ports (10002-19999) and
        # local-cluster's loopback GCS/dashboard ports (20000-27999): 100 ports per test cluster.
        base = random.Random().randrange(28000, 32700, 100)
        self.ports = iter(range(base, base + 100))
        self.gcs_port = next(self.ports)

    def _node_args(self, rank: int) -> list[str]:
        temp_dir = self.root / f"n{rank}"  # short: unix socket paths have a length limit
        workers = [next(self.ports) for _ in range(30)]
        return [
            "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--num-cpus=1",
            "--object-store-memory=80000000", "--disable-usage-stats",
            f"--node-manager-port={next(self.ports)}", f"--object-manager-port={next(self.ports)}",
            f"--metrics-export-port={next(self.ports)}", f"--runtime-env-agent-port={next(self.ports)}",
            f"--dashboard-agent-listen-port={next(self.ports)}",
            f"--dashboard-agent-grpc-port={next(self.ports)}",
            f"--min-worker-port={workers[0]}", f"--max-worker-port={workers[-1]}",
        ]

    def start(self, nodes: int) -> None:
        head = ["--head", f"--port={self.gcs_port}", "--include-dashboard=true",
                "--dashboard-host=127.0.0.1", f"--dashboard-port={next(self.ports)}",
                f"--ray-client-server-port={next(self.ports)}"]
        for rank in range(nodes):
            extra = head if rank == 0 else [f"--address=127.0.0.1:{self.gcs_port}"]
            proc = subprocess.Popen([str(RAY), "start", *extra, *self._node_args(rank)],
                                    env={**os.environ, **RAY_ENV}, start_new_session=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.sessions.append(proc.pid)
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"ray start (node {rank}) failed:\n{out}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def stop(self, grace_s: float = 5.0) -> None:
        """TERM, then KILL after a short grace: the GCS server ignores TERM for 20 s and more."""
        def carries_root(pid: int) -> bool:
            try:
                return str(self.root).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:  # exited meanwhile
                return False

        # Linux never reuses a session id that a live process still holds, so a session with one
        # member naming our temp dir is ours, members and all (ray::DashboardAgent and others
        # rewrite their command line). Later, only those members and their children are signalled.
        known: set[int] = set()
        for sid in self.sessions:
            members = _session_pids(sid)
            if any(carries_root(pid) for pid in members):
                known.update(members)

        def ours() -> list[int]:
            for sid in self.sessions:
                for pid, ppid in _session_pids(sid, with_parent=True):
                    if ppid in known:
                        known.add(pid)
            return [pid for pid in known if Path(f"/proc/{pid}").exists() and not _zombie(pid)]

        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in ours():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_s
            while ours() and time.monotonic() < deadline:
                time.sleep(0.2)
            if not ours():
                return
        pytest.fail(f"processes of the test cluster survived SIGKILL: {ours()}")


@pytest.fixture(scope="module")
def two_nodes():
    # /tmp, not pytest's tmp_path: Ray's socket paths under the temp dir must stay short.
    root = Path(f"/tmp/rh{os.getpid()}")
    cluster = LoopbackCluster(root)
    try:
        cluster.start(2)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def run_driver(cluster: LoopbackCluster, cfg_path: Path, timeout: int = 240):
    env = {**os.environ, **RAY_ENV, "RAY_ADDRESS": cluster.address, "GLOO_SOCKET_IFNAME": "lo",
           "PYTHONPATH": str(ROOT / "tools")}
    return subprocess.run([sys.executable, "-m", "rlaunch.rehearsal.train", "--config", str(cfg_path)],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.cluster
def test_too_few_nodes_exits_2_naming_the_shortfall(two_nodes, tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"run_dir": str(tmp_path / "run"), "num_workers": 4,
                               "per_device_batch": 8, "node_wait_s": 2}))
    proc = run_driver(two_nodes, cfg, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "num_workers=4 needs that many Ray nodes" in proc.stderr
    assert "2 after 2 s" in proc.stderr


@pytest.mark.cluster
@pytest.mark.full  # the trainer on two nodes: e2e/test_rehearsal runs it through make launch
def test_end_to_end_on_two_nodes_writes_every_output(two_nodes, tmp_path):
    run_dir = tmp_path / "run"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"_generated_by": "test", "run_dir": str(run_dir), "num_workers": 2,
                               "steps": 4, "per_device_batch": 8, "eval_prompts": 3,
                               "progress_every": 2, "dataset_size": 64, "seed": 1}))
    proc = run_driver(two_nodes, cfg)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for row in rows:
        for key in ("reward", "loss", "grad_norm", "lr", "time_s"):
            assert isinstance(row[key], (int, float)) and math.isfinite(row[key]), (key, row)
        assert 0.0 <= row["reward"] <= 1.0 and row["lr"] > 0
    assert [r["time_s"] for r in rows] == sorted(r["time_s"] for r in rows)

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1, events  # rank 0 only
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    assert {"train/reward", "train/loss"} <= set(acc.Tags()["scalars"])
    assert len(acc.Scalars("train/reward")) == 4

    final = run_dir / "checkpoint" / "final"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (final / name).is_file(), name

    evaluation = json.loads((run_dir / "eval.json").read_text())
    assert evaluation["greedy_total"] == 3 and len(evaluation["examples"]) == 3
    assert set(evaluation["examples"][0]) == {"prompt", "completion", "correct"}

    assert (run_dir / "reward.png").read_bytes()[:8] == PNG_MAGIC

    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert (summary["steps"], summary["target_steps"], summary["num_workers"]) == (4, 4, 2)
    assert summary["backend"] == "gloo"
    # Both nodes registered this host's address (Ray resolves 127.0.0.1 to it); ids tell them apart.
    assert len(summary["worker_nodes"]) == 2 and len(set(summary["worker_nodes"])) == 1
    assert len(set(summary["worker_node_ids"])) == 2  # STRICT_SPREAD: one worker per Ray node
    assert summary["reward_first"] == rows[0]["reward"] and summary["reward_last"] == rows[-1]["reward"]
    assert summary["duration_s"] > 0

    progress = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in progress] == ["2/4", "4/4"]
    assert "done: 4/4 steps" in proc.stdout

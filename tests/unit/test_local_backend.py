"""The local backend's decisions that need no cluster: refusals, names, the job's environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.backends.local import backend as local
from rlaunch.backends.base import LaunchPlan
from rlaunch.errors import ConfigError, MissingPrerequisite


def spec(**knobs):
    return config.load("rehearsal", {"RUN_ID": "t-local", **knobs})


def test_multi_node_without_root_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(local, "_passwordless_sudo", lambda: False)
    with pytest.raises(MissingPrerequisite, match="NODES=1"):
        local.BACKEND.launch(LaunchPlan.render(spec(), tmp_path))


def test_multi_node_as_a_user_with_passwordless_sudo_goes_to_local_cluster(monkeypatch, tmp_path):
    # As on a GitHub-hosted runner: local-cluster makes the namespaces through sudo (tested for real
    # by tests/e2e/test_workflow_launch.py).
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(local, "_passwordless_sudo", lambda: True)
    formed = []
    monkeypatch.setattr(local.Local, "_form", lambda self, spec, out: formed.append(out) or 4)
    assert local.BACKEND.launch(LaunchPlan.render(spec(), tmp_path)) == 4  # `local-cluster up`'s exit, passed on
    assert formed == [tmp_path]


def test_gpu_preset_without_gpus_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(local.shutil, "which", lambda name: None if name == "nvidia-smi" else "/usr/bin/" + name)
    monkeypatch.setattr(local.os, "geteuid", lambda: 0)
    gpu = config.load("verl-ppo-gsm8k-0.5b", {"RUN_ID": "t-gpu", "INFRA": "local"})
    with pytest.raises(MissingPrerequisite, match="needs NVIDIA GPUs"):
        local.BACKEND.launch(LaunchPlan.render(gpu, tmp_path))


def test_cluster_names_are_the_run_id_stable_and_distinct():
    a, b = local.cluster_name("a"), local.cluster_name("b")
    assert a == local.cluster_name("a") and a != b
    # The run id itself, found again from the id alone. Only namespace names carry it (up to 255
    # bytes); the links inside the namespaces have fixed names (v<rank>, eth0, br0) within IFNAMSIZ.
    assert a == "a"
    assert local.cluster_name("x" * 40) == "x" * 40


@pytest.mark.parametrize(("mode", "ifname"), [("netns", "eth0"), ("loopback", "lo")])
def test_job_env_pins_gloo_interface_and_ray_address(mode, ifname):
    env = local._job_env(spec(), {"head_ip": "10.1.2.1", "ray_port": 6379, "mode": mode})
    assert env["GLOO_SOCKET_IFNAME"] == ifname
    assert env["RAY_ADDRESS"] == "10.1.2.1:6379"


def test_default_ports_are_left_to_local_cluster(tmp_path):
    env = local._cluster_env(spec(), tmp_path)
    assert "RLAUNCH_RAY_PORT" not in env and "RLAUNCH_DASHBOARD_PORT" not in env
    env = local._cluster_env(config.load("rehearsal", {"RUN_ID": "t"}, "cluster.ray_port=7000"), tmp_path)
    assert env["RLAUNCH_RAY_PORT"] == "7000"


# ---------------------------------------------------------------- a run id is used once (issue 18)


def claim_spec(tmp_path, **knobs):
    return config.load("rehearsal", {"RUN_ID": f"t-claim-{id(tmp_path) % 10**6}", "WORK_ROOT": str(tmp_path),
                                     **knobs})


def test_a_second_launch_of_a_running_run_id_is_refused_at_once(tmp_path):
    import fcntl

    s = claim_spec(tmp_path)
    with open(local.lock_path(s.run.id), "w") as held:  # another launch of it, running
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(local.RunInUse, match="another launch of it is running") as err:
            with local.BACKEND.claim(s):
                pass
        assert err.value.exit_code == 2 and "nothing was written" in str(err.value)
    with local.BACKEND.claim(s):  # released: the next one may run
        pass


def test_a_used_run_id_is_refused_unless_resume_and_resume_needs_the_same_config(tmp_path, monkeypatch):
    monkeypatch.setattr(local._Cluster, "up", lambda self: False)
    s = claim_spec(tmp_path)
    with pytest.raises(ConfigError, match="RESUME.*it never started"):
        with local.BACKEND.claim(s, resume=True):
            pass
    run_dir = Path(s.paths.run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(artifacts.spec_json(s))  # as the job keeps it
    with pytest.raises(ConfigError, match=r"already has .*RESUME=1` continues the run from step 0") as err:
        with local.BACKEND.claim(s):
            pass
    assert err.value.exit_code == 2
    with local.BACKEND.claim(s, resume=True):
        pass
    changed = config.load("rehearsal", {"RUN_ID": s.run.id, "WORK_ROOT": str(tmp_path)}, "train.steps=7")
    with pytest.raises(ConfigError, match="train.steps was 300, now 7"):
        with local.BACKEND.claim(changed, resume=True):
            pass


def test_resume_is_the_local_launchs_other_infrastructures_restart_runs_themselves():
    from rlaunch.registry import backends

    s = config.load("rehearsal", {"RUN_ID": "t-sky", "INFRA": "gcp", "SPOT": "1"})
    with pytest.raises(ConfigError, match="INFRA=local only; on gcp, a managed job"):
        with backends.get("gcp").claim(s, resume=True):
            pass

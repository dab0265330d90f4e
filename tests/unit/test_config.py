"""The layered config: merge order, knobs, overrides, and one clear error (exit 2) per bad input."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.config import load as config
from rlaunch.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def load(**kw):
    knobs = {k: v for k, v in kw.items() if k.isupper() and k not in ("PRESET", "SET")}
    return config.load(kw.get("PRESET", ""), knobs, kw.get("SET", ""))


def test_default_is_the_local_rehearsal():
    spec = load()
    assert spec.preset == "rehearsal"
    assert spec.infra.name == "local"
    assert spec.framework.name == "trl"
    assert spec.cluster.nodes == 2


def test_layers_apply_in_order_and_set_wins():
    spec = load(NODES="3", SET="cluster.nodes=4 train.steps=7")
    assert spec.cluster.nodes == 4  # SET beats the knob
    assert spec.train.steps == 7  # SET beats the preset (300)
    assert load(NODES="3").cluster.nodes == 3  # the knob beats the infra layer (2)


def test_numbers_and_booleans_from_text():
    spec = load(SET="algo.lr=1e-5", SPOT="1")
    assert spec.algo.lr == pytest.approx(1e-5)
    assert spec.infra.spot is True


def test_run_id_default_is_preset_and_utc_timestamp():
    now = dt.datetime(2026, 11, 29, 12, 0, 5, tzinfo=dt.timezone.utc)
    spec = config.load("", {}, "", now=now)
    assert spec.run.id == "rehearsal-20261129-120005"
    assert spec.run.out == str(ROOT / "build" / "rehearsal-20261129-120005")


def test_local_storage_is_under_the_repo_and_paths_derive_from_it():
    spec = load(RUN_ID="r1")
    mount = str(ROOT / "build" / "storage")
    assert spec.storage.mount == mount
    assert spec.paths.run_dir == f"{mount}/runs/rehearsal/r1"
    assert spec.paths.ckpt_dir == f"{mount}/runs/rehearsal/r1/checkpoints"


def test_pins_come_from_versions_yaml():
    from rlaunch.config import images
    from rlaunch.config import pins

    spec = load(RUN_ID="r1")
    assert spec.pins.ray == pins.get_str("ray")
    assert spec.pins.image == pins.get_str("images.trl.official")
    assert load(RUN_ID="r1", SET="framework.image=rlaunch").pins.image == images.rlaunch_ref("trl")


def test_model_and_data_live_under_their_pinned_revision(tmp_path, monkeypatch):
    import yaml

    spec = load(PRESET="verl-ppo-gsm8k-0.5b", INFRA="gcp", RUN_ID="r1")
    mount = spec.storage.mount
    assert spec.paths.model_dir == f"{mount}/models/qwen2.5-0.5b-instruct/7ae557604adf"
    assert spec.paths.data_dir == f"{mount}/data/gsm8k/cc7b047b6e5b"
    # A new pin means a new directory: the old copy would pass its own SHA256SUMS.
    versions = yaml.safe_load((ROOT / "configs" / "versions.yaml").read_text())
    versions["models"]["qwen2.5-0.5b-instruct"]["revision"] = "0123456789abcdef"
    (tmp_path / "versions.yaml").write_text(yaml.safe_dump(versions))
    monkeypatch.setenv("RLAUNCH_VERSIONS", str(tmp_path / "versions.yaml"))
    moved = load(PRESET="verl-ppo-gsm8k-0.5b", INFRA="gcp", RUN_ID="r1")
    assert moved.paths.model_dir == f"{mount}/models/qwen2.5-0.5b-instruct/0123456789ab"
    from rlaunch.registry import frameworks

    argv = frameworks.get("verl").command(moved)
    assert f"actor_rollout_ref.model.path={mount}/models/qwen2.5-0.5b-instruct/0123456789ab" in argv
    # Unpinned (the rehearsal's synthetic data): no revision level.
    rehearsal = load(RUN_ID="r1")
    assert rehearsal.paths.data_dir == f"{rehearsal.storage.mount}/data/digits"


BAD = [
    ({"NODES": "0"}, "cluster.nodes", "an integer >= 1"),
    ({"NODES": "two"}, "cluster.nodes", "an integer"),
    ({"INFRA": "gpc"}, "infra.name", "one of local, gcp"),
    ({"ALGO": "dpo"}, "algo.name", "one of grpo, ppo"),
    ({"FRAMEWORK": "openrlhf"}, "framework.name", "one of trl, verl"),
    ({"PRESET": "nope"}, "PRESET", "one of"),
    ({"SET": "cluster.nodez=3"}, "cluster.nodez", "did you mean 'cluster.nodes'"),
    ({"SET": "storage.mode=RW"}, "storage.mode", "MOUNT, COPY, MOUNT_CACHED"),
    ({"SET": "algo.lr=fast"}, "algo.lr", "a number"),
    ({"SET": "train.steps=-1"}, "train.steps", ">= 0"),
    ({"SET": "cluster=3"}, "cluster", "unknown key"),
    ({"SET": "nodes"}, "nodes", "dotted.key=value"),
    ({"SET": "secrets=[wandb-key-value]"}, "secrets", "names"),
    ({"SET": "framework.overrides=3"}, "framework.overrides", "a list of strings"),
    ({"GPUS_PER_NODE": "2"}, "cluster.accelerator", "a GPU type"),
    ({"RUN_ID": "Bad_ID"}, "run.id", "lower-case"),
    ({"SET": "storage.mount=/"}, "storage.mount", "absolute"),
    ({"INFRA": "gcp", "SET": "storage.mount=data"}, "storage.mount", "absolute"),
    ({"SET": "storage.bucket=b"}, "storage.store", "a store"),
    ({"SET": "rollout.gpu_memory_utilization=1.5"}, "rollout.gpu_memory_utilization", "<= 1"),
    ({"SET": "cluster.ray_port=70000"}, "cluster.ray_port", "<= 65535"),
    ({"SET": "infra.spot=maybe"}, "infra.spot", "true or false"),
]


@pytest.mark.parametrize(("kw", "key", "allowed"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_config_names_key_and_allowed(kw, key, allowed):
    with pytest.raises(ConfigError) as err:
        load(**kw)
    assert err.value.key == key
    assert allowed in str(err.value)


def test_error_names_where_the_value_came_from():
    with pytest.raises(ConfigError) as err:
        load(NODES="0")
    assert "(from NODES)" in str(err.value)


def test_unknown_key_in_a_layer_is_rejected(tmp_path, monkeypatch):
    bad = {"cluster": {"gpu_count": 2}}
    with pytest.raises(ConfigError, match="cluster.gpu_count"):
        config.validate(config.merge(config._read_layer(config.CONFIGS / "defaults.yaml"), bad))


@pytest.mark.parametrize("argv", [
    ["plan", "--NODES=0"],
    ["plan", "--INFRA=nowhere"],
    ["render", "--SET=cluster.nodez=3"],
    ["launch", "--PRESET=missing"],
    ["plan", "--BOGUS=1"],
])
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, argv):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rlaunch", *argv, f"--OUT={out}"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlaunch: config: "), proc.stderr
    assert not out.exists()


def test_every_preset_and_layer_file_validates():
    for preset in config.available("presets"):
        spec = config.load(preset, {"RUN_ID": "check"})
        assert spec.preset == preset

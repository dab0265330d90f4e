"""The RLinf adapter: one rendered YAML (placement keys with commas), seed 003's topology."""

from __future__ import annotations

import yaml

from rlaunch.plan import jobenv
from rlaunch.config import load as config
from rlaunch.registry import frameworks

PRESET = "rlinf-grpo-pipeline-1.5b"


def render(sets: list[str] = (), **knobs):
    spec = config.load(PRESET, knobs, list(sets))
    fw = frameworks.get("rlinf")
    fw.check(spec)
    return spec, fw, fw.command(spec), yaml.safe_load(fw.files(spec)["rlinf/rlaunch-grpo.yaml"])


def test_seed_003_placement_steps_and_save():
    spec, _, _, cfg = render()
    assert cfg["cluster"]["num_nodes"] == 2
    assert cfg["cluster"]["component_placement"] == {"rollout": "0", "inference": "1", "actor": "2-3",
                                                     "reward": "0"}
    assert cfg["runner"]["max_steps"] == 2 and cfg["runner"]["save_interval"] == 2


def test_command_uses_the_pinned_checkout_and_the_rendered_file():
    spec, _, argv, _ = render()
    commit = spec.pins.framework_commit
    assert argv == ["python", f"{spec.storage.mount}/code/checkouts/{commit}/examples/reasoning/main_grpo.py",
                    "--config-path", "${RLAUNCH_ARTIFACTS}/rlinf", "--config-name", "rlaunch-grpo"]


def test_outputs_land_in_the_run_dir():
    spec, _, _, cfg = render()
    run_dir = spec.paths.run_dir
    assert f"{cfg['runner']['output_dir']}/{cfg['runner']['experiment_name']}" == run_dir
    assert cfg["runner"]["logger"]["log_path"] == run_dir
    assert "tensorboard" in cfg["runner"]["logger"]["logger_backends"]
    assert cfg["hydra"]["run"]["dir"] == f"{run_dir}/hydra"


def test_comma_placement_goes_into_the_yaml():
    """The reason for the file: 'actor,rollout' cannot go on Hydra's command line."""
    spec = config.load(PRESET, {}, ["""framework.overrides=['cluster.component_placement={"actor,rollout": 0-3, reward: 0}']"""])
    cfg = yaml.safe_load(frameworks.get("rlinf").files(spec)["rlinf/rlaunch-grpo.yaml"])
    assert cfg["cluster"]["component_placement"] == {"actor,rollout": "0-3", "reward": 0}
    frameworks.get("rlinf").check(spec)


def test_no_rdma_disables_infiniband_and_scales():
    spec, fw, _, cfg = render(GPUS_PER_NODE="4")
    assert jobenv.job_env(spec)["NCCL_IB_DISABLE"] == "1"
    assert cfg["cluster"]["component_placement"]["actor"] == "4-7"
    spec, fw, _, _ = render(RDMA="1")
    assert "NCCL_IB_DISABLE" not in fw.env(spec)


def test_inputs_and_setup():
    spec, fw, _, _ = render()
    inputs = fw.inputs(spec)
    assert inputs[0].endswith("examples/reasoning/main_grpo.py")
    assert inputs[-1].endswith("AReaL-boba-106k.jsonl")
    setup = fw.setup(spec)
    assert spec.pins.framework_commit in setup[1]

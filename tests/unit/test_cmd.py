"""CMD= of AReaL and RLinf, verl's --config-path/--config-name, the framework read from the command
(issue 47): the user's program and config from CODE, as published (tests/fixtures/code/*/README.md
cite each command), with only rlaunch's own keys added and the topology read from their config."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlaunch.config import command
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.registry import frameworks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"
AREAL = "python3 examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml scheduler.type=local"
AREAL_MT = ("python3 examples/multi_turn_math/gsm8k_rl_mt.py --config examples/multi_turn_math/gsm8k_grpo_mt.yaml "
            "scheduler.type=ray experiment_name=gsm8k-grpo-multiturn trial_name=trial0")
# The published config's model and data paths are placeholders (/path/to/model, /dataset): given on the
# AIStudio preset's storage, as seed 003 does.
RLINF_STORE = "/mnt/rlinf-reproduction"
RLINF_PATHS = (f"actor.model.model_path={RLINF_STORE}/models/DeepSeek-R1-Distill-Qwen-1.5B "
               f"rollout.model.model_path={RLINF_STORE}/models/DeepSeek-R1-Distill-Qwen-1.5B "
               f"actor.tokenizer.tokenizer_model={RLINF_STORE}/models/DeepSeek-R1-Distill-Qwen-1.5B "
               f"data.train_data_paths=[{RLINF_STORE}/data/boba.jsonl] data.val_data_paths=[{RLINF_STORE}/data/boba.jsonl]")
RLINF = ("python examples/reasoning/main_grpo.py --config-path examples/reasoning/config/math "
         f"--config-name qwen2.5-1.5b-grpo-fsdp {RLINF_PATHS}")
VERL = ("python3 -m verl.experimental.one_step_off_policy.main_ppo --config-path recipe/one_step/config "
        "--config-name one_step_trainer")


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> dict[str, Path]:
    """The fixtures copied out of rlaunch's git tree (there, they would pack as rlaunch's, dirty)."""
    base = tmp_path_factory.mktemp("code")
    return {name: Path(shutil.copytree(FIXTURES / name, base / name)) for name in ("areal", "rlinf", "verl")}


def plan(code_dir: Path, cmd: str, preset: str = "", **knobs: str):
    spec = config.load(preset, {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(code_dir), "CMD": cmd, **knobs})
    return spec, frameworks.get(spec.framework.name)


def refusal(code_dir: Path, cmd: str, preset: str = "", **knobs: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        plan(code_dir, cmd, preset, **knobs)
    return err.value


# ---------------------------------------------------------------- AReaL


def test_areals_published_command_runs_its_script_and_yaml_from_code_with_only_rlaunchs_keys_added(code):
    spec, fw = plan(code["areal"], AREAL)
    home = spec.paths.code_dir
    argv = fw.command(spec)
    assert (spec.framework.name, spec.preset) == ("areal", "areal-grpo-gsm8k")  # read from the script
    assert argv[:5] == ["python3", f"{home}/examples/math/gsm8k_rl.py", "--config",
                        f"{home}/examples/math/gsm8k_grpo.yaml", "scheduler.type=local"]
    assert f"++cluster.fileroot={spec.paths.run_dir}" in argv and f"++trial_name={spec.run.id}" in argv
    assert not any(a.startswith(("++scheduler.type", "rollout.backend", "actor.backend")) for a in argv)
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == (1, 8)  # the YAML's, not the preset's 1 x 2
    assert fw.files(spec) == {}
    request = fw.loader_request(spec)
    assert request["script"] == f"{code['areal']}/examples/math/gsm8k_rl.py"
    assert request["config_path"] == f"{code['areal']}/examples/math/gsm8k_grpo.yaml"
    assert request["code_hash"] == spec.pins.code["hash"]


def test_the_commands_key_values_win_over_the_yaml_and_the_spec_follows_them(code):
    spec, fw = plan(code["areal"], AREAL.replace("local", "ray") + " cluster.n_nodes=2")
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == (2, 8)
    assert "++cluster.name_resolve.type=ray" in fw.command(spec)


@pytest.mark.parametrize(("extra", "knobs", "key", "needle"), [
    ("", {"NODES": "2"}, "cluster.nodes", "1, what examples/math/gsm8k_grpo.yaml's cluster.n_nodes says"),
    ("cluster.n_gpus_per_node=4", {"GPUS_PER_NODE": "8"}, "cluster.gpus_per_node", "4, what CMD's cluster.n_gpus"),
    ("rollout.backend=sglang:d8", {}, "code.command[rollout.backend]", "fit the 1 x 8 GPUs"),
    ("cluster.n_nodes=2", {}, "code.command[scheduler.type]", "ray: the local scheduler runs on one node"),
    ("actor.path=~/models/q", {}, "code.command[actor.path]", "does not expand ~"),
])
def test_areal_refusals_name_the_knob_or_the_argument_to_change(code, extra, knobs, key, needle):
    err = refusal(code["areal"], f"{AREAL} {extra}", **knobs)
    assert err.key == key and needle in str(err), str(err)


def test_framework_overrides_beside_an_areal_command_are_refused_not_dropped(code):
    with pytest.raises(ConfigError, match="your config's keys go in CMD") as err:
        config.load("", {"RUN_ID": "t", "INFRA": "gcp", "CODE": str(code["areal"]), "CMD": AREAL},
                    ['framework.overrides=["actor.path=Qwen/Qwen2.5-7B"]'])
    assert err.value.key == "framework.overrides"


def test_the_knob_that_contradicts_the_command_is_named_with_its_source(code):
    err = refusal(code["areal"], AREAL, NODES="2")
    assert err.source == "NODES" and "leave NODES out" in str(err)


def test_a_script_or_config_missing_from_code_is_refused_naming_it(code):
    err = refusal(code["areal"], AREAL.replace("gsm8k_grpo.yaml", "nope.yaml"), FRAMEWORK="areal")
    assert err.key == "code.command" and "examples/math/nope.yaml is not in" in str(err)



# AReaL's SPMD launcher, as its quickstart (docs/en/tutorial/quickstart.md at v1.0.4) runs it
LAUNCHER = ("python3 -m areal.infra.launcher.ray examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml "
            "++allocation_mode=sglang:d12p1t1+fsdp:d4p1t1 cluster.n_nodes=4 cluster.n_gpus_per_node=4")


def test_areals_ray_launcher_runs_as_the_driver_on_rlaunchs_cluster_with_its_allocation_kept(code):
    spec, fw = plan(code["areal"], LAUNCHER)
    home = spec.paths.code_dir
    argv = fw.command(spec)
    assert argv[:6] == ["python3", "-m", "areal.infra.launcher.ray", f"{home}/examples/math/gsm8k_rl.py",
                        "--config", f"{home}/examples/math/gsm8k_grpo.yaml"]
    assert "++allocation_mode=sglang:d12p1t1+fsdp:d4p1t1" in argv  # kept, never replaced
    assert not any("scheduler.type" in a for a in argv)  # the launcher schedules (SPMD mode)
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == (4, 4)
    assert "rlaunch formed the Ray cluster" in fw.launcher_lines(spec)[0]


NO_ALLOCATION = LAUNCHER.split(" ++allocation_mode")[0]
EIGHT = LAUNCHER.replace("d12p1t1+fsdp:d4p1t1", "d8+fsdp:d8")  # 8 trainers; the YAML's actor.backend is fsdp:d4p1t1


@pytest.mark.parametrize(("cmd", "key", "needle", "fix"), [
    (LAUNCHER.replace("infra.launcher", "launcher"), "code.command", "-m areal.infra.launcher.ray: AReaL 1.0.4's",
     LAUNCHER),
    (LAUNCHER.replace("sglang:d12p1t1+fsdp:", "sglang.d12p1t1+"), "code.command[allocation_mode]",
     "'sglang.d12p1t1+d4p1t1' (from CMD): sglang:d12p1t1+fsdp:d4p1t1: AReaL 1.0.4's parser", LAUNCHER),
    (LAUNCHER.replace("d12p1t1", "d8"), "code.command[allocation_mode]", "add up to the 16 GPUs", LAUNCHER),
    (NO_ALLOCATION, "code.command[examples/math/gsm8k_grpo.yaml: allocation_mode]",
     "e.g. ++allocation_mode=sglang:d4+fsdp:d4", f"{NO_ALLOCATION} ++allocation_mode=sglang:d4+fsdp:d4"),
    (EIGHT, "code.command[examples/math/gsm8k_grpo.yaml: actor.backend]", "actor.backend=fsdp:d8 in CMD",
     f"{EIGHT} actor.backend=fsdp:d8"),
    (LAUNCHER.replace(".ray", ".local"), "code.command[cluster.n_nodes]", "runs every process on one node", LAUNCHER),
    (LAUNCHER.replace(".ray", ".slurm"), "code.command", "use -m areal.infra.launcher.ray", LAUNCHER),
])
def test_an_areal_launcher_that_cannot_run_here_is_refused_with_a_fix_that_plans(code, cmd, key, needle, fix):
    err = refusal(code["areal"], cmd)
    assert err.key == key and needle in str(err), str(err)
    assert plan(code["areal"], fix)[0].code.command == fix  # the fix the refusal names, applied, plans



def test_the_pre_919_launcher_name_runs_where_code_is_an_areal_that_has_it(code, tmp_path):
    old = Path(shutil.copytree(code["areal"], tmp_path / "areal-ad720e4"))  # AReaL before #919 moved it
    (old / "areal" / "launcher").mkdir(parents=True)
    (old / "areal" / "launcher" / "ray.py").write_text("")
    spec, fw = plan(old, LAUNCHER.replace("infra.launcher", "launcher"))
    assert fw.command(spec)[1:3] == ["-m", "areal.launcher.ray"]

# ---------------------------------------------------------------- RLinf


def test_rlinfs_published_command_composes_its_config_dir_from_code(code):
    spec, fw = plan(code["rlinf"], RLINF, INFRA="aistudio")
    home = spec.paths.code_dir
    argv = fw.command(spec)
    assert argv[:6] == ["python", f"{home}/examples/reasoning/main_grpo.py", "--config-path",
                        f"{home}/examples/reasoning/config/math", "--config-name", "qwen2.5-1.5b-grpo-fsdp"]
    assert f"++runner.logger.log_path={spec.paths.run_dir}" in argv and "++runner.resume_dir=auto" in argv
    assert spec.cluster.nodes == 1  # the config's cluster.num_nodes, not the preset's 2
    assert fw.env(spec)["REPO_PATH"] == home and fw.files(spec) == {}
    request = fw.loader_request(spec)
    assert request["config_dir"] == f"{code['rlinf']}/examples/reasoning/config/math"
    assert request["env"] == {"REPO_PATH": str(code["rlinf"])}


def test_rlinf_placement_and_nodes_are_checked_on_the_configs_values(code):
    err = refusal(code["rlinf"], RLINF, INFRA="aistudio", NODES="2")
    assert err.key == "cluster.nodes" and "cluster.num_nodes" in str(err)
    spec, _ = plan(code["rlinf"], f"{RLINF} cluster.num_nodes=2", INFRA="aistudio")
    assert spec.cluster.nodes == 2


# ---------------------------------------------------------------- verl's own config dir


def test_verls_config_path_and_name_reach_the_command_and_the_hydra_check(code):
    spec, fw = plan(code["verl"], VERL)
    argv = fw.command(spec)
    assert argv[:7] == ["python3", "-m", "verl.experimental.one_step_off_policy.main_ppo", "--config-path",
                        f"{spec.paths.code_dir}/recipe/one_step/config", "--config-name", "one_step_trainer"]
    request = fw.loader_request(spec)
    assert (request["config_dir"], request["config_name"]) == (f"{code['verl']}/recipe/one_step/config",
                                                               "one_step_trainer")


def test_verls_config_path_without_code_says_to_set_code():
    with pytest.raises(ConfigError, match="holds --config-path recipe/one_step/config: set CODE=") as err:
        config.load("", {"RUN_ID": "t", "INFRA": "gcp", "CMD": VERL})
    assert err.value.key == "code.dir" and err.value.source == "CMD"


# ---------------------------------------------------------------- the framework, read from the command


def test_the_framework_is_read_from_the_module_or_the_scripts_imports(code, tmp_path):
    assert command.framework_of(command.parse("python3 -m recipe.sppo.main_sppo"), None)[0] == "verl"
    assert command.framework_of(command.parse(AREAL), code["areal"])[0] == "areal"
    assert command.framework_of(command.parse(RLINF), code["rlinf"])[0] == "rlinf"
    (tmp_path / "train.py").write_text("import torch\n")
    assert command.framework_of(command.parse("python3 train.py --config c.yaml"), tmp_path) == (
        "", "train.py imports none of verl, areal, rlinf")


def test_an_unsaid_framework_asks_for_framework_and_a_contradicting_one_is_refused(code, tmp_path):
    (tmp_path / "train.py").write_text("import mylib\n")
    err = refusal(tmp_path, "python3 train.py --config c.yaml")
    assert err.key == "framework.name" and "set FRAMEWORK=verl, areal or rlinf" in str(err)
    err = refusal(code["areal"], AREAL, FRAMEWORK="verl")
    assert err.key == "framework.name" and err.source == "FRAMEWORK" and "areal, the framework CMD runs" in str(err)


@pytest.mark.parametrize(("text", "needle"), [
    ("python3 ~/train.py --config c.yaml", "the script ~/train.py: a path relative to CODE"),
    ("python3 train.py --config /home/me/c.yaml", "--config /home/me/c.yaml: a path relative to CODE"),
    ("python3 train.py --config a.yaml --config-path d --config-name n", "--config (AReaL) and --config-path"),
    ("python3 train.py --config", "--config needs a value"),
    ("bash run.sh", "python3 -m <module> key=value"),
    ("python3 -m areal.infra.launcher.ray train.py a=b", "-m areal.infra.launcher.ray needs --config"),
    ("python3 -m areal.infra.launcher.local --config c.yaml", "needs the entry script it runs"),
])
def test_command_forms_refused_name_the_argument(text, needle):
    with pytest.raises(ConfigError, match=None) as err:
        command.parse(text, "CMD")
    assert err.value.key == "code.command" and needle in str(err.value) and err.value.source == "CMD"


def test_pwd_rooted_paths_are_codes_and_hydras_inline_options_read():
    cmd = command.parse("python3 $PWD/examples/x.py --config-path=$PWD/conf -cn=main +a.b=1 ~c.d")
    assert (cmd.script, cmd.config_path, cmd.config_name) == ("examples/x.py", "conf", "main")
    assert cmd.overrides() == {"a.b": "1"} and command.config_file(cmd) == "conf/main.yaml"


def test_a_script_command_without_code_says_to_set_code(code):
    with pytest.raises(ConfigError) as err:
        config.load("", {"RUN_ID": "t", "INFRA": "gcp", "FRAMEWORK": "areal", "CMD": AREAL})
    assert err.value.key == "code.dir" and "CMD= of areal runs your script and config from CODE=" in str(err.value)


def test_the_plan_prepares_the_model_its_config_names_and_none_of_the_presets_data(code):
    from rlaunch.config import inputs

    for fixture, cmd, infra in (("areal", AREAL, "gcp"), ("rlinf", RLINF, "aistudio")):
        spec, fw = plan(code[fixture], cmd, INFRA=infra)
        assert fw.own_inputs(spec) and [i.what for i in inputs.of(spec)] == ["model"]
        assert len(fw.setup(spec)) == 1  # its line (rlaunch.config.cmdfacts: the command's model)
    # RLinf's is a directory on the storage: adopted and checked, never downloaded
    assert inputs.of(spec)[0].dir == f"{RLINF_STORE}/models/DeepSeek-R1-Distill-Qwen-1.5B" and inputs.of(spec)[0].user

"""The free-form knobs: their rules (rlaunch.config.knobs), that every accepted value takes effect in the
rendered files, that SET splits like a shell command line, and that SkyPilot itself agrees with our
copy of its infra syntax (the only test here that imports sky)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.config import knobs
from rlaunch.backends.aistudio import backend as aistudio
from rlaunch.backends.skypilot import backend as skypilot
from rlaunch.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def load(preset: str = "rehearsal", sets: str = "", **kw) -> dict:
    return config.load(preset, {"RUN_ID": "t-knobs", **kw}, sets)


# ---------------------------------------------------------------- SET


def test_set_splits_like_a_shell_command_line():
    assert knobs.split_set('a.b="x y" c.d=1') == ["a.b=x y", "c.d=1"]
    spec = load(sets='logging.project="exp 1" train.steps=3')
    assert spec.logging.project == "exp 1" and spec.train.steps == 3


def test_an_open_quote_in_set_is_one_error_naming_set():
    with pytest.raises(ConfigError, match=r"config: SET='a.b=\"x y': no closing quotation"):
        load(sets='a.b="x y')


@pytest.mark.parametrize("text", ["it's #1", "1e5", '"quoted"', "a: b", "yes", "${oc.env:USER}", "null", ""])
def test_a_string_key_takes_the_value_exactly(text):
    """YAML would drop '#...' and quotes, turn 1e5 into 100000.0, yes into true, a: b into a mapping."""
    assert load(sets="logging.project=" + shlex.quote(text)).logging.project == text


def test_typed_keys_still_read_yaml():
    spec = load(sets='framework.overrides=\'["a=${x} y", "b=2"]\' algo.lr=1e-5 infra.spot=true')
    assert spec.framework.overrides == ["a=${x} y", "b=2"]
    assert spec.algo.lr == pytest.approx(1e-5) and spec.infra.spot is True


def test_from_env_reads_make_exports_byte_for_byte():
    env = {"RLAUNCH_KNOB_PRESET": " `x` $$5 \n", "RLAUNCH_KNOB_SET": "", "PRESET": "ignored"}
    assert knobs.from_env(env) == {"PRESET": " `x` $$5 \n"}


# ---------------------------------------------------------------- WORK_ROOT, INFRA_SPEC, ACCELERATOR


@pytest.mark.parametrize("value", ["relative/path", "/mnt/x;touch y", "/", "/mnt/../etc", "/mnt//x",
                                   "/mnt/a b", "/mnt/$HOME", "/mnt/x\n"])
def test_work_root_must_be_a_plain_absolute_path(value):
    # A newline is refused first by the rule every text key shares.
    with pytest.raises(ConfigError, match=r"storage.mount=.*\(from WORK_ROOT\): (an absolute path|one line of text)"):
        load(INFRA="aistudio", WORK_ROOT=value)


def test_work_root_is_the_rendered_storage_path():
    spec = load("rlinf-grpo-pipeline-1.5b", INFRA="aistudio", WORK_ROOT="/mnt/team-a/")
    assert spec.storage.mount == "/mnt/team-a"
    assert spec.paths.run_dir.startswith("/mnt/team-a/runs/")
    files = artifacts.finish(spec, aistudio.BACKEND.render(spec))
    assert "RENDERED_WORK_ROOT=/mnt/team-a\n" in files["run.sh"]
    assert json.loads(files["form.json"])["env"]["WORK_ROOT"] == "/mnt/team-a"
    assert aistudio.install_root(spec) == Path("/mnt/team-a")
    # Elsewhere too: WORK_ROOT is the shared storage on every node (SkyPilot's file mount).
    sky = load(INFRA="gcp", WORK_ROOT="/data")
    task = yaml.safe_load(artifacts.finish(sky, skypilot.BACKEND.render(sky))["task.yaml"])
    assert "/data" in task["file_mounts"]


def test_install_root_is_checked_like_work_root():
    with pytest.raises(ConfigError, match=r"infra.install_root='x' \(from SET\): an absolute path"):
        load(INFRA="aistudio", sets="infra.install_root=x")


@pytest.mark.parametrize("value", ["gcp/us central1", "gcp/us-central1/a/b", "nowhere", "gcp/", "gcp//x",
                                   "k8s/ctx;touch x", "aws/$(id)", " gcp"])
def test_infra_spec_outside_skypilot_syntax_is_refused(value):
    with pytest.raises(ConfigError, match=r"infra.sky_infra=.*\(from INFRA_SPEC\): a SkyPilot infra string"):
        load(INFRA="sky", INFRA_SPEC=value)


@pytest.mark.parametrize(("infra", "value", "rendered"), [
    ("sky", "gcp/us-central1", "gcp/us-central1"),
    ("sky", "k8s/arn:aws:eks:us-east-1:1:cluster/a", "k8s/arn:aws:eks:us-east-1:1:cluster/a"),
    ("gcp", "gcp/us-central1/us-central1-a", "gcp/us-central1/us-central1-a"),
    ("aws", "aws/*/us-east-1a", "aws/*/us-east-1a"),
    ("k8s", "kubernetes/my-ctx", "kubernetes/my-ctx"),
])
def test_an_accepted_infra_spec_takes_effect(infra, value, rendered):
    spec = load(INFRA=infra, INFRA_SPEC=value, sets="storage.source=s3://b")
    task = yaml.safe_load(artifacts.finish(spec, skypilot.BACKEND.render(spec))["task.yaml"])
    assert task["resources"]["infra"] == rendered


def test_infra_spec_must_match_infra_and_be_for_skypilot():
    with pytest.raises(ConfigError, match=r"a gcp infra string .* for INFRA=gcp, or INFRA=sky"):
        load(INFRA="gcp", INFRA_SPEC="aws/us-east-1")
    with pytest.raises(ConfigError, match=r"only for INFRA=gcp, aws, azure, k8s, sky .*INFRA=local does not"):
        load(INFRA_SPEC="gcp")


@pytest.mark.parametrize("value", ["H100:8", "H 100", "$(id)", "-x"])
def test_accelerator_is_a_gpu_type_name(value):
    with pytest.raises(ConfigError, match=r"cluster.accelerator=.*\(from ACCELERATOR\): a GPU type"):
        load(INFRA="gcp", ACCELERATOR=value, GPUS_PER_NODE="1")


def test_accelerator_takes_effect_and_needs_gpus():
    spec = load(INFRA="gcp", ACCELERATOR="A100-80GB", GPUS_PER_NODE="2")
    task = yaml.safe_load(artifacts.finish(spec, skypilot.BACKEND.render(spec))["task.yaml"])
    assert task["resources"]["accelerators"] == "A100-80GB:2"
    with pytest.raises(ConfigError, match=r"\(from ACCELERATOR\): a GPU type needs GPUs: set GPUS_PER_NODE"):
        load(INFRA="gcp", ACCELERATOR="H100")


def test_preset_is_a_name_never_a_path():
    for value in ("../defaults", "rehearsal/../rehearsal", "`touch x`rehearsal"):
        with pytest.raises(ConfigError, match=r"config: PRESET=.*: one of .*rehearsal"):
            load(value)


def test_out_is_any_path_and_arrives_exactly():
    odd = "/tmp/x y/$(a) `b` ${c} \"d\" 'e' \\f"
    assert load(OUT=odd).run.out == odd


# ---------------------------------------------------------------- control characters, every text key


@pytest.mark.parametrize("char", ["\n", "\x1b[2J", "\x00", "\t", "\x9b", "\u2028"],
                         ids=["newline", "escape", "nul", "tab", "csi", "line-sep"])
@pytest.mark.parametrize(("key", "value"), [
    ("run.name", "exp"), ("logging.project", "exp"), ("data.source", "/data/in"), ("model.path", "/m"),
    ("code.dir", "/home/me/proj"), ("framework.overrides", "trainer.x=1"),
])
def test_a_control_character_in_any_text_key_is_refused_naming_the_key(key, value, char):
    bad = f"{value[:2]}{char}{value[2:]}"
    given = f'{key}=["{bad.encode("unicode_escape").decode()}"]' if key == "framework.overrides" else f"{key}={bad}"
    with pytest.raises(ConfigError) as err:
        config.load("rehearsal", {"RUN_ID": "t-knobs"}, [given])
    assert err.value.key == key and err.value.value == bad and "without control characters" in str(err.value)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)  # the message itself is one clean line


@pytest.mark.parametrize(("knob", "value"), [("CODE", "/home/me/pro\x1bj"), ("CMD", "python3 -m m a=1\nrm -rf /")])
def test_code_and_cmd_with_a_control_character_exit_2_naming_the_key(tmp_path, knob, value):
    env = {**os.environ, f"RLAUNCH_KNOB_{knob}": value, "RLAUNCH_KNOB_RUN_ID": "t",
           "RLAUNCH_KNOB_OUT": str(tmp_path / "out")}
    done = subprocess.run([sys.executable, "-m", "rlaunch", "plan"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"code.{'dir' if knob == 'CODE' else 'command'}=" in done.stderr and "control characters" in done.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- REGISTRY, TAG and the check command


@pytest.mark.parametrize(("name", "value", "ok"), [
    ("REGISTRY", "ghcr.io/acme", True), ("REGISTRY", "registry.example.com:5000/team/sub/", True),
    ("REGISTRY", "acme", True), ("REGISTRY", "ghcr.io/Acme", False), ("REGISTRY", "ghcr.io/a b", False),
    ("REGISTRY", "ghcr.io/a;touch x", False), ("REGISTRY", "https://ghcr.io/a", False),
    ("TAG", "v1.2_x-3", True), ("TAG", "-x", False), ("TAG", ".x", False), ("TAG", "a" * 129, False),
    ("TAG", "a:b", False), ("PRESET", "verl-ppo-gsm8k-0.5b", True), ("PRESET", "a/b", False),
    ("NODES", "3", True), ("NODES", "0", False), ("GPUS_PER_NODE", "0", True), ("GPUS_PER_NODE", "x", False),
    ("CMD", "python3 -m m a='x y'", True), ("CMD", "python3 -m m\na=1", False),
])
def test_rules(name, value, ok):
    assert (knobs.RULES[name](value) is None) == ok


def test_an_input_code_is_a_repository_at_a_full_commit_while_make_takes_a_directory():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert knobs.INPUT_RULES["CODE"](f"https://github.com/acme/rl.git@{commit}") is None
    for bad in (".", "/home/me/rl", "https://github.com/acme/rl@main", f"git@github.com:acme/rl@{commit}"):
        assert knobs.INPUT_RULES["CODE"](bad), bad
    assert "CODE" not in knobs.RULES  # make's CODE= (a directory too) is the config's to check


def test_check_command_names_the_first_bad_value_exit_2():
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT / "tools"), "RUN_ID": "ok-1",
           "PRESET": "a\n::warning::x"}
    proc = subprocess.run([sys.executable, "-m", "rlaunch.config.knobs", "check", "--inputs", "--prefix=::error::",
                           "RUN_ID", "PRESET"], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    # One line, the value escaped: a newline in it cannot start another workflow command.
    assert proc.stdout == "::error::preset 'a\\n::warning::x' not allowed: a preset name: letters, digits, " \
                          "'.', '_', '-' (make presets lists them)\n"
    env["PRESET"] = "rehearsal"
    assert subprocess.run([sys.executable, "-m", "rlaunch.config.knobs", "check", "RUN_ID", "PRESET"], env=env,
                          check=False).returncode == 0


def test_knobs_module_needs_only_the_standard_library():
    """The workflows run it with a bare python3 before `make setup`."""
    code = "import sys, rlaunch.config.knobs; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('yaml', 'jsonschema', 'sky', 'ray', 'fire', 'jinja2')))"
    out = subprocess.run([sys.executable, "-S", "-c", code], env={"PYTHONPATH": str(ROOT / "tools")},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- SkyPilot's own parser agrees


def test_skypilot_accepts_what_we_accept_and_reads_it_the_same(tmp_path):
    """Our copy of SkyPilot's infra syntax and cloud list, against SkyPilot 0.14.1 itself."""
    accepted = ["gcp", "GCP/us-central1", "aws/us-east-1/us-east-1a", "*/us-east-1", "k8s", "k8s/ctx",
                "kubernetes/arn:aws:eks:us-east-1:1:cluster/a", "ssh/pool-1", "lambda/us-east-1", "do",
                "digitalocean", "azure/eastus/*", "k8s/gke_p_us-central1_c", "slurm/cluster/partition"]
    refused_by_sky = ["nowhere", "gcp/a/b/c", "gcp//x", "local"]
    code = """
import json, sys
from sky.utils import registry
from sky.utils.infra_utils import InfraInfo
values = json.loads(sys.argv[1])
out = {"clouds": sorted(registry.CLOUD_REGISTRY), "aliases": dict(registry.CLOUD_REGISTRY._aliases),
       "parsed": {}}
for v in values:
    try:
        info = InfraInfo.from_str(v)
        cloud = None
        if info.cloud is not None:
            obj = registry.CLOUD_REGISTRY.from_str(info.cloud)
            if obj is None:
                raise ValueError("excluded cloud")
            cloud = next(name for name, c in registry.CLOUD_REGISTRY.items() if c is obj)
        out["parsed"][v] = [cloud, info.region, info.zone]
    except (ValueError, AssertionError) as err:
        out["parsed"][v] = None
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(accepted + refused_by_sky)],
                          env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    sky = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(knobs.SKY_CLOUDS) == sky["clouds"]
    assert knobs.SKY_CLOUD_ALIASES == sky["aliases"]
    for value in accepted:
        assert knobs.sky_infra_problem(value) is None, value
        assert sky["parsed"][value] is not None, value
        assert (knobs.sky_cloud(value) or None) == sky["parsed"][value][0], value
    for value in refused_by_sky:
        assert sky["parsed"][value] is None and knobs.sky_infra_problem(value), value


RUN_ID_SAMPLES = ["a", "exp-7", "gh-123456", "x" * 40, "x" * 41, "-a", "a-", "A1", "a_b", "a.b", "", "1-2-3", "a--b"]


def test_local_cluster_takes_the_names_the_run_id_rule_takes():
    """scripts/local-cluster checks its cluster name (the run id) in bash: the same answers as the rule."""
    script = (ROOT / "scripts" / "local-cluster").read_text()
    name_re = next(line.split("=", 1)[1].strip("'") for line in script.splitlines() if line.startswith("NAME_RE="))
    for sample in RUN_ID_SAMPLES:
        bash = subprocess.run(["bash", "-c", '[[ "$1" =~ $2 ]]', "-", sample, name_re], check=False).returncode == 0
        assert bash == (knobs.run_id_problem(sample) is None), sample

"""PREPARE= (data.prepare, issue 44): the user's conversion in CODE turns DATA into the framework's rows,
once, at a pinned output; converted at plan time where DATA is here; refused with one line naming it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.backends.local import backend as local_backend
from rlaunch.config import inputs, prepare
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.job import data
from rlaunch.registry import frameworks

FIXTURES = ROOT / "tests" / "fixtures" / "data"
COMMAND = "python3 prep.py --in {input} --out {output}"


@pytest.fixture()
def code(tmp_path, monkeypatch):
    """prep.py as CODE (a copy: the repository's tree is a git tree that may be dirty), converted with
    this interpreter (the framework's venv is not what is tested here), into a cache of this test."""
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prepare, "VENVS", {})
    out = tmp_path / "code"
    shutil.copytree(FIXTURES / "prep-code", out)
    return out


def load(code: Path, command: str = COMMAND, infra: str = "gcp", preset: str = "verl-grpo-math-7b", **knobs: str):
    return config.load(preset, {"INFRA": infra, "RUN_ID": "prep1", "DATA": str(FIXTURES / "plain-jsonl"),
                                "CODE": str(code), "PREPARE": command, **knobs})


def test_the_output_is_pinned_converted_here_once_and_verl_reads_it(code):
    spec = load(code)
    source = spec.pins.source
    out = source["prepared"]
    assert out == f"/storage/data/prepared/{source['prepare_hash'][:12]}"
    eff = dict(o.split("=", 1) for o in frameworks.get("verl").overrides(spec))
    assert eff["data.train_files"] == f"{out}/train.jsonl"
    here = Path(source["prepare_checked"])
    assert '"reward_model"' in (here / "train.jsonl").read_text() and (here / "SHA256SUMS").is_file()
    made = (here / "train.jsonl").stat().st_mtime_ns
    assert load(code).pins.source["prepare_hash"] == source["prepare_hash"]
    assert (here / "train.jsonl").stat().st_mtime_ns == made  # the same source, command and CODE: not rerun
    other = load(code, COMMAND + " --columns=verl").pins.source
    assert other["prepared"] != out  # another command, another output
    # The inputs step: the source first, then the conversion in CODE on the nodes; CODE goes to the CPU step.
    lines = inputs.setup_lines(spec)
    assert "--upload=" in lines[0] and f"--check={out} " in lines[1]
    assert (f"--prepare='{COMMAND}' --input={source['dir']} --code={spec.paths.code_dir} --out={out}; fi"
            in lines[1])
    assert inputs.uploads(spec)[spec.paths.code_dir].endswith(f"/code/{spec.pins.code['hash']}")
    plan = "\n".join(inputs.layout(spec))
    assert f"data.prepare: `{COMMAND}` in CODE, {{input}}={source['dir']} {{output}}={out}/" in plan
    assert "converted here first" in plan


@pytest.mark.parametrize("command, knobs, says", [
    (COMMAND, {"DATA": ""}, "empty without DATA="),
    ("python3 ../prep.py --in {input} --out {output}", {}, "its script ../prep.py is outside CODE"),
    ("python3 /etc/prep.py --in {input} --out {output}", {}, "its script /etc/prep.py is outside CODE"),
    ("bash ../run.sh {input} {output}", {}, "its script ../run.sh is outside CODE"),
    ("python3 missing.py --in {input} --out {output}", {}, "its script missing.py is not a file CODE packs"),
    ("python3 prep.py --in {input} --out {output}\x1b[2J", {}, "without control characters"),
    ("python3 prep.py --in {input}", {}, "it has no {output}"),
    ("python3 prep.py --in {input} --out {output} --nope", {}, "exit 2 in"),
    (COMMAND, {"CODE": ""}, "its script prep.py runs from CODE, which is not set"),
])
def test_what_cannot_convert_is_refused_naming_it(code, command, knobs, says):
    with pytest.raises(ConfigError) as err:
        load(code, command, **knobs)
    assert err.value.key == "data.prepare" and says in err.value.allowed
    assert err.value.source == "PREPARE"


def test_an_output_without_a_train_file_is_refused(code):
    (code / "prep.py").write_text("import sys; open(sys.argv[-1] + '/rows.csv', 'w').write('a')\n")
    with pytest.raises(ConfigError) as err:
        load(code, "python3 prep.py {output}")
    assert "a dataset with a train.* file" in err.value.allowed and "rows.csv" in err.value.allowed


def test_the_nodes_convert_once_and_a_second_launch_converts_nothing(code, tmp_path, capsys):
    spec = load(code, infra="local", WORK_ROOT=str(tmp_path / "storage"))
    source = spec.pins.source
    local_backend.upload(spec)
    shutil.copytree(code, spec.paths.code_dir)
    local_backend.prepare_data(spec)
    out = Path(source["prepared"])
    assert (out / "train.jsonl").is_file() and not data.check_stamp(out)[0]
    local_backend.prepare_data(spec)
    assert "nothing converted" in capsys.readouterr().out
    # The inputs step's own line (SkyPilot, KubeRay, AIStudio): the same module, checked by its stamp.
    assert data.main([f"--check={out}", "--what=dataset"]) == 0
    again = tmp_path / "again"
    assert data.main([f"--prepare={COMMAND}", f"--input={source['dir']}", f"--code={code}", f"--out={again}"]) == 0
    assert data.manifest_text(again) == data.manifest_text(out)


@pytest.mark.parametrize("infra", ["kuberay", "aistudio"])
def test_every_inputs_step_converts_after_code_and_data_are_there(code, infra):
    from rlaunch.backends.aistudio import backend as aistudio
    from rlaunch.backends.kuberay import manifests

    spec = load(code, infra=infra, preset="verl-grpo-gsm8k-32b" if infra == "kuberay" else "verl-grpo-math-7b")
    script = (manifests.run_files(spec)["setup.sh"] if infra == "kuberay" else aistudio.setup_script(spec))
    converts = script.index(f"--prepare='{COMMAND}'")
    assert script.index(f"--check={spec.pins.source['dir']} ") < converts  # the source first
    if infra == "kuberay":  # CODE from its ConfigMap onto the volume before the command runs in it
        assert script.index(f"[[ ! -d {spec.paths.code_dir} ]]") < converts


def test_data_not_on_this_machine_is_converted_by_the_inputs_step_and_the_plan_says_what_it_did_not_check(code):
    from rlaunch.frameworks.verl.cpu import datacheck

    spec = load(code, DATA="/storage/datasets/mine")
    source = spec.pins.source
    assert (source["train"], source["test"], source["prepare_checked"]) == ("train.parquet", "test.parquet", "")
    assert datacheck.lines(spec, []) == [
        "WARNING data: rows not checked here: data.prepare's output (converted by the inputs step, not here (DATA "
        "is not on this machine): the framework reads train.parquet and test.parquet in its output)"]
    assert "not converted here" in "\n".join(inputs.layout(spec))


def test_rlinf_reads_json_lines_from_an_output_the_plan_could_not_list(code):
    spec = load(code, DATA="/storage/datasets/mine", preset="rlinf-grpo-pipeline-1.5b")
    assert frameworks.get("rlinf").data_file(spec) == f"{spec.pins.source['prepared']}/train.jsonl"


def test_a_format_no_framework_reads_is_what_prepare_is_for(code, tmp_path):
    rows = tmp_path / "mine"
    rows.mkdir()
    (rows / "train.csv").write_text("question,answer\nTwo plus two?,4\nThree plus one?,4\n")
    (code / "csv2verl.py").write_text(
        "import csv, json, sys\n"
        "src, out = sys.argv[1], sys.argv[2]\n"
        "with open(src + '/train.csv') as f, open(out + '/train.jsonl', 'w') as w:\n"
        "    for r in csv.DictReader(f):\n"
        "        w.write(json.dumps({'data_source': 'openai/gsm8k', 'prompt': [{'role': 'user', 'content': "
        "r['question']}], 'reward_model': {'ground_truth': r['answer']}}) + '\\n')\n")
    with pytest.raises(ConfigError) as err:  # without a conversion: refused, naming what verl reads
        config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "prep1", "DATA": str(rows)})
    assert "found train.csv" in err.value.allowed
    spec = load(code, "python3 csv2verl.py {input} {output}", DATA=str(rows))
    assert spec.pins.source["train"] == "train.jsonl"
    assert (Path(spec.pins.source["prepare_checked"]) / "train.jsonl").read_text().count("\n") == 2

"""DATA= (data.source, issue 44): a hub dataset pinned to a commit, a file or directory of this machine
uploaded once under its content hash, a path on the shared storage; verl's data keys point at the
files found by name; what cannot work is refused at load with one line naming it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.backends.local import backend as local_backend
from rlaunch.config import datasource, inputs
from rlaunch.config import load as config
from rlaunch.errors import ConfigError, MissingPrerequisite
from rlaunch.job import data
from rlaunch.registry import frameworks

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fakehub import FakeHub, use_in_process  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "data"
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def load(knobs: dict, sets: str = "", preset: str = "verl-grpo-math-7b"):
    return config.load(preset, {"INFRA": "gcp", "RUN_ID": "data1", **knobs}, sets)


def verl_files(spec) -> tuple[str, str]:
    eff = dict(o.split("=", 1) for o in frameworks.get("verl").overrides(spec))
    return eff["data.train_files"], eff["data.val_files"]


@pytest.fixture()
def mine(tmp_path):
    out = tmp_path / "mine"
    shutil.copytree(FIXTURES / "gsm8k-parquet", out)
    return out


def test_a_directory_here_is_named_by_its_content_and_verl_reads_its_files(mine):
    spec = load({"DATA": str(mine)})
    source = spec.pins.source
    assert source["kind"] == "local" and source["sha256"] == datasource.content_hash(mine)
    assert spec.paths.data_dir == f"/storage/data/local/{source['sha256'][:12]}"
    assert verl_files(spec) == (f"{spec.paths.data_dir}/train.parquet", f"{spec.paths.data_dir}/test.parquet")
    item = inputs.of(spec)[0]
    assert item.key == "data.source" and item.fetch[0] == f"--upload=/tmp/rlaunch-data/{source['sha256'][:12]}"
    assert inputs.uploads(spec) == {f"/tmp/rlaunch-data/{source['sha256'][:12]}": str(mine)}
    assert "uploaded once from this machine (SkyPilot file_mounts" in "\n".join(inputs.layout(spec))
    (mine / "train.parquet").write_bytes(b"other rows")  # other content, another name
    assert load({"DATA": str(mine)}).pins.source["sha256"] != source["sha256"]


def test_one_file_and_shards_and_validation_files_are_found_by_name():
    single = load({"DATA": str(FIXTURES / "math-jsonl" / "train.jsonl")})
    assert single.pins.source["train"] == single.pins.source["test"] == "train.jsonl"
    assert inputs.uploads(single) == {f"/tmp/rlaunch-data/{single.pins.source['sha256'][:12]}/train.jsonl":
                                      str(FIXTURES / "math-jsonl" / "train.jsonl")}
    assert load({"DATA": str(FIXTURES / "math-jsonl")}).pins.source["test"] == "validation.jsonl"
    names = ["README.md", "main/train-00000-of-00002.parquet", "main/train-00001-of-00002.parquet",
             "main/test-00000-of-00001.parquet", "other/train.jsonl"]
    train, test, note = datasource.splits(names, "main", "hf:x/y")
    assert train == names[1:3] and test == [names[3]] and note == ""
    assert datasource.splits(["train.parquet"], "", "v")[2].startswith("no test.*")


@pytest.mark.parametrize("files, found", [
    (["train.csv", "test.csv"], "a dataset whose train file verl can read (.parquet, .json, .jsonl, by suffix): "
                                "found train.csv"),
    (["rows.parquet"], "a dataset with a train.* file (.parquet, .json, .jsonl; shards train-00000-of-N too): "
                       "it has rows.parquet"),
])
def test_a_directory_verl_cannot_read_is_refused_at_load(tmp_path, files, found):
    for name in files:
        (tmp_path / name).write_text("a,b\n")
    with pytest.raises(ConfigError) as err:
        load({"DATA": str(tmp_path)})
    assert err.value.key == "data.source" and found in err.value.allowed and err.value.source == "DATA"


@pytest.mark.parametrize("knobs, sets, key, says", [
    ({"DATA": "/nowhere/mine"}, "", "data.source", "/nowhere/mine does not exist on this machine and is not under "
                                                   "storage.mount=/storage"),
    ({"DATA": "hf:just-a-name"}, "", "data.source", "hf:<org>/<name>[@<revision>], modelscope:"),
    ({"DATA": "/storage/mine"}, "data.path=/storage/other", "data.path", "empty when data.source is set"),
])
def test_what_cannot_work_is_one_line_naming_it(knobs, sets, key, says):
    with pytest.raises(ConfigError) as err:
        load(knobs, sets)
    assert err.value.key == key and says in err.value.allowed


def test_kuberay_carries_a_directory_here_in_the_inputs_configmap_and_uploads_it_once(mine, tmp_path):
    import base64

    from rlaunch.backends.kuberay import manifests

    spec = config.load("verl-grpo-gsm8k-32b", {"INFRA": "kuberay", "RUN_ID": "data1", "DATA": str(mine),
                                               "WORK_ROOT": str(tmp_path / "volume")})
    cm = manifests.code_configmap_manifest(spec)
    assert cm["metadata"]["name"] == "data1-code" and list(cm["binaryData"]) == ["data.tar.gz"]
    archive = tmp_path / "data.tar.gz"
    archive.write_bytes(base64.b64decode(cm["binaryData"]["data.tar.gz"]))
    assert archive.read_bytes() == datasource.archive(spec.pins.source)  # its bytes follow from the content
    setup = manifests.run_files(spec)["setup.sh"]
    assert "tar -xzf /opt/rlaunch-code/data.tar.gz" in setup and "(a ConfigMap, then the inputs Job)" in \
        "\n".join(inputs.layout(spec))
    # The inputs Job's lines for the dataset, run here: the pod's /tmp is tmp_path/pod, the volume tmp_path/volume.
    lines = inputs.unpack_lines(spec, str(archive)) + [inputs.setup_lines(spec)[0]]
    script = "set -Eeuo pipefail\n" + "\n".join(lines).replace(inputs.UPLOAD_MOUNT, str(tmp_path / "pod")) + "\n"
    env = {**os.environ, "RLAUNCH_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "tools")}
    for _ in range(2):
        subprocess.run(["bash", "-c", script], check=True, env=env, capture_output=True)
    target = Path(spec.pins.source["dir"])
    assert sorted(p.name for p in target.iterdir()) == ["SHA256SUMS", "SHA256SUMS.stamp", "test.parquet",
                                                        "train.parquet"]
    assert not data.verify_manifest(target) and [p.name for p in target.parent.iterdir()] == [target.name]
    assert (target / "SHA256SUMS").read_text() == datasource.manifest(mine)


def test_kuberay_refuses_data_and_code_over_one_configmap_naming_both_sizes(mine, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "weights.bin").write_bytes(os.urandom(500 * 1024))  # neither compresses
    (mine / "train.parquet").write_bytes(os.urandom(500 * 1024))
    knobs = {"INFRA": "kuberay", "RUN_ID": "data1", "DATA": str(mine)}
    assert config.load("verl-grpo-gsm8k-32b", knobs).pins.source  # alone, it fits
    with pytest.raises(ConfigError) as err:
        config.load("verl-grpo-gsm8k-32b", {**knobs, "CODE": str(code)})
    assert err.value.key == "data.source" and err.value.source == "DATA"
    assert "at most 900 KiB compressed with CODE on INFRA=kuberay" in err.value.allowed
    assert "this one is 502 KiB and CODE's pack 500 KiB" in err.value.allowed  # with its test.parquet
    assert "put it on the shared storage and give its path (DATA=/data/<dir>)" in err.value.allowed


def test_aistudio_stages_a_directory_here_under_work_root_once_and_run_sh_checks_it(mine, tmp_path):
    from rlaunch.backends.aistudio import backend as aistudio

    spec = config.load("verl-grpo-gsm8k-32b", {"INFRA": "aistudio", "RUN_ID": "data1", "DATA": str(mine),
                                               "WORK_ROOT": str(tmp_path / "mnt")})
    target = Path(spec.pins.source["dir"])
    assert aistudio.stage_data(spec).endswith(f"staged at {target} (2 files)")
    assert aistudio.stage_data(spec).endswith(f"already at {target}, nothing copied")
    assert not data.verify_manifest(target) and [p.name for p in target.parent.iterdir()] == [target.name]
    files = aistudio.AIStudio().render(spec)
    assert f"check_manifest dataset {target} train.parquet test.parquet" in files["run.sh"]
    assert f"--adopt={target}" in files["setup.sh"] and "--upload" not in files["setup.sh"]


def test_a_rehearsal_with_data_feeds_verl_the_users_first_rows(mine, tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.cpu import data_probe, prepare

    monkeypatch.setattr(prepare.model, "write_tiny_model", lambda path: None)  # torch: tests of its own

    spec = config.load("verl-grpo-math-7b", {"REHEARSE": "1", "RUN_ID": "data1", "DATA": str(mine),
                                             "WORK_ROOT": str(tmp_path / "storage")})
    train, val = verl_files(spec)
    assert train == f"{spec.data.path}/train.parquet" and val == f"{spec.data.path}/test.parquet"
    assert "/rehearsal/verl-cpu-1/data-" in spec.data.path
    assert "data.truncation=left" in frameworks.get("verl").overrides(spec)
    setup = frameworks.get("verl").setup(spec)
    assert "--upload=" in setup[0] and "cpu.prepare" in setup[1]  # DATA on the storage before its rows are read
    argv = shlex.split(setup[1])[3:]
    assert f"--train-from={spec.pins.source['dir']}/train.parquet" in argv
    # The prepare step, run on the uploaded files: verl's data keys then hold the user's rows.
    data.upload(mine, Path(spec.pins.source["dir"]), spec.pins.source["sha256"])
    assert prepare.main(argv) == 0
    written = data_probe.read(Path(train))
    assert written == data_probe.read(mine / "train.parquet")[:prepare.TRAIN_ROWS]
    assert data_probe.read(Path(val)) == data_probe.read(mine / "test.parquet")[:prepare.TEST_ROWS]
    plain = FIXTURES / "plain-jsonl" / "train.jsonl"  # rows verl cannot read: refused, named
    out = tmp_path / "plain"
    assert prepare.main(["--model", str(tmp_path / "m"), f"--data={out}", "--dataset=gsm8k", "--data-source=x",
                         f"--train-from={plain}"]) == 2
    assert not (out / "train.parquet").exists()


def test_a_path_on_the_shared_storage_is_used_in_place():
    spec = load({"DATA": "/storage/datasets/mine"})
    assert spec.pins.source == {"kind": "shared", "dir": "/storage/datasets/mine", "train": "train.parquet",
                                "test": "test.parquet", "note": spec.pins.source["note"]}
    item = inputs.of(spec)[0]
    assert item.fetch == () and item.user and "--adopt=/storage/datasets/mine" in inputs.setup_lines(spec)[0]


def test_the_upload_is_atomic_and_done_once(mine, tmp_path, capsys):
    spec = config.load("verl-grpo-math-7b", {"INFRA": "local", "RUN_ID": "data1", "DATA": str(mine),
                                             "WORK_ROOT": str(tmp_path / "storage")})
    local_backend.upload(spec)
    target = Path(spec.pins.source["dir"])
    assert sorted(p.name for p in target.iterdir()) == ["SHA256SUMS", "test.parquet", "train.parquet"]
    assert not data.verify_manifest(target) and [p.name for p in target.parent.iterdir()] == [target.name]
    local_backend.upload(spec)
    assert capsys.readouterr().out.splitlines() == [
        f"local: dataset {mine} -> {target}: 2 files copied",
        f"local: dataset {mine} -> {target}: already there, nothing copied"]
    (mine / "test.parquet").write_bytes(b"changed after the plan")
    shutil.rmtree(target)
    with pytest.raises(MissingPrerequisite, match="it changed since `make plan`: plan again"):
        local_backend.upload(spec)
    assert not target.exists() and not list(target.parent.iterdir())  # no half copy left


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "datasets" / "acme" / "puzzles" / COMMIT
    (repo / "main").mkdir(parents=True)
    shutil.copy(FIXTURES / "gsm8k-parquet" / "train.parquet", repo / "main" / "train-00000-of-00001.parquet")
    shutil.copy(FIXTURES / "gsm8k-parquet" / "test.parquet", repo / "main" / "test-00000-of-00001.parquet")
    (repo / "README.md").write_text("# puzzles\n")
    with FakeHub(tmp_path / "hub") as server:
        use_in_process(monkeypatch, server.url)
        yield server


def test_a_hub_dataset_is_pinned_to_a_commit_and_downloaded_once(hub, tmp_path):
    spec = load({"DATA": "hf:acme/puzzles"}, "data.config=main")
    source = spec.pins.source
    assert (source["hf_id"], source["revision"], source["asked"], source["unresolved"]) == \
        ("acme/puzzles", COMMIT, "main", "")
    assert spec.paths.data_dir == f"/storage/data/hub/acme--puzzles/{COMMIT[:12]}"
    assert verl_files(spec)[0] == f"{spec.paths.data_dir}/main/train-00000-of-00001.parquet"
    assert json.loads(spec.json_text())["pins"]["source"]["revision"] == COMMIT
    item = inputs.of(spec)[0]
    assert item.fetch == ("--dataset-id=acme/puzzles", f"--revision={COMMIT}") and not item.user
    out = tmp_path / "out"
    assert data.main([*item.fetch, f"--out={out}"]) == 0  # what the inputs step runs, in this process
    gets = len(hub.file_gets())
    assert gets == 3 and not data.verify_manifest(out)
    # The inputs step again (a rerun, another node): its stamp matches, nothing is fetched.
    line = inputs.setup_lines(spec)[0].replace(spec.paths.data_dir, str(out))
    again = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "RLAUNCH_PYTHON": sys.executable})
    assert "matches its SHA256SUMS: kept (metadata" in again.stdout and len(hub.file_gets()) == gets


def test_an_unreachable_hub_is_a_warning_not_a_refusal(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load({"DATA": "hf:acme/puzzles@v1"})
    assert spec.pins.source["revision"] == "v1" and spec.paths.data_dir.endswith("/acme--puzzles/v1")
    warning = [line for line in inputs.layout(spec) if line.startswith("WARNING")]
    assert warning and "'v1' moves" in warning[0] and "DATA=hf:acme/puzzles@<40-hex commit>" in warning[0]
    assert verl_files(spec)[0].endswith("/train.parquet")


def test_the_other_frameworks_read_it_or_refuse_it_never_drop_it(mine, tmp_path):
    jsonl = load({"DATA": str(FIXTURES / "math-jsonl")}, preset="rlinf-grpo-pipeline-1.5b")
    assert frameworks.get("rlinf").data_file(jsonl).endswith("/train.jsonl")
    for preset, infra, says in (("rlinf-grpo-pipeline-1.5b", "gcp", "train file is .json or .jsonl for RLinf"),
                                ("areal-grpo-gsm8k", "gcp", "for AReaL, not yet anything but GSM8K")):
        with pytest.raises(ConfigError) as err:
            config.load(preset, {"INFRA": infra, "RUN_ID": "data1", "DATA": str(mine),
                                 "WORK_ROOT": str(tmp_path / "storage")})
        assert err.value.key == "data.source" and says in err.value.allowed


def trl(data: Path, tmp_path: Path):
    return config.load("rehearsal", {"RUN_ID": "data1", "DATA": str(data), "WORK_ROOT": str(tmp_path / "storage")})


def test_the_trl_rehearsal_trains_on_the_users_rows_checked_at_plan_as_the_workers_read_them(mine, tmp_path):
    spec = trl(FIXTURES / "digits-jsonl", tmp_path)
    adapter = frameworks.get("trl")
    staged = spec.pins.source["dir"]
    assert json.loads(adapter.files(spec)["trl.json"])["data"] == f"{staged}/train.jsonl"
    assert adapter.inputs(spec) == [f"{staged}/SHA256SUMS"]  # preflight: every node sees the staged copy
    assert adapter.data_check(spec) == [
        "data: 30 rows read (train.jsonl): prompt and answer in the rehearsal's vocabulary, answers 0123456789; "
        "8 prompts a step are drawn from them; scored by rlaunch's copy reward on the nodes"]
    with pytest.raises(ConfigError) as err:  # verl's rows: the tiny model has no words for them
        adapter.data_check(trl(mine, tmp_path))
    assert err.value.key == "data.source" and "train.parquet row 0: no answer column" in err.value.allowed


@pytest.mark.parametrize(("row", "says"), [
    ({"prompt": "copy the digit 7", "answer": 7}, ""),  # plain text, an int answer
    ({"prompt": [{"role": "user", "content": "say the digit 3"}], "answer": "3"}, ""),
    ({"prompt": "copy the number 7", "answer": "7"}, "prompt word 'number' is not in the rehearsal's vocabulary"),
    ({"prompt": "copy <eos> 7", "answer": "7"}, "prompt word '<eos>' is not in the rehearsal's vocabulary"),
    ({"prompt": "copy the digit 7", "answer": "seven"}, "answer 'seven' is not a digit 0-9"),
    ({"prompt": [{"role": "system", "content": "copy"}], "answer": "1"},
     "prompt message {'role': 'system', 'content': 'copy'} is not {'role': 'user' or 'assistant'"),
    ({"question": "copy the digit 7", "answer": "7"}, "no prompt column"),
])
def test_a_row_the_tiny_model_cannot_train_on_is_named(row, says, tmp_path):
    from rlaunch.rehearsal import tiny

    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(row) + "\n")
    if not says:
        assert tiny.read_rows([str(path)]) == [row]
        return
    with pytest.raises(ValueError, match=re.escape("row 0: " + says)):
        tiny.read_rows([str(path)])


def test_the_plan_reads_a_hub_datasets_rows_once_at_its_commit(hub, tmp_path, monkeypatch):
    from rlaunch.config import datarows as datacheck

    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    spec = load({"DATA": "hf:acme/puzzles"}, "data.config=main")
    train, test = datacheck.rows_here(spec)
    assert [p.name for p in train + test] == ["train-00000-of-00001.parquet", "test-00000-of-00001.parquet"]
    assert all(p.is_file() and COMMIT in str(p) for p in train + test)
    gets = len(hub.file_gets())
    datacheck.rows_here(spec)
    assert len(hub.file_gets()) == gets == 2  # the README is not fetched; a second plan fetches nothing
    monkeypatch.setattr(datacheck, "FETCH_LIMIT_BYTES", 1000)
    too_big = datacheck.rows_here(load({"DATA": f"hf:acme/puzzles@{COMMIT}"}, "data.config=main"))
    assert too_big == (train, test)  # already fetched: its size is not asked again
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache2"))
    too_big = datacheck.rows_here(load({"DATA": f"hf:acme/puzzles@{COMMIT}"}, "data.config=main"))
    assert "its files are 0 MiB, more than the plan fetches (0 MiB)" in too_big
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    moving = datacheck.rows_here(load({"DATA": "hf:acme/puzzles@v1"}))
    assert moving == "hf:acme/puzzles@v1 is not resolved to a commit (HF_HUB_OFFLINE is set)"


def test_a_path_with_spaces_reaches_the_inputs_step_as_one_argument(tmp_path):
    spaced = tmp_path / "my data; rm -rf x"
    shutil.copytree(FIXTURES / "gsm8k-parquet", spaced)
    spec = config.load("verl-grpo-math-7b", {"INFRA": "local", "RUN_ID": "data1", "DATA": str(spaced),
                                             "WORK_ROOT": str(tmp_path / "storage")})
    line = inputs.setup_lines(spec)[0]
    assert f"--upload='{spaced}'" in line
    assert "uploaded once from this machine by make launch" in "\n".join(inputs.layout(spec))


def test_a_modelscope_dataset_at_a_commit_is_pinned_and_fetched_with_modelscopes_client():
    # The download itself is job.data's _modelscope_snapshot, which test_modelscope.py runs against
    # tests/fakemodelscope.py for a pinned dataset; here: what DATA= makes of it.
    spec = load({"DATA": f"modelscope:acme/puzzles@{COMMIT}"})
    source = spec.pins.source
    assert (source["hub"], source["revision"], source["unresolved"]) == ("modelscope", COMMIT, "")
    assert spec.paths.data_dir == f"/storage/data/modelscope/acme--puzzles/{COMMIT[:12]}"
    assert "its files are not listed here" in source["note"]  # ModelScope's file list is not read at plan time
    assert inputs.of(spec)[0].fetch == ("--dataset-id=acme/puzzles", f"--revision={COMMIT}", "--hub=modelscope")
    assert inputs.sites(spec) == "GitHub, ModelScope and the Hugging Face Hub"


def test_what_the_plan_cannot_read_here_is_a_warning_naming_it(mine, tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.cpu import datacheck

    spec = load({"DATA": "/storage/datasets/mine"})
    assert datacheck.lines(spec, []) == ["WARNING data: rows not checked here: /storage/datasets/mine is not on "
                                         "this machine (the inputs step adopts it where the nodes run)"]
    monkeypatch.setattr(datacheck.cpu_plan, "venv_python", lambda: tmp_path / ".venv-verlcpu" / "bin" / "python")
    assert datacheck.lines(load({"DATA": str(mine)}), []) == [
        "WARNING data: rows not checked: .venv-verlcpu is missing (make setup-verlcpu: verl at its pin reads "
        "and scores them)"]
    from rlaunch.validate import loaders

    monkeypatch.setattr(loaders, "venv_python", lambda name: tmp_path / f".venv-{name}" / "bin" / "python")
    assert frameworks.get("rlinf").data_check(load({"DATA": str(FIXTURES / "math-jsonl")},
                                                   preset="rlinf-grpo-pipeline-1.5b")) == [
        "WARNING data: rows not checked: .venv-rlinf is missing (make setup-validators: RLinf at its pin reads "
        "and scores them)"]

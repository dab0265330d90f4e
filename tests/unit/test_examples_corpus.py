"""Published verl and AReaL example runs (issue 29's corpus: tests/fixtures/import, cited in its README),
each imported from its own command line and planned at its own node and GPU counts: each plans (the
one that did not, AReaL's quickstart without GPUs, now runs its own --config YAML's, issue 47).

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
from rlaunch.registry.backends import get as backend
from test_importer import areal_pin  # noqa: F401  (a fixture: AReaL's checkout at the pin, offline)

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
    # AReaL's: CMD at the pinned AReaL, CODE its checkout there (a stand-in: test_importer.areal_pin),
    # the nodes and GPUs its command's and its --config YAML's (issue 47)
    "areal-quickstart-ray.sh": (4, 4),
    "areal-quickstart-slurm.sh": (16, 8),
    "areal-quickstart-local.sh": (1, 8),
}


@pytest.fixture()
def preset(monkeypatch, areal_pin):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the Hub ids stay at `main`, with the plan's warning
    monkeypatch.setenv("WANDB_API_KEY", "k")
    path = CONFIGS / "presets" / "test-corpus.yaml"

    def write(script: str) -> str:
        path.write_text(importer.render(importer.convert((FIXTURES / script).read_text()), script))
        return "test-corpus"
    yield write
    path.unlink(missing_ok=True)


def test_the_corpus_is_every_fixture_and_at_least_ten_runs():
    assert set(PLANS) == {p.name for p in FIXTURES.glob("*.sh")} and len(PLANS) >= 10


@pytest.mark.parametrize("script", sorted(PLANS))
def test_a_published_run_plans_at_its_own_size(preset, script, capsys):
    spec = config.load(preset(script), {"INFRA": "gcp", "RUN_ID": "corpus1"})
    assert (spec.cluster.nodes, spec.cluster.gpus_per_node) == PLANS[script]
    files = artifacts.finish(spec, backend("gcp").render(spec))
    assert "task.yaml" in files
    print(script, memory.check(spec))  # expected to change with the model facts (module docstring)

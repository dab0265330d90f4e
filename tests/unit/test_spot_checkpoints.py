"""Spot needs checkpoints (issue 29): a run its infrastructure restarts (SPOT=1's managed job, a
RayJob's backoffLimit) with no checkpoint before its end is refused at plan,
naming the steps a preemption would lose; the hint, applied, plans."""

from __future__ import annotations

import re

import pytest

from rlaunch.config import load as config
from rlaunch.errors import ConfigError

CASES = [  # preset, knobs, SET, what retries
    ("verl-grpo-math-7b", {"INFRA": "gcp", "SPOT": "1"}, "", "SPOT=1"),
    ("verl-ppo-gsm8k-0.5b", {"INFRA": "aws", "SPOT": "1"}, "train.save_freq=-1 train.steps=200", "SPOT=1"),
    ("verl-ppo-gsm8k-0.5b", {"INFRA": "kuberay"}, "infra.kuberay.backoff_limit=2 train.steps=30 train.save_freq=30",
     "backoff_limit=2"),
]


@pytest.mark.parametrize("preset, knobs, sets, why", CASES)
def test_a_restarted_run_without_a_checkpoint_before_its_end_is_refused_and_the_hint_fits(preset, knobs, sets, why):
    with pytest.raises(ConfigError) as err:
        config.load(preset, knobs, sets)
    text = str(err.value)
    assert err.value.key == "train.save_freq" and why in text
    steps = config.load(preset, knobs, sets, rules=False).train.steps
    assert f"lose all {steps} steps" in text if steps else "lose every step of its" in text
    hint = re.search(r"SET=(train\.save_freq=\d+)", text).group(1)
    spec = config.load(preset, knobs, f"{sets} {hint}")
    assert 0 < spec.train.save_freq < (spec.train.steps or 10**9)


def test_nothing_retries_or_checkpoints_come_before_the_end():
    config.load("verl-grpo-math-7b", {"INFRA": "gcp"})  # on demand: nothing restarts it
    config.load("verl-grpo-math-7b", {"INFRA": "gcp", "SPOT": "1"}, "train.save_freq=20")  # steps unknown: 20 > 0
    config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "kuberay"}, "train.steps=30 train.save_freq=-1")  # backoff 0
    config.load("verl-grpo-math-7b", {"INFRA": "gcp", "SPOT": "1", "SMOKE": "1"})  # a smoke run saves at step 1
    # AIStudio's spot task is rendered with auto restart off: preempted, it fails rather than restarts.
    config.load("rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio"}, "storage.mount=/mnt/rl train.save_freq=-1")


def test_a_one_step_run_is_told_to_drop_the_retries():
    with pytest.raises(ConfigError, match="cannot checkpoint before its end"):
        config.load("verl-grpo-math-7b", {"INFRA": "gcp", "SPOT": "1"}, "train.steps=1 train.save_freq=1")

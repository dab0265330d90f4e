"""The storage check before a run (rlaunch.config.ckptsize, preflight's "checkpoint space"): one
checkpoint's size from the model's facts and what the framework saves, times those it keeps; a 7B
and a 32B verl preset refused on an impossible volume and passed on an ordinary one."""

from __future__ import annotations

import pytest

from rlaunch.config import ckptsize, load
from rlaunch.verify import preflight

GB = 10**9


def probes(free: int) -> dict[str, dict]:
    """What each node's probe reports of the storage holding the checkpoints (they share it)."""
    return {ip: {"storage": {"path": f"/storage/runs/.preflight/{ip}", "free": free, "free_at": "/storage/runs"}}
            for ip in ("10.0.0.1", "10.0.0.2")}


@pytest.mark.parametrize("preset, overrides, params_b, per_ckpt_gb, kept", [
    # 7.62 B params x (fp32 master weights 4 B + Adam 2 x 4 B) = 91.4 GB; save_freq -1: the one at the end.
    ("verl-grpo-math-7b", "", 7.62, 91.4, 1),
    # 32.76 B x 12 B = 393.2 GB, every 10 steps of 60, each kept (verl keeps every one by default).
    ("verl-grpo-gsm8k-32b", "train.steps=60", 32.76, 393.2, 6),
])
def test_a_7b_and_a_32b_run_are_refused_on_an_impossible_volume_and_pass_on_an_ordinary_one(
        preset, overrides, params_b, per_ckpt_gb, kept):
    spec = load.load(preset, overrides=overrides)
    est = ckptsize.of(spec)
    assert not isinstance(est, str), est
    assert round(est.params / 1e9, 2) == params_b
    assert round(est.per_checkpoint / GB, 1) == per_ckpt_gb and est.kept == kept
    impossible = preflight.check_space(spec, probes(50 * GB), est)
    assert not impossible["passed"]
    detail = impossible["detail"]
    assert detail.startswith("the storage at /storage/runs has 50.0 GB free; the run's checkpoints need "
                             f"{est.need / GB:.1f} GB: checkpoints: {per_ckpt_gb} GB each"), detail
    assert "a larger volume" in detail and ("larger train.save_freq" in detail) == (kept > 1), detail
    ordinary = preflight.check_space(spec, probes(10_000 * GB), est)  # a 10 TB share
    assert ordinary["passed"], ordinary
    assert ordinary["detail"].startswith("10000.0 GB free at /storage/runs; checkpoints:")


def test_a_resumed_run_counts_its_own_checkpoints_as_room():
    spec = load.load("verl-grpo-math-7b")
    est = ckptsize.of(spec)
    assert not isinstance(est, str)
    assert not preflight.check_space(spec, probes(10 * GB), est)["passed"]
    assert preflight.check_space(spec, probes(10 * GB), est, held=est.need)["passed"]


def test_the_framework_keep_limit_bounds_the_count_and_a_bf16_master_copy_halves_the_weights():
    spec = load.load("verl-grpo-gsm8k-32b", overrides=["train.steps=60", "framework.overrides=["
                     "actor_rollout_ref.actor.strategy=fsdp2,trainer.max_actor_ckpt_to_keep=2,"
                     "actor_rollout_ref.actor.fsdp_config.model_dtype=bf16]"])
    est = ckptsize.of(spec)
    assert not isinstance(est, str)
    assert est.kept == 2 and "trainer.max_actor_ckpt_to_keep=2" in est.kept_how
    assert round(est.per_checkpoint / est.params) == 10  # bf16 weights 2 B + Adam 2 x 4 B


def test_no_estimate_is_a_skipped_check_never_a_refusal():
    spec = load.load("rehearsal")
    found = preflight.check_space(spec, probes(1), "the model's facts are not known (no model)")
    assert found["passed"] and found.get("skipped"), found
    assert ckptsize.plan_line(spec).startswith("checkpoints: not estimated, so preflight does not check")


def test_a_save_may_take_its_write_time_at_100_mb_s_per_node():
    spec = load.load("verl-grpo-gsm8k-32b")
    est = ckptsize.of(spec)
    assert not isinstance(est, str)
    assert round(est.write_s(4)) == round(393.2e9 / 400e6)  # 4 nodes writing their shards: ~983 s

"""Postflight on generated output trees in each framework's documented layout: the happy path of
every framework, and the failures a platform's "succeeded" hides (a missing rank's shard, a NaN,
a short run, no learning, a missing checkpoint, too few DCP shards, a resolved placement or output
name other than the requested one, an unavailable Ray actor)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from rlaunch.frameworks.rlinf import placement as rlinf_placement
from rlaunch.registry import frameworks
from rlaunch.verify import postflight

_spec = importlib.util.spec_from_file_location(
    "runtrees", Path(__file__).resolve().parents[1] / "fixtures" / "runtrees.py")
runtrees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runtrees)


def verify(spec: dict, run_dir: Path, exit_code: int | None = 0, **kw) -> dict:
    return postflight.run(spec, run_dir, run_dir / "verification.json", exit_code=exit_code, **kw)


def failed(report: dict) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in report["checks"] if not c["passed"]}


def assert_fails(report: dict, name: str, *needles: str) -> None:
    assert not report["passed"]
    bad = failed(report)
    assert name in bad, bad
    for needle in needles:
        assert needle in bad[name], bad[name]
    return bad


# ---------------------------------------------------------------- trl


@pytest.fixture
def trl(tmp_path):
    run_dir = tmp_path / "run"
    return run_dir, runtrees.make_spec("trl", run_dir, train__steps=40, cluster__nodes=2)


def test_trl_happy_path_writes_a_passing_report(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    on_disk = json.loads((run_dir / "verification.json").read_text())
    assert on_disk["passed"] and on_disk["framework"] == "trl"
    assert on_disk["facts"]["greedy_correct"] == 10
    assert on_disk["facts"]["reward_last"] > 0.9
    names = {c["name"] for c in on_disk["checks"]}
    assert {"learned", "checkpoint", "tensorboard", "workers on distinct nodes", "step target"} <= names


def test_trl_nan_loss_fails_naming_the_step(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, nan_loss_at=7)
    bad = assert_fails(verify(spec, run_dir), "metric loss", "step 7")
    assert "tensorboard" in bad  # the same NaN is in the event file


def test_trl_without_learning_fails(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, reward_first=0.3, reward_last=0.32)
    assert_fails(verify(spec, run_dir), "learned", "0.3")


def test_trl_missing_checkpoint_fails(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, checkpoint=False)
    assert_fails(verify(spec, run_dir), "checkpoint", "does not exist")


def test_trl_truncated_weights_fail(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    weights = run_dir / "checkpoint" / "final" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4])
    assert_fails(verify(spec, run_dir), "checkpoint", "truncated")


def test_trl_short_run_fails_step_target(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, steps=25, target=40)
    assert_fails(verify(spec, run_dir), "step target", "stopped at step 25 of 40")


def test_trl_workers_on_one_node_fail(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, worker_nodes=["10.9.0.2", "10.9.0.2"])
    assert_fails(verify(spec, run_dir), "workers on distinct nodes", "10.9.0.2")


def test_trl_low_greedy_score_fails(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir, greedy=8)
    assert_fails(verify(spec, run_dir), "greedy eval", "8/10")


# ---------------------------------------------------------------- common


def test_nonzero_exit_code_fails(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    assert_fails(verify(spec, run_dir, exit_code=137), "exit code", "137")


def test_exit_code_file_is_read_when_not_given(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    assert verify(spec, run_dir, exit_code=None)["passed"]  # neither given nor recorded: skipped
    (run_dir / "logs" / "exit_code").write_text("1\n")
    assert_fails(verify(spec, run_dir, exit_code=None), "exit code", "1")


@pytest.mark.parametrize("marker", ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory.",
                                    "ray.exceptions.RayTaskError(ValueError)", "ray.exceptions.ActorDiedError",
                                    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970",
                                    "ray.exceptions.ActorUnavailableError: The actor is temporarily unavailable"])
def test_fatal_marker_in_logs_fails_naming_file_and_line(trl, marker):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    (run_dir / "logs" / "worker-1.log").write_text(f"fine\nfine\n{marker}\n")
    assert_fails(verify(spec, run_dir), "fatal log markers", "worker-1.log:3")


def test_handled_traceback_forwarded_from_a_ray_actor_is_not_fatal(trl):
    run_dir, spec = trl
    runtrees.trl_run(run_dir)
    # Ray Train logs a timed-out autoscaler request with its traceback and carries on.
    (run_dir / "logs" / "train.log").write_text(
        "\x1b[36m(TrainController pid=11433)\x1b[0m Failed to send resource request ...\n"
        "\x1b[36m(TrainController pid=11433)\x1b[0m Traceback (most recent call last):\n"
        "step 300/300 reward 1.0\n")
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    markers = next(c for c in report["checks"] if c["name"] == "fatal log markers")
    assert "1 handled traceback" in markers["detail"]
    # The same traceback from the driver itself is fatal.
    (run_dir / "logs" / "train.log").write_text("Traceback (most recent call last):\n")
    assert_fails(verify(spec, run_dir), "fatal log markers", "train.log:1")


# ---------------------------------------------------------------- verl


@pytest.fixture
def verl(tmp_path):
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec("verl", run_dir, train__steps=4, cluster__nodes=2, cluster__gpus_per_node=2,
                              cluster__accelerator="H100")
    return run_dir, spec


def test_verl_happy_path(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir)
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    assert report["facts"]["metrics_source"].endswith("logs/metrics.jsonl")


def test_verl_console_lines_are_enough(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir, file_logger=False)
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    assert report["facts"]["metrics_source"] == "console 'step:N' lines"


def test_verl_missing_rank_shard_fails_naming_the_rank(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir, drop_rank=3)
    assert_fails(verify(spec, run_dir), "actor checkpoint shards", "rank 3 of 4",
                        "model_world_size_4_rank_3.pt")


def test_verl_nan_loss_fails(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir, nan_loss_at=2)
    assert_fails(verify(spec, run_dir), "metric loss", "actor/pg_loss=None at step 2")


def test_verl_nan_loss_in_console_lines_fails(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir, nan_loss_at=3, file_logger=False)
    assert_fails(verify(spec, run_dir), "metric loss", "step 3")


def test_verl_short_run_fails(verl):
    run_dir, spec = verl
    runtrees.verl_run(run_dir, steps=2, target=4)
    bad = assert_fails(verify(spec, run_dir), "step target", "stopped at step 2 of 4")
    assert "latest checkpoint" in bad  # verl saved step 2, the spec wanted step 4


def test_verl_topology_mismatch_fails(verl):
    run_dir, spec = verl
    spec["cluster"]["nodes"] = 4  # asked for 4 x 2; the run (and its shards) were 2 x 2
    runtrees.verl_run(run_dir)
    bad = assert_fails(verify(spec, run_dir), "resolved topology", "trainer.nnodes=2 (spec wants 4)")
    assert "world size 4" in bad["actor checkpoint shards"]


def test_verl_ppo_needs_critic_shards(verl):
    run_dir, spec = verl
    spec.algo.update(name="ppo", adv_estimator="gae")
    runtrees.verl_run(run_dir)
    assert_fails(verify(spec, run_dir), "critic checkpoint shards", "no model_world_size")
    shutil.rmtree(run_dir)
    runtrees.verl_run(run_dir, critic=True)
    assert verify(spec, run_dir)["passed"]


def test_verl_checkpoint_path_can_be_overridden(verl, tmp_path):
    run_dir, spec = verl
    runtrees.verl_run(run_dir)
    elsewhere = tmp_path / "bucket-ckpt"
    shutil.move(run_dir / "checkpoints", elsewhere)
    assert not verify(spec, run_dir)["passed"]
    assert verify(spec, run_dir, paths={"ckpt_dir": str(elsewhere)})["passed"]


# ---------------------------------------------------------------- AReaL


@pytest.fixture
def areal(tmp_path):
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec("areal", run_dir, train__steps=3, cluster__nodes=2, cluster__gpus_per_node=8,
                              cluster__accelerator="A100")
    return run_dir, spec


def test_areal_happy_path(areal):
    run_dir, spec = areal
    runtrees.areal_run(run_dir)
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    assert report["facts"]["checkpoint"].endswith("globalstep2")


def test_areal_missing_checkpoint_fails(areal):
    run_dir, spec = areal
    runtrees.areal_run(run_dir, checkpoint=False)
    assert_fails(verify(spec, run_dir), "checkpoint", "no HF checkpoint")


def test_areal_short_run_fails(areal):
    run_dir, spec = areal
    runtrees.areal_run(run_dir, steps=2)
    bad = assert_fails(verify(spec, run_dir), "step target", "stopped at step 2 of 3")
    assert "globalstep1" in bad["checkpoint"]


# ---------------------------------------------------------------- RLinf


@pytest.fixture
def rlinf(tmp_path):
    run_dir = tmp_path / "runs" / "two-worker-grpo-pipeline" / "rid-1"
    spec = runtrees.make_spec("rlinf", run_dir, train__steps=2, cluster__nodes=2, cluster__gpus_per_node=2,
                              cluster__accelerator="A100")
    return run_dir, spec


def test_rlinf_happy_path(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir)
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    assert report["facts"]["metrics"]["actor/training/actor/lr"] == pytest.approx(1e-6)


def test_rlinf_one_distcp_shard_fails(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, shards=1)
    assert_fails(verify(spec, run_dir), "actor checkpoint shards", "1 non-empty *.distcp",
                        "actor rank (2)")


def test_rlinf_without_step_limit_line_fails(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, marker=False)
    assert_fails(verify(spec, run_dir), "step target", "Step limit given by max_steps")


def test_rlinf_nan_loss_fails(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, nan_loss=True)
    assert_fails(verify(spec, run_dir), "tensorboard", "final_loss=nan")


def test_rlinf_wider_actor_placement_needs_more_shards(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, actor="0-3", shards=2)
    assert_fails(verify(spec, run_dir), "actor checkpoint shards", "actor rank (4)")


@pytest.mark.parametrize(("resolved", "name", "needle"), [
    ({"cluster.component_placement.actor": "0-1"}, "resolved placement", "'actor': '0-1'"),
    ({"cluster.component_placement.rollout": 1}, "resolved placement", "'rollout': 1"),
    ({"runner.output_dir": "/workspace/results"}, "resolved outputs", "runner.output_dir=/workspace/results"),
    ({"runner.experiment_name": "grpo-1.5b"}, "resolved outputs", "runner.experiment_name=grpo-1.5b"),
])
def test_rlinf_resolved_request_must_match_the_rendered_one(rlinf, resolved, name, needle):
    """Seed 003's comparisons: what RLinf resolved against what the job asked for in plan/."""
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, resolved=resolved, shards=2)
    bad = assert_fails(verify(spec, run_dir), name, needle, f"requested in {run_dir}/plan/rlinf/rlaunch-grpo.yaml")
    assert set(bad) == {name}, bad  # nothing else is blamed


def test_rlinf_int_and_string_ranks_are_one_placement(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir, requested={"cluster.component_placement": {"rollout": 0, "inference": "1",
                                                                           "actor": "2-3", "reward": "0"}})
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    assert next(c for c in report["checks"] if c["name"] == "resolved placement")["detail"].startswith(
        "cluster.component_placement=")


def test_rlinf_without_a_plan_compares_with_the_spec(tmp_path):
    from rlaunch.config import load as config

    spec = config.load("rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio", "RUN_ID": "rid-1"})
    run_dir = tmp_path / "copy-of-rid-1"  # a copy of the run (make verify RUN_DIR=...) without plan/
    requested = Path(spec.paths.run_dir)
    runtrees.rlinf_run(run_dir, resolved={"runner.output_dir": str(requested.parent), "runner.experiment_name": "rid-1"})
    shutil.rmtree(run_dir / "plan")
    report = verify(spec, run_dir)
    assert report["passed"], failed(report)
    runtrees.rlinf_run(run_dir, resolved={"runner.output_dir": str(run_dir.parent)})
    shutil.rmtree(run_dir / "plan")
    assert_fails(verify(spec, run_dir), "resolved outputs", f"runner.output_dir={run_dir.parent}",
                 f"requested in the spec (no rendered config in the run's plan/): {requested.parent}")


def test_rlinf_without_a_plan_or_a_whole_spec_says_so(rlinf):
    run_dir, spec = rlinf
    runtrees.rlinf_run(run_dir)
    shutil.rmtree(run_dir / "plan")
    del spec["pins"]["dataset"]  # a partial spec.json: the adapter cannot render the requested config from it
    assert_fails(verify(spec, run_dir), "resolved placement", "requested placement unknown: no ",
                 "plan/rlinf/rlaunch-grpo.yaml")


@pytest.mark.parametrize(("placement", "ranks"), [({"actor": "2-3"}, 2), ({"actor,rollout": "0-7"}, 8),
                                                   ({"actor": 1}, 1), ({"actor": "0-1,4"}, 3),
                                                   ({"rollout": 0}, None), ({"actor": "all"}, None)])
def test_placement_ranks(placement, ranks):
    assert rlinf_placement.placement_ranks(placement) == ranks


# ---------------------------------------------------------------- CLI


def test_cli_reads_spec_from_run_dir_and_names_the_failure(tmp_path, capsys):
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec("verl", run_dir, train__steps=4, cluster__nodes=2, cluster__gpus_per_node=2,
                              cluster__accelerator="H100")
    runtrees.verl_run(run_dir, drop_rank=1)
    (run_dir / "spec.json").write_text(json.dumps(spec))
    assert postflight.main(["--run-dir", str(run_dir), "--exit-code", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("postflight: FAILED actor checkpoint shards: rank 1 of 4")
    assert json.loads((run_dir / "verification.json").read_text())["passed"] is False


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert postflight.main(["--run-dir", str(tmp_path)]) == 2
    assert "spec.json" in capsys.readouterr().err
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec("trl", run_dir)
    runtrees.trl_run(run_dir)
    (run_dir / "spec.json").write_text(json.dumps(spec))
    assert postflight.main(["--run-dir", str(run_dir), "--path", "nope=/x"]) == 2
    assert "unknown key" in capsys.readouterr().err
    assert postflight.main(["--run-dir", str(run_dir), "--path", "checkpoint"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("framework", frameworks.names())
def test_an_empty_run_dir_fails_cleanly(tmp_path, framework):
    """A run that wrote nothing: every framework's checks fail with a reason, none crashes."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = runtrees.make_spec(framework, run_dir, train__steps=3)
    report = verify(spec, run_dir)
    assert not report["passed"]
    assert all(c["detail"] for c in report["checks"])
    assert json.loads((run_dir / "verification.json").read_text())["passed"] is False

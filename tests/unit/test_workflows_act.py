"""The workflows under the real runner `act` (tests/actrun.py): a hostile input stops the job at the
input check and runs nothing; and the harness itself does what its docstring promises (inputs,
env, secrets, PATH stubs, the upload-artifact stand-in), on a small workflow of its own.

Each act run here takes about a second: the jobs stop before `make setup`, and `make` is a stub that
would record any call."""

from __future__ import annotations

import json
import textwrap

from actrun import Stub, run_workflow


def test_launch_with_a_backtick_preset_stops_at_the_input_check(tmp_path):
    marker = tmp_path / "ran"
    preset = f"rehearsal`touch {marker}`"
    run = run_workflow("launch.yml", {"infra": "local", "algo": "grpo", "preset": preset, "nodes": 2,
                                      "gpus_per_node": 0, "spot": False, "run_id": "t-act"},
                       tmp=tmp_path, stubs={"make": Stub()})
    assert not run.ok
    # Only the checkout and the check ran; nothing after it (setup, plan, launch, down, the upload).
    assert run.steps == {"Check out": "success", "Check inputs": "failure"}, run.log
    assert f"::error::preset {preset!r} not allowed: a preset name" in run.output("Check inputs")
    assert run.calls("make") == [] and run.uploaded == {}
    assert not marker.exists()


def test_down_with_a_command_in_run_id_stops_at_the_input_check(tmp_path):
    marker = tmp_path / "ran"
    run_id = f"r1$(touch {marker})"
    run = run_workflow("down.yml", {"infra": "local", "run_id": run_id}, tmp=tmp_path, stubs={"make": Stub()})
    assert run.steps == {"Check out": "success", "Check inputs": "failure"}, run.log
    assert f"::error::run_id {run_id!r} not allowed" in run.output("Check inputs")
    assert run.calls("make") == [] and not marker.exists()


HARNESS_WORKFLOW = """
name: harness
on:
  workflow_dispatch:
    inputs:
      word: {type: string, default: ""}
      flag: {type: boolean, default: false}
      count: {type: number, default: 1}
jobs:
  one:
    runs-on: ubuntu-24.04
    env:
      WORD: ${{ inputs.word }}
      FLAG: ${{ inputs.flag && 'on' || 'off' }}
      COUNT: ${{ inputs.count }}
    steps:
      - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09
      - name: Use them
        env:
          TOKEN: ${{ secrets.TOKEN }}
        run: |
          printf 'word=%s flag=%s count=%s extra=%s\\n' "$WORD" "$FLAG" "$COUNT" "$EXTRA"
          tool --x "$WORD" "a b"
          mkdir -p out/sub && printf '%s' "$TOKEN" >out/token && echo hi >out/sub/f && echo h >out/.hidden
          test -f Makefile   # the work tree's copy
      - name: Upload
        uses: actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02
        with:
          name: art-${{ env.COUNT }}
          path: out/
      - name: Fail
        run: exit 3
      - name: Never
        run: echo never
"""


def test_harness_runs_any_workflow_with_inputs_env_secrets_stubs_and_uploads(tmp_path):
    workflow = tmp_path / "harness.yml"
    workflow.write_text(textwrap.dedent(HARNESS_WORKFLOW))
    secret = 'line "one"\nline \\two'
    run = run_workflow(workflow, {"word": "w `x` $(y)", "flag": True, "count": 7}, tmp=tmp_path,
                       env={"EXTRA": "e 1"}, secrets={"TOKEN": secret}, stubs={"tool": Stub(stdout="tooled\n")})
    assert not run.ok and run.returncode != 0
    assert run.steps == {"actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09": "success",  # unnamed
                         "Use them": "success", "Upload": "success", "Fail": "failure"}, run.log
    assert "word=w `x` $(y) flag=on count=7 extra=e 1" in run.output("Use them")
    assert "tooled" in run.output("Use them")
    assert run.calls("tool") == [["--x", "w `x` $(y)", "a b"]]
    art = run.uploaded["art-7"]
    assert (art / "token").read_text() == secret and (art / "sub" / "f").read_text() == "hi\n"
    assert not (art / ".hidden").exists()  # upload-artifact v4 leaves hidden files out
    assert (run.workdir / "out" / "token").is_file()
    assert json.loads(json.dumps(run.events[0]))  # the raw JSON events are there for anything else


PATHS_WORKFLOW = """
name: paths
on: workflow_dispatch
jobs:
  one:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09
      - name: Make files
        env:
          TOKEN: ${{ secrets.TOKEN }}
          WHERE: ${{ vars.WHERE }}
        run: |
          mkdir -p b/r1 b/s/runs/x/r1/ckpt b/s/runs/x/r1/logs
          echo plan >b/r1/plan.txt; echo rep >b/s/runs/x/r1/v.json; echo log >b/s/runs/x/r1/logs/job.log
          echo big >b/s/runs/x/r1/ckpt/w.pt; echo one >b/lone.txt
          kubectl config current-context; kubectl get pods -n x || echo "get exit $?"; kubectl version
          kubectl apply -f - || echo "apply exit $?"
          printf '### title\\n| a | b |\\n' >>"$GITHUB_STEP_SUMMARY"; echo "where=$WHERE" >>"$GITHUB_STEP_SUMMARY"
      - name: Two paths, one excluded folder
        uses: actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02
        with:
          name: two
          path: |
            b/r1/
            b/s/runs/*/r1/
            !b/s/runs/*/r1/ckpt/
      - name: A lone file
        uses: actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02
        with:
          name: lone
          path: b/lone.txt
      - name: A wildcard
        uses: actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02
        with:
          name: glob
          path: b/s/runs/*/r1/logs/
"""


def test_harness_upload_roots_excludes_stub_replies_and_the_job_summary(tmp_path):
    workflow = tmp_path / "paths.yml"
    workflow.write_text(textwrap.dedent(PATHS_WORKFLOW))
    kubectl = Stub(stdout="v1\n", env=("TOKEN", "UNSET_ONE"),
                   replies={"config current-context": "ctx-a\n", "get pods": Stub(stderr="Forbidden\n", exit=1),
                            "apply": Stub(exit=4)})
    run = run_workflow(workflow, {}, tmp=tmp_path, secrets={"TOKEN": "t0k"}, variables={"WHERE": "here"},
                       stubs={"kubectl": kubectl})
    assert run.ok, run.log
    files = {name: sorted(p.relative_to(art).as_posix() for p in art.rglob("*") if p.is_file())
             for name, art in run.uploaded.items()}
    # upload-artifact v4: several paths -> their common folder is the root; `!` drops a folder and
    # all under it; a lone file -> its folder; one wildcard path -> the part before the wildcard.
    assert files == {"two": ["r1/plan.txt", "s/runs/x/r1/logs/job.log", "s/runs/x/r1/v.json"],
                     "lone": ["lone.txt"], "glob": ["x/r1/logs/job.log"]}
    out = run.output("Make files")
    assert "ctx-a" in out and "Forbidden" in out and "get exit 1" in out and "v1" in out and "apply exit 4" in out
    assert run.calls("kubectl") == [["config", "current-context"], ["get", "pods", "-n", "x"], ["version"],
                                    ["apply", "-f", "-"]]
    assert run.call_env("kubectl") == [{"TOKEN": "t0k"}] * 4
    assert run.summary() == "### title\n| a | b |\nwhere=here\n"

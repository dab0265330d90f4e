"""The modules a run script asks of the image's Python are exactly those the job's own steps import.

Each framework's steps (the accelerator workaround, preflight, postflight) run in a fresh
interpreter in which an import made by rlaunch's code of anything outside the standard library and
rlaunch fails unless rlaunch.verify.job_modules declares it; every declared module must also be
imported. Preflight's and the workaround's Ray parts are the ones that need no cluster (shipping
the node code, the checks on node answers, the node functions themselves); postflight reads a
whole output tree of the framework (tests/fixtures/runtrees.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch import verify

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("runtrees", ROOT / "tests" / "fixtures" / "runtrees.py")
runtrees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runtrees)

STEPS = r'''
import builtins, json, sys
from pathlib import Path

allowed, spec_path, run_dir = set(json.loads(sys.argv[1])), sys.argv[2], sys.argv[3]
seen, stdlib, real_import = set(), set(sys.stdlib_module_names), builtins.__import__


def guarded(name, globals=None, locals=None, fromlist=(), level=0):
    caller = (globals or {}).get("__name__") or ""
    top = name.partition(".")[0]
    if level == 0 and caller.startswith("rlaunch") and top not in stdlib and top != "rlaunch":
        if top not in allowed:
            raise ImportError(f"{caller} imports {name}, which rlaunch.verify.job_modules does not declare")
        seen.add(top)
    return real_import(name, globals, locals, fromlist, level)


builtins.__import__ = guarded
from rlaunch import verify
from rlaunch.config import specjson
from rlaunch.frameworks import accel as accel_rules
from rlaunch.verify import accel, cluster, postflight, preflight, probes

spec = specjson.read(spec_path)  # as the steps read it (rlaunch.verify.report.load_spec)
rules = [r.as_dict() for r in accel_rules.rules_for(spec.framework.name, spec.cluster.accelerator)]
# The workaround step: its node code and its verdict.
cluster.ship_by_value(accel)
answer = {"rules": {r["name"]: accel.hide_metadata(list(r["hide"])) for r in rules}}
accel.evaluate(rules, [{"node_id": "n1", "ip": "10.0.0.1"}], {"n1": answer})
# Preflight: the env and inputs it gives the probes, the node code, every check on a node's answer.
verify.task_env(spec)
inputs = preflight.default_inputs(spec)
cluster.ship_by_value(*preflight.NODE_CODE)
probe = {"node_id": "n1", "node_ip": "10.0.0.1", "python": "3.11.9", "python_executable": sys.executable,
         "env": {"NCCL_IB_DISABLE": "1"}, "framework": {"version": "1", "commit": ""},
         "gpu": {"count": 0, "models": [], "drivers": [], "cuda": {"available": None, "count": 0}},
         "inputs": [probes.probe_input(p) for p in inputs], "storage": {"path": run_dir + "/.preflight/n1"},
         "accelerator": {r["name"]: accel.runtime_probe(r, False, 5) for r in rules}}
node = {"node_id": "n1", "ip": "10.0.0.1", "hostname": "h", "is_head": True, "cpus": 16, "gpus": 0}
preflight.evaluate(spec, [node], {"n1": probe}, {"n1": {"seen": {}, "storage": run_dir}}, 1, inputs)
# Postflight on the framework's whole output tree.
code = postflight.main(["--run-dir", run_dir, "--spec", spec_path, "--exit-code", "0"])
print("STEP_MODULES=" + json.dumps({"imported": sorted(seen), "postflight": code}))
'''

CASES = {
    "trl": ({"train__steps": 40}, runtrees.trl_run),
    "verl": ({"train__steps": 4, "cluster__gpus_per_node": 2, "cluster__accelerator": "H100"}, runtrees.verl_run),
    "areal": ({"train__steps": 3, "cluster__gpus_per_node": 8, "cluster__accelerator": "H100"}, runtrees.areal_run),
    "rlinf": ({"train__steps": 2, "cluster__gpus_per_node": 0, "cluster__accelerator": "A100-SXM4-80GB"},
              runtrees.rlinf_run),
}


def run_steps(framework: str, declared: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    dotted, make_run = CASES[framework]
    run_dir = tmp_path / "run"
    spec = runtrees.make_spec(framework, run_dir, cluster__nodes=2, pins__model={}, pins__dataset={}, **dotted)
    make_run(run_dir)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return subprocess.run([sys.executable, "-c", STEPS, json.dumps(declared), str(tmp_path / "spec.json"),
                           str(run_dir)], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "tools")},
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("framework", sorted(CASES))
def test_job_steps_import_exactly_the_declared_modules(framework, tmp_path):
    declared = verify.job_modules(framework)
    proc = run_steps(framework, declared, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1].split("=", 1)[1])
    assert result["postflight"] == 0, proc.stdout[-3000:]  # the whole tree was read, every check ran
    assert result["imported"] == sorted(declared)


def test_an_undeclared_import_is_caught(tmp_path):
    proc = run_steps("rlinf", ["ray", "tensorboard"], tmp_path)
    assert proc.returncode != 0
    assert "imports yaml, which rlaunch.verify.job_modules does not declare" in proc.stderr


def test_the_run_script_asks_for_those_and_not_fire():
    from rlaunch.plan import artifacts
    from rlaunch.config import load as config
    from rlaunch.backends.aistudio import backend as aistudio

    for preset, framework in (("rlinf-grpo-pipeline-1.5b", "rlinf"), ("rehearsal", "trl")):
        spec = config.load(preset, {"INFRA": "aistudio", "RUN_ID": "t-modules"})
        run = artifacts.finish(spec, aistudio.BACKEND.render(spec))["run.sh"]
        line = next(ln for ln in run.splitlines() if "find_spec(m) is None))'" in ln)
        assert line.split("'")[-1].split(")")[0].split() == verify.job_modules(framework)
        assert "fire" not in line

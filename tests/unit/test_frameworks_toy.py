"""Adding a framework needs its package, its config layer and its pins, and nothing else.

A copy of the repository's tools/, configs/ and templates/ gets a toy framework: the package
tools/rlaunch/frameworks/toy/ (descriptor, adapter, postflight), configs/framework/toy.yaml, and its
pins in configs/versions.yaml. No other file of the copy is touched. Then rlaunch, run from the copy,
knows it everywhere a framework is asked about: the config's framework.name, the registry the
scripts query, the topology rules and its CPU rule at plan, the job script, the AIStudio run
script's imports, preflight's CPU check, postflight's checks and compare's reward curve."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

PACKAGE = {
    "__init__.py": '''
        """Toy: a stand-in framework for the registry test."""
        from ...registry.frameworks import CpuRule, Descriptor, Images

        FRAMEWORK = Descriptor(
            name="toy",
            summary="a toy learner",
            cpu_rule=CpuRule("every", 2, "each toy learner takes two"),
            step_modules=("ray", "toy_metrics_module"),
            images=Images(dockerfile="docker/toy/Dockerfile", entrypoint_help=("-m", "toy_rl", "--help")),
        )
    ''',
    "adapter.py": '''
        import json

        from ...errors import ConfigError
        from ..base import ARTIFACTS, Framework


        class Toy(Framework):
            name = "toy"

            def command(self, spec):
                return ["python3", "-m", "toy_rl", "--config", f"{ARTIFACTS}/toy.json"]

            def files(self, spec):
                return {"toy.json": json.dumps({"run_dir": spec.paths.run_dir,
                                                "steps": spec.train.steps}) + "\\n"}

            def env(self, spec):
                return {"TOY_METRICS": spec.paths.run_dir + "/toy-metrics.jsonl"}

            def check(self, spec):
                if spec.algo.group_size < 2:
                    raise ConfigError("algo.group_size", spec.algo.group_size, ">= 2 for the toy learner")


        ADAPTER = Toy()
    ''',
    "postflight.py": '''
        import json
        from pathlib import Path

        from ...verify.postflight import is_finite
        from ...verify.report import check


        def layout(spec, run_dir):
            return {"metrics": Path(run_dir) / "toy-metrics.jsonl"}


        def rewards(where, run_dir):
            path = Path(where["metrics"])
            rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
            return [(r["step"], r["reward"]) for r in rows]


        def checks(spec, run_dir, where, facts):
            points = rewards(where, run_dir)
            bad = [s for s, v in points if not is_finite(v)]
            return [check("toy metrics", bool(points) and not bad,
                          f"{len(points)} steps" if points and not bad else f"no finite reward at {bad or 'any step'}")]
    ''',
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """The copy, with the toy added the way docs/development.md says a framework is added."""
    repo = tmp_path_factory.mktemp("toy-repo")
    for top in ("tools", "configs", "templates"):
        shutil.copytree(ROOT / top, repo / top, ignore=shutil.ignore_patterns("__pycache__"))
    package = repo / "tools" / "rlaunch" / "frameworks" / "toy"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    (repo / "configs" / "framework" / "toy.yaml").write_text("framework:\n  name: toy\n")
    versions = yaml.safe_load((repo / "configs" / "versions.yaml").read_text())
    versions["frameworks"]["toy"] = {"version": "0.1.0"}
    versions["images"]["toy"] = {"official": "example.org/toy:0.1.0", "rlaunch": "example.org/rlaunch-toy:0.1.0"}
    (repo / "configs" / "versions.yaml").write_text(yaml.safe_dump(versions, sort_keys=False))
    return repo


def rl(repo: Path, *argv: str, module: str = "rlaunch") -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(repo / "tools"), "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=repo,
                          env=env, timeout=300)


def test_only_the_package_the_layer_and_the_pins_were_added(repo):
    added = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    original = {str(p.relative_to(ROOT)) for top in ("tools", "configs", "templates")
                for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert added - original == {"tools/rlaunch/frameworks/toy/__init__.py", "tools/rlaunch/frameworks/toy/adapter.py",
                                "tools/rlaunch/frameworks/toy/postflight.py", "configs/framework/toy.yaml"}


def test_the_registry_the_scripts_ask_lists_it(repo):
    assert rl(repo, "frameworks", "list").stdout.split() == ["trl", "verl", "areal", "rlinf", "toy"]
    shown = json.loads(rl(repo, "frameworks", "show", "toy").stdout)
    assert shown["cpu_rule"] == {"where": "every", "count": 2, "why": "each toy learner takes two"}


def test_plan_renders_its_job_and_runs_its_rules(repo, tmp_path):
    out = tmp_path / "out"
    proc = rl(repo, "plan", "--FRAMEWORK=toy", "--RUN_ID=toy-1", f"--OUT={out}")
    assert proc.returncode == 0, proc.stderr
    assert "framework   toy 0.1.0" in proc.stdout
    job = (out / "job.sh").read_text()
    assert "python3 -m toy_rl --config \"${RLAUNCH_ARTIFACTS}/toy.json\"" in job
    assert "export TOY_METRICS=" in job and "export NCCL_IB_DISABLE=1" in job
    assert json.loads((out / "spec.json").read_text())["framework"]["name"] == "toy"
    bad = rl(repo, "plan", "--FRAMEWORK=toy", "--RUN_ID=toy-2", f"--OUT={tmp_path / 'bad'}", "--SET=algo.group_size=1")
    assert bad.returncode == 2 and "config: algo.group_size=1 (from SET): >= 2 for the toy learner" in bad.stderr
    cpus = rl(repo, "plan", "--FRAMEWORK=toy", "--RUN_ID=toy-3", f"--OUT={tmp_path / 'cpus'}",
              "--SET=cluster.cpus_per_node=1")
    assert cpus.returncode == 2 and "cluster.cpus_per_node=1" in cpus.stderr and "each toy learner takes two" in cpus.stderr
    assert not (tmp_path / "bad").exists() and not (tmp_path / "cpus").exists()


def test_an_unknown_framework_lists_the_new_one(repo, tmp_path):
    proc = rl(repo, "plan", "--FRAMEWORK=nope", f"--OUT={tmp_path / 'x'}")
    assert proc.returncode == 2 and "one of trl, verl, areal, rlinf, toy" in proc.stderr


def test_aistudio_run_script_imports_its_step_modules(repo, tmp_path):
    out = tmp_path / "ai"
    proc = rl(repo, "render", "--INFRA=aistudio", "--PRESET=rehearsal", "--FRAMEWORK=toy", "--RUN_ID=toy-ai",
              "--WORK_ROOT=/mnt/toy", f"--OUT={out}")
    assert proc.returncode == 0, proc.stderr
    assert "toy_metrics_module" in (out / "run.sh").read_text()


def test_preflight_postflight_and_compare_read_its_package(repo, tmp_path):
    out = tmp_path / "out"
    assert rl(repo, "render", "--FRAMEWORK=toy", "--RUN_ID=toy-pf", f"--OUT={out}").returncode == 0
    spec = json.loads((out / "spec.json").read_text())
    code = ("import json, sys; from rlaunch.verify import preflight, report; spec = report.load_spec(sys.argv[1]); "
            "node = {'node_id': 'n', 'ip': '10.0.0.1', 'is_head': True, 'cpus': 1, 'gpus': 0}; "
            "print(json.dumps(preflight.check_cpus(spec, [node])))")
    env = {"PYTHONPATH": str(repo / "tools"), "PATH": "/usr/bin:/bin"}
    found = subprocess.run([sys.executable, "-c", code, str(out / "spec.json")], capture_output=True, text=True,
                           env=env, timeout=120)
    assert json.loads(found.stdout)["passed"] is False and "each toy learner takes two" in found.stdout
    run_dir = Path(spec["paths"]["run_dir"])
    (run_dir / "logs").mkdir(parents=True)
    shutil.copy(out / "spec.json", run_dir / "spec.json")
    (run_dir / "logs" / "exit_code").write_text("0\n")
    (run_dir / "toy-metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": s / 4}) + "\n"
                                                       for s in range(1, 5)))
    proc = rl(repo, "--run-dir", str(run_dir), module="rlaunch.verify.postflight")
    assert proc.returncode == 0 and "toy metrics" in proc.stdout, proc.stdout + proc.stderr
    png = tmp_path / "c.png"
    proc = rl(repo, "compare", f"--RUNS={run_dir}", f"--OUT={png}")
    assert proc.returncode == 0 and png.is_file(), proc.stderr
    (run_dir / "toy-metrics.jsonl").write_text(json.dumps({"step": 1, "reward": float("nan")}) + "\n")
    proc = rl(repo, "--run-dir", str(run_dir), module="rlaunch.verify.postflight")
    assert proc.returncode == 1 and "FAILED toy metrics" in proc.stderr

"""Adding an infrastructure needs its backend package and its config layer, and nothing else.

A copy of the repository's tools/, configs/ and templates/ gets a toy infrastructure: the package
tools/rlaunch/backends/toy/ (`__init__` declaring INFRAS, `backend.py` the verbs) and
configs/infra/toy.yaml. No other file of the copy is touched. Then rlaunch, run from the copy, knows it
wherever an infrastructure is asked about: the INFRA knob (on a bare python3, as the workflows check
it), infra.name's allowed values, `make plan` (its render, its offline check and the steps it would
run), launch, down of a run known only by its id, `make runs`, and the capabilities it did not declare
(RESUME=1 is refused naming the infrastructures that have it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGE = {
    "__init__.py": '''
        """Toy: a stand-in infrastructure for the registry test."""
        from rlaunch.registry.backends import Infra

        INFRAS = (Infra("toy", order=50, name_prefix="toy-"),)
        ''',
    "backend.py": '''
        import json
        import os
        from pathlib import Path

        from rlaunch.registry import backends
        from rlaunch.backends.base import Answer, Backend, Run
        from rlaunch.plan import artifacts


        def _log(*words):
            with open(os.environ["TOY_LOG"], "a") as log:
                log.write(" ".join(words) + "\\n")


        class ToyBackend(Backend):
            name = "toy"

            def render(self, spec):
                cluster = backends.infra("toy").cluster_name(spec.run.id)
                files = artifacts.common(spec)  # spec.json, job.sh and the framework's files
                files["toy/cluster.json"] = json.dumps({"cluster": cluster, "nodes": spec.cluster.nodes})
                return files

            def check(self, spec, artifacts):
                return ["toy: cluster.json parsed: " + json.loads(artifacts["toy/cluster.json"])["cluster"]]

            def plan(self, spec, artifacts):
                return ["toy up " + json.loads(artifacts["toy/cluster.json"])["cluster"]]

            def launch(self, plan):
                _log("launch", json.loads((plan.out / "toy" / "cluster.json").read_text())["cluster"])
                return 0

            def status(self, run):
                _log("status", run.run_id)
                return 0

            logs = status

            def down(self, run):
                _log("down", run.name, "known" if run.kind else "by-id")
                return 0

            def runs(self, place):
                return Answer("toy ls", (Run("7-up", "toy", "UP", "toy cluster toy-7-up", nodes=2, gpus_per_node=0),))


        BACKEND = ToyBackend()
        ''',
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """The copy, with the toy added the way docs/development.md says an infrastructure is added."""
    repo = tmp_path_factory.mktemp("toy-infra-repo")
    for top in ("tools", "configs", "templates"):
        shutil.copytree(ROOT / top, repo / top, ignore=shutil.ignore_patterns("__pycache__"))
    package = repo / "tools" / "rlaunch" / "backends" / "toy"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    (repo / "configs" / "infra" / "toy.yaml").write_text("# INFRA=toy: the registry test's stand-in.\n"
                                                         "infra:\n  name: toy\n")
    return repo


def rl(repo: Path, *argv: str, module: str = "rlaunch", python: str = sys.executable,
       env: dict | None = None) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(repo / "tools"), "PATH": "/usr/bin:/bin", "HOME": str(repo),
           "TOY_LOG": str(repo / "toy.log"), "RLAUNCH_LAST_RUN": str(repo / "last-run"), **(env or {})}
    return subprocess.run([python, "-m", module, *argv], capture_output=True, text=True, cwd=repo, env=env,
                          timeout=300)


def calls(repo: Path) -> list[str]:
    log = repo / "toy.log"
    return log.read_text().splitlines() if log.exists() else []


def test_only_the_package_and_the_layer_were_added(repo):
    added = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    original = {str(p.relative_to(ROOT)) for top in ("tools", "configs", "templates")
                for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert added - original == {"tools/rlaunch/backends/toy/__init__.py", "tools/rlaunch/backends/toy/backend.py",
                                "configs/infra/toy.yaml"}


def test_the_knob_accepts_it_on_a_bare_python(repo):
    ok = rl(repo, "check", "INFRA", module="rlaunch.config.knobs", python="/usr/bin/python3", env={"INFRA": "toy"})
    assert ok.returncode == 0, ok.stderr
    bad = rl(repo, "check", "INFRA", module="rlaunch.config.knobs", python="/usr/bin/python3", env={"INFRA": "nope"})
    assert bad.returncode == 2 and "one of local, gcp, aws, azure, k8s, sky, kuberay, aistudio, toy" in bad.stderr


def test_plan_and_launch_use_its_backend(repo, tmp_path):
    out = tmp_path / "out"
    proc = rl(repo, "plan", "--INFRA=toy", "--PRESET=rehearsal", "--RUN_ID=7-up", f"--OUT={out}")
    assert proc.returncode == 0, proc.stderr
    assert "toy: cluster.json parsed: toy-7-up" in proc.stdout and "toy up toy-7-up" in proc.stdout
    assert json.loads((out / "spec.json").read_text())["infra"]["name"] == "toy" and (out / "job.sh").is_file()
    launched = rl(repo, "launch", "--INFRA=toy", "--PRESET=rehearsal", "--RUN_ID=7-up", f"--OUT={tmp_path / 'l'}")
    assert launched.returncode == 0, launched.stderr
    assert calls(repo)[-1] == "launch toy-7-up"


def test_down_by_id_and_runs_ask_it(repo):
    down = rl(repo, "down", "--INFRA=toy", "--RUN_ID=gone-1", "--OUT=/nonexistent/out")
    assert down.returncode == 0, down.stderr
    assert calls(repo)[-1] == "down gone-1 by-id"
    runs = rl(repo, "runs", "--INFRA=toy")
    assert runs.returncode == 0, runs.stderr
    assert "7-up" in runs.stdout and "toy" in runs.stdout and "2x CPU" in runs.stdout


def test_what_it_did_not_declare_is_refused_naming_who_has_it(repo, tmp_path):
    proc = rl(repo, "launch", "--INFRA=toy", "--PRESET=rehearsal", "--RUN_ID=7-up", f"--OUT={tmp_path / 'r'}",
              "--RESUME=1")
    assert proc.returncode == 2 and "RESUME='1'" in proc.stderr and "INFRA=local only; on toy" in proc.stderr
    ssh = rl(repo, "ssh", "--INFRA=toy", "--RUN_ID=7-up", f"--OUT={tmp_path / 'none'}")
    assert ssh.returncode == 2 and "a SkyPilot infrastructure (gcp, aws, azure, k8s, sky)" in ssh.stderr

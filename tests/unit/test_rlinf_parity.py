"""Parity with upstream: the RLinf config rlaunch renders for seed 003 is RLinf's own e2e config
(tests/e2e_tests/reasoning/qwen2.5-1.5b-grpo-pipeline-fsdp-sgl.yaml, composed with its defaults) at
the pinned commit plus seed 003's Hydra overrides, apart from paths and names.

Both are composed by RLinf's own Hydra setup (.venv-rlinf, `make setup-validators`) and compared
with every interpolation resolved. Seed 003's overrides get rlaunch's paths and names (run
directory, run id, model and data), so that a path or a name differs only where the seed leaves
upstream's in place: NAMES lists those keys. The upstream files are the SHA256-pinned ones of
configs/versions.yaml (rlaunch.validate.upstream: `make upstream`, or RLAUNCH_UPSTREAM_DIR pointing
at a clone that holds the commit); they are in neither RLinf's wheel nor its sdist. Without them or
the validator environment the test skips saying how to get them; under CI=true it fails."""

from __future__ import annotations

import posixpath

import pytest

from rlaunch.config import load as config
from rlaunch.errors import MissingPrerequisite
from rlaunch.registry import frameworks
from rlaunch.validate import loaders
from rlaunch.validate import upstream
from needs import missing

PRESET = "rlinf-grpo-pipeline-1.5b"
E2E = "tests/e2e_tests/reasoning/qwen2.5-1.5b-grpo-pipeline-fsdp-sgl.yaml"

# Seed 003's overrides of the e2e config (its run script), with its paths and names as fields.
SEED_003_OVERRIDES = [
    "hydra.job.chdir=false",
    "hydra.run.dir={output_dir}/hydra",
    "hydra.output_subdir=.hydra",
    "cluster.num_nodes=2",
    "runner.max_epochs=1",
    "runner.max_steps={steps}",
    "runner.val_check_interval=1",
    "runner.save_interval={steps}",
    "runner.output_dir={output_root}",
    "runner.experiment_name={run_id}",
    "runner.logger.log_path={output_dir}",
    "runner.logger.experiment_name={run_id}",
    "+runner.per_worker_log=true",
    "inference.model.model_path={model}",
    "inference.tokenizer.tokenizer_model={model}",
    "rollout.model.model_path={model}",
    "actor.model.model_path={model}",
    "actor.tokenizer.tokenizer_model={model}",
    "+actor.fsdp_config.save_full_model_weights=false",
    "data.train_data_paths=[{data_file}]",
    "data.val_data_paths=[{data_file}]",
    "data.seed=1234",
    "actor.seed=1234",
]
# Names the seed leaves as upstream has them: the logger's project (rlaunch: logging.project).
NAMES = {"runner.logger.project_name"}
# What rlaunch adds on purpose: a restarted attempt resumes from the run's newest checkpoint.
RESUME = {"runner.resume_dir": (None, "auto")}


def _need(what: str, how: str, offline: str = ""):
    """needs.missing, with the reason when this machine cannot reach where it comes from."""
    missing(f"{what} missing: {how}" + (f" (this machine cannot reach it: {offline})" if offline else ""), unreachable=bool(offline))


def flatten(tree, prefix: str = "") -> dict:
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out if tree else {prefix[:-1]: {}}
    return {prefix[:-1]: tree}


def normalized(dotted: str, value):
    # RLinf str()s every placement value (rlinf/scheduler/placement/placement.py): 0 and "0" are one.
    return str(value) if dotted.startswith("cluster.component_placement.") else value


def differences(upstream_cfg: dict, rendered_cfg: dict) -> dict[str, tuple]:
    a, b = flatten(upstream_cfg), flatten(rendered_cfg)
    return {key: (a.get(key, "<absent>"), b.get(key, "<absent>")) for key in sorted(set(a) | set(b))
            if normalized(key, a.get(key, "<absent>")) != normalized(key, b.get(key, "<absent>"))}


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """(upstream + seed 003, rlaunch's render, rlaunch's render with one drifted setting), composed."""
    if not loaders.available("rlinf"):
        _need("the RLinf validator environment", f"run `make setup-validators` ({loaders.venv_python('rlinf')})")
    root = tmp_path_factory.mktemp("rlinf-upstream")
    try:
        upstream.tree("rlinf", root)
    except MissingPrerequisite as err:
        _need("RLinf's pinned e2e config", str(err), upstream.unreachable("rlinf"))
    spec = config.load(PRESET, {"INFRA": "aistudio", "RUN_ID": "parity"})
    fw = frameworks.get("rlinf")
    run_dir = spec.paths.run_dir
    fields = {"output_dir": run_dir, "output_root": posixpath.dirname(run_dir), "run_id": spec.run.id,
              "model": spec.paths.model, "data_file": fw.data_file(spec), "steps": spec.train.steps}
    seed = {"config_dir": str(root / posixpath.dirname(E2E)), "config_name": posixpath.basename(E2E)[:-5],
            "overrides": [o.format(**fields) for o in SEED_003_OVERRIDES], "env": {"REPO_PATH": str(root)},
            "compose_only": True}
    drifted = config.load(PRESET, {"INFRA": "aistudio", "RUN_ID": "parity"},
                          ['framework.overrides=["algorithm.kl_beta=0.1"]'])
    requests = [seed, {**fw.loader_request(spec), "compose_only": True},
                {**fw.loader_request(drifted), "compose_only": True}]
    results = loaders.run("rlinf", requests)
    for request, result in zip(requests, results):
        assert result.get("ok"), (request.get("config_name"), result)
    return results


def test_rendered_config_is_upstreams_e2e_config_plus_seed_003(composed):
    seed, rendered, _ = composed
    found = differences(seed["config"], rendered["config"])
    diff = {k: v for k, v in found.items() if k not in NAMES and k not in RESUME}
    assert diff == {}, "\n".join(f"{k}: upstream+seed {a!r}, rlaunch {b!r}" for k, (a, b) in diff.items())
    assert {k: found.get(k) for k in RESUME} == RESUME
    assert rendered["hydra"] == seed["hydra"]  # run dir, .hydra subdir, no chdir, the stdout job logging
    assert seed["hydra"]["run.dir"].endswith("/parity/hydra") and seed["hydra"]["job_logging"] == "stdout"
    names = {k: v for k, v in found.items() if k not in RESUME}
    assert names == {"runner.logger.project_name": ("rlinf", "rlaunch")}  # the only name the seed keeps


def test_a_drifted_setting_is_named(composed):
    seed, _, drifted = composed
    diff = {k: v for k, v in differences(seed["config"], drifted["config"]).items()
            if k not in NAMES and k not in RESUME}
    assert diff == {"algorithm.kl_beta": (0.0, 0.1)}

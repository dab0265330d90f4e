"""The typed spec (rlaunch.config.spec): one model per section, frozen, every key of defaults.yaml typed; the
facts config.derive computes once, and that each is decided in one place."""

from __future__ import annotations

import ast
import json
from operator import attrgetter
from pathlib import Path

import pydantic
import pytest

from rlaunch.config import load as config
from rlaunch.config import pins
from rlaunch.config import spec, specjson
from rlaunch.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def load(preset: str = "", sets: str = "", rules: bool = True, **knobs):
    return config.load(preset, {"RUN_ID": "spec-t", **knobs}, sets, rules=rules)


def test_the_models_type_exactly_the_keys_of_defaults_yaml():
    assert set(spec.KEYS) == set(config._flat(config.read_defaults()))


def test_the_installed_pydantic_is_the_launcher_lock_s():
    # pydantic arrives with ray and skypilot; the lock (locks.launcher) is its pin.
    lock = (ROOT / pins.get_str("locks.launcher")).read_text()
    assert f"\npydantic=={pydantic.VERSION}\n" in lock


def test_a_spec_is_frozen():
    s = load()
    with pytest.raises(pydantic.ValidationError):
        s.cluster.nodes = 3
    assert s.cluster.nodes == 2
    with pytest.raises(TypeError):
        s["cluster"]  # read by attribute only (a section is not a mapping)


def test_spec_json_reads_back_as_the_same_spec(tmp_path):
    s = load("verl-grpo-gsm8k-32b", INFRA="kuberay")
    (tmp_path / "spec.json").write_text(s.json_text())
    assert spec.Spec.read(tmp_path / "spec.json") == s
    (tmp_path / "spec.json").write_text('{"run": {}}')
    with pytest.raises(ConfigError, match="spec.json="):
        spec.Spec.read(tmp_path / "spec.json")


def test_spec_json_read_on_the_nodes_reads_as_the_spec():
    """rlaunch.config.specjson: what the nodes read of spec.json is, key by key and type by type, what
    the Spec holds; a key is set as a key, never as an attribute (that would be lost)."""
    s = load("verl-grpo-gsm8k-32b", INFRA="kuberay")
    node = specjson.view(json.loads(s.json_text()))
    for key in [*spec.KEYS, "preset", *(f"{part}.{name}" for part, model in
                                        (("pins", spec.Pins), ("paths", spec.Paths), ("derived", spec.Derived))
                                        for name in model.model_fields)]:
        mine, theirs = attrgetter(key)(s), attrgetter(key)(node)
        assert isinstance(theirs, type(mine)) and theirs == mine, key  # a mapping: a dict (SpecJson)
    node["cluster"]["nodes"] = 7
    assert node.cluster.nodes == 7
    with pytest.raises(AttributeError):
        node.cluster.nodes = 8  # type: ignore[misc]


def test_descriptions_name_type_and_bounds():
    assert spec.describe("cluster.ray_port") == "an integer >= 1 and <= 65535"
    assert spec.describe("rollout.gpu_memory_utilization") == "a number <= 1"
    assert spec.describe("storage.store") == "one of '', gcs, s3, azure, r2, ibm, oci"
    assert spec.describe("framework.overrides") == "a list of strings"
    assert spec.describe("infra.spot") == "true or false"


def test_derived_ray_nodes_and_the_cpu_only_head():
    plain = load("rehearsal", INFRA="kuberay")
    assert plain.derived.ray_nodes == 2 and not plain.derived.cpu_only_head
    assert plain.derived.head_ray_cpus is None
    gke = load("verl-grpo-gsm8k-32b", INFRA="kuberay")
    assert gke.derived.cpu_only_head and gke.derived.ray_nodes == gke.cluster.nodes + 1 == 5
    assert gke.derived.head_ray_cpus == gke.infra.kuberay.head_cpus == 12  # verl wants CPUs on the head
    trl_head = load("rehearsal", "cluster.cpu_head=true", INFRA="kuberay")
    assert trl_head.derived.head_ray_cpus == 0  # num-cpus "0": nothing lands on the head
    # cpu_head means a KubeRay head pod; elsewhere the head is a node like the others.
    assert load(sets="cluster.cpu_head=true").derived.ray_nodes == 2


def test_derived_nccl_env_follows_rdma():
    assert load().derived.nccl_env == {"NCCL_IB_DISABLE": "1"}
    assert load(RDMA="1").derived.nccl_env == {}


def test_derived_model_path_is_the_pinned_snapshot_unless_model_path_names_another():
    s = load("verl-ppo-gsm8k-0.5b", INFRA="gcp")
    assert s.paths.model == s.paths.model_dir
    assert s.model.path == pins.load_versions()["models"]["qwen2.5-0.5b-instruct"]["hf_id"]  # stays visible
    other = load("verl-ppo-gsm8k-0.5b", "model.path=/storage/my-model", INFRA="gcp")
    assert other.paths.model == "/storage/my-model"


def _string_constants(path: Path, value: str) -> list[str]:
    """Where `value` stands as a string literal in a module: 'module.function' (or 'module')."""
    tree = ast.parse(path.read_text())
    found = []

    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            name = f"{where}.{child.name}" if isinstance(child, (ast.FunctionDef, ast.ClassDef)) else where
            if isinstance(child, ast.Constant) and child.value == value:
                found.append(where)
            walk(child, name)

    walk(tree, path.stem)
    return found


def test_nccl_ib_disable_is_decided_in_one_function():
    """config.nccl_env decides it; everything else reads spec.derived.nccl_env. The rehearsal trainer
    only names the variable among those it forwards to its Ray Train workers."""
    places = {}
    for path in sorted((ROOT / "tools" / "rlaunch").rglob("*.py")):
        for where in _string_constants(path, "NCCL_IB_DISABLE"):
            places[f"{path.relative_to(ROOT / 'tools')}:{where}"] = True
    assert set(places) == {"rlaunch/config/load.py:load.nccl_env", "rlaunch/rehearsal/train.py:train"}, places


def test_the_cross_key_rules_run_once_before_render(monkeypatch):
    """config.check is the one pass: the framework's topology rules and the infrastructure's run
    there, once, and rendering relies on it."""
    from rlaunch.registry import backends, frameworks
    from rlaunch.plan import artifacts

    calls = []
    verl = type(frameworks.get("verl"))
    monkeypatch.setattr(verl, "check", lambda self, s: calls.append("verl"))
    monkeypatch.setattr(type(backends.get("kuberay")), "rules", lambda self, s: calls.append("kuberay"))
    s = load("verl-grpo-gsm8k-32b", INFRA="kuberay")
    assert calls == ["verl", "kuberay"]
    artifacts.finish(s, backends.get("kuberay").render(s))
    assert calls == ["verl", "kuberay"]


def test_an_infrastructure_rule_stops_the_load_naming_the_key():
    with pytest.raises(ConfigError, match=r"config: framework.image='official' \(from SET\): rlaunch on INFRA=kuberay"):
        load("rehearsal", "framework.image=official", INFRA="kuberay")
    # Finding a run by its id needs only where to ask: the launch rules are left out.
    assert load("rehearsal", "framework.image=official", INFRA="kuberay", rules=False)

"""The framework/accelerator rules (seed 003's A100 workaround): which specs they apply to, the node
side run for real in a throwaway venv standing in for the image's (metadata hidden, refused outside
the environment, idempotent; the child process that asks CUDA and imports the rule's modules), and
the job step's verdicts. The step on a real cluster runs in test_aistudio_run.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlaunch.config import load as config
from rlaunch.frameworks import accel as rules
from rlaunch.verify import accel

ROOT = Path(__file__).resolve().parents[2]
RULE = rules.RULES[0]


def test_the_rule_applies_to_rlinf_on_a100_only():
    spec = config.load("rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio", "RUN_ID": "t-accel"})
    assert [r.name for r in rules.rules_for(spec.framework.name, spec.cluster.accelerator)] == ["a100-flash-attn-4"]
    assert RULE.hide == ("flash-attn-4",) and RULE.compute_capability == "8.0"
    assert RULE.imports == ("transformer_engine.pytorch", "sglang")
    assert rules.rules_for(spec.framework.name, "H100") == []
    verl = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "gcp", "ACCELERATOR": "A100", "RUN_ID": "t-accel"})
    assert rules.rules_for(verl.framework.name, verl.cluster.accelerator) == []
    assert [rules.family(a) for a in ("A100-SXM4-80GB", "a100_80gb", "A100", "")] == ["a100", "a100", "a100", ""]


# ---------------------------------------------------------------- the node side, in a real venv


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory):
    """A bare venv (no pip): the image's /opt/venv/reason stand-in. Its python runs rlaunch's node code
    with the standard library only, as the image's python does."""
    venv = tmp_path_factory.mktemp("image") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    return {"python": venv / "bin" / "python", "site": site}


def install_dist(site: Path, name: str = "flash_attn_4", version: str = "4.0.0b4") -> Path:
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    return dist


def on_node(python: Path, code: str, pythonpath: list[Path] = ()) -> dict:
    """Run code in that python with rlaunch importable (as home/tools on the cluster); its JSON answer."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(map(str, [ROOT / "tools", *pythonpath]))}
    proc = subprocess.run([str(python), "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


HIDE = """
import importlib.metadata as md, json
from rlaunch.verify import accel
records = accel.hide_metadata(["flash-attn-4", "not-installed-here"])
try:
    seen = md.version("flash-attn-4")
except md.PackageNotFoundError:
    seen = None
print(json.dumps({"records": records, "seen": seen}))
"""


def test_hiding_flash_attn_4_in_the_jobs_python_is_real_and_idempotent(image_venv):
    dist = install_dist(image_venv["site"])
    first = on_node(image_venv["python"], HIDE)
    assert first["seen"] is None
    hidden, absent = first["records"]
    assert hidden["action"] == "hidden" and hidden["path"] == f"{dist.resolve()}{accel.HIDDEN}"
    assert absent["action"] == "absent"
    assert not dist.exists() and Path(hidden["path"], "METADATA").is_file()  # renamed, not deleted
    again = on_node(image_venv["python"], HIDE)
    assert again["records"][0]["action"] == "already hidden" and again["seen"] is None


def test_metadata_outside_the_jobs_environment_is_never_touched(image_venv, tmp_path):
    elsewhere = install_dist(tmp_path / "shared-site")  # e.g. a directory on the shared storage
    answer = on_node(image_venv["python"], HIDE, pythonpath=[tmp_path / "shared-site"])
    record = answer["records"][0]
    assert record["action"] == "refused" and "is outside the job's Python environment" in record["error"]
    assert elsewhere.is_dir() and answer["seen"] == "4.0.0b4"


PROBE = """
import json
from rlaunch.verify import accel
rule = {"hide": ["flash-attn-4"], "imports": ["transformer_engine.pytorch", "sglang"]}
print(json.dumps(accel.runtime_probe(rule, expect_gpus=%s, timeout_s=60)))
"""


def test_runtime_probe_asks_a_child_of_the_jobs_python(image_venv, tmp_path):
    """The child imports the rule's modules (stand-ins here: one that fails as TE does on A100 without
    FlashAttention) and asks torch for the compute capabilities; the venv has no torch, and says so."""
    mods = tmp_path / "mods"
    (mods / "transformer_engine").mkdir(parents=True)
    (mods / "transformer_engine" / "__init__.py").write_text("")
    (mods / "transformer_engine" / "pytorch.py").write_text(
        "print('noise on stdout')\nraise RuntimeError('no usable FlashAttention kernel')\n")
    (mods / "sglang").mkdir()
    (mods / "sglang" / "__init__.py").write_text("")
    answer = on_node(image_venv["python"], PROBE % "True", pythonpath=[mods])
    assert answer["python_executable"] == str(image_venv["python"])
    assert answer["imports"] == {"transformer_engine.pytorch": "RuntimeError: no usable FlashAttention kernel",
                                 "sglang": "ok"}
    assert answer["cuda_error"].startswith("ModuleNotFoundError") and answer["capabilities"] == []
    cpu = on_node(image_venv["python"], PROBE % "False", pythonpath=[mods])
    assert set(cpu) == {"python_executable", "visible"}  # no GPU: nothing imported, nothing asked of CUDA


# ---------------------------------------------------------------- the job step


def test_verdict_names_the_node_and_the_known_cause():
    nodes = [{"node_id": "a", "ip": "10.0.0.1"}, {"node_id": "b", "ip": "10.0.0.2"}]
    ok = {"rules": {RULE.name: [{"name": "flash-attn-4", "action": "hidden", "path": "/x"}]}}
    refused = {"rules": {RULE.name: [{"name": "flash-attn-4", "action": "refused", "error": "cannot rename /x"}]}}
    [good] = accel.evaluate([RULE.as_dict()], nodes, {"a": ok, "b": ok})
    assert good["passed"] and "flash-attn-4 hidden on 2 nodes" in good["detail"]
    [bad] = accel.evaluate([RULE.as_dict()], nodes, {"a": ok, "b": refused})
    assert not bad["passed"] and bad["node"] == "10.0.0.2"
    assert bad["detail"].startswith("cannot rename /x; known A100 failure of the RLinf image (seed 003)")
    [silent] = accel.evaluate([RULE.as_dict()], nodes, {"a": ok, "b": {"error": "no answer within 5 s"}})
    assert silent["node"] == "10.0.0.2" and "no answer within 5 s" in silent["detail"]


def _spec_file(tmp_path: Path, preset: str, knobs: dict) -> Path:
    spec = config.load(preset, {"RUN_ID": "t-accel", **knobs}, f"storage.mount={tmp_path}")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.dump()))
    return path


def test_step_without_a_rule_does_nothing_and_says_so(tmp_path, capsys):
    spec = _spec_file(tmp_path, "rehearsal", {"INFRA": "aistudio"})
    assert accel.main(["--spec", str(spec), "--out", str(tmp_path / "a.json")]) == 0
    assert "no framework/accelerator rule for trl" in capsys.readouterr().out
    assert json.loads((tmp_path / "a.json").read_text())["rules"] == []


def test_step_without_a_cluster_fails_within_its_deadline(tmp_path, monkeypatch, capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    spec = _spec_file(tmp_path, "rlinf-grpo-pipeline-1.5b", {"INFRA": "aistudio"})
    started = time.monotonic()
    assert accel.main(["--spec", str(spec), "--out", str(tmp_path / "a.json"), "--timeout", "1"]) == 1
    assert time.monotonic() - started < 20
    assert f"accelerator: FAILED ray cluster: cannot connect to RAY_ADDRESS=127.0.0.1:{port}" in capsys.readouterr().err

"""Preflight: the rules on synthetic node reports (fast), the input probe on real files, and the whole
thing on a REAL 3-node Ray cluster of network namespaces (`-m cluster`, root only): it passes, and
it fails naming node and check when one node's input differs, when a node is missing, and when the
"shared" run directory is a separate directory per node ({node_ip} in the path)."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlaunch.verify import preflight, probes as on_node, report
from needs import missing

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("runtrees", REPO / "tests" / "fixtures" / "runtrees.py")
runtrees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runtrees)


# ---------------------------------------------------------------- rules on synthetic reports


def node(i: int, head: bool = False, cpus: float = 4) -> dict:
    return {"node_id": f"id{i}", "ip": f"10.0.0.{i}", "hostname": "h", "is_head": head, "cpus": cpus, "gpus": 0}


def probe(i: int, *, gpus: int = 0, model: str = "NVIDIA H100 80GB HBM3", driver: str = "550.54",
          env: dict | None = None, version: str = "0.9.1", commit: str = "", python: str = "3.11.9",
          digest: str = "aa" * 32, storage_ok: bool = True) -> dict:
    return {
        "node_id": f"id{i}", "node_ip": f"10.0.0.{i}", "python": python,
        "env": env if env is not None else {"NCCL_IB_DISABLE": "1"},
        "framework": {"version": version, "commit": commit},
        "gpu": {"count": gpus, "models": [model] if gpus else [], "drivers": [driver] if gpus else [],
                "cuda": {"available": bool(gpus), "count": gpus}},
        "inputs": [{"path": "/data/x", "problems": [], "digest": digest}],
        "storage": {"path": f"/runs/r/.preflight/id{i}", **({} if storage_ok else {"error": "EROFS"})},
    }


def peers(n: int, missing: tuple[int, int] | None = None) -> dict:
    out = {}
    for i in range(1, n + 1):
        seen = {f"id{j}": "ok" for j in range(1, n + 1) if j != i}
        if missing and missing[0] == i:
            seen[f"id{missing[1]}"] = "missing"
        out[f"id{i}"] = {"node_id": f"id{i}", "node_ip": f"10.0.0.{i}", "storage": "/runs/r/.preflight", "seen": seen}
    return out


@pytest.fixture
def gpu_spec(tmp_path):
    spec = runtrees.make_spec("verl", tmp_path, cluster__nodes=3, cluster__gpus_per_node=8,
                              cluster__accelerator="H100")
    spec["pins"]["framework_version"] = "0.9.1"
    return spec


def evaluate(spec, probes, nodes=None, peer=None, expected=3):
    nodes = nodes or [node(1, head=True, cpus=16), node(2), node(3)]
    probes = {p["node_id"]: p for p in probes}
    return preflight.evaluate(spec, nodes, probes, peer or peers(len(probes)), expected, ["/data/x"])


def failures(checks) -> dict[str, dict]:
    return {c["name"]: c for c in checks if not c["passed"]}


def test_all_consistent_passes(gpu_spec):
    checks = evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)])
    assert not failures(checks), failures(checks)


@pytest.mark.parametrize(("odd", "name", "needle"), [
    ({"gpus": 4}, "gpu count", "4 GPUs, cluster.gpus_per_node=8"),
    ({"model": "NVIDIA A100-SXM4-80GB"}, "gpu model", "A100"),
    ({"driver": "535.1"}, "gpu driver", "535.1"),
    ({"env": {}}, "nccl env", "NCCL_IB_DISABLE=unset"),
    ({"python": "3.10.12"}, "python", "3.10.12"),
    ({"version": "0.8.0"}, "framework version", "0.8.0"),
    ({"digest": "bb" * 32}, "input", "differs"),
    ({"storage_ok": False}, "shared storage", "EROFS"),
])
def test_one_odd_node_is_named(gpu_spec, odd, name, needle):
    probes = [probe(1, gpus=8), probe(2, gpus=8), probe(3, **{"gpus": 8, **odd})]
    bad = failures(evaluate(gpu_spec, probes))
    assert name in bad, bad
    assert bad[name]["node"] == "10.0.0.3"
    assert needle in bad[name]["detail"]


def test_rdma_does_not_need_nccl_ib_disable(gpu_spec):
    gpu_spec["infra"]["rdma"] = True
    runtrees.rederive(gpu_spec)
    assert not failures(evaluate(gpu_spec, [probe(i, gpus=8, env={}) for i in (1, 2, 3)]))


def test_accelerator_must_match(gpu_spec):
    gpu_spec["cluster"]["accelerator"] = "A100-80GB"
    bad = failures(evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)]))
    assert "H100" in bad["gpu type"]["detail"]


@pytest.mark.parametrize(("accelerator", "model", "ok"), [
    ("H100", "NVIDIA H100 80GB HBM3", True), ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
    ("A100-80GB", "NVIDIA A100-SXM4-40GB", False), ("H100-MEGA-80GB", "NVIDIA H100 80GB HBM3", True),
    ("H200", "NVIDIA H100 80GB HBM3", False), ("", "anything", True)])
def test_accelerator_names(accelerator, model, ok):
    assert preflight._is_accelerator(model, accelerator) is ok


def test_torch_without_cuda_is_named(gpu_spec):
    probes = [probe(i, gpus=8) for i in (1, 2, 3)]
    probes[1]["gpu"]["cuda"] = {"available": False, "count": 0}
    probes[1]["env"]["CUDA_VISIBLE_DEVICES"] = ""
    bad = failures(evaluate(gpu_spec, probes))
    assert bad["cuda visible"]["node"] == "10.0.0.2" and "CUDA_VISIBLE_DEVICES=)" in bad["cuda visible"]["detail"]
    probes[1]["gpu"]["cuda"] = {"available": None, "count": 0, "error": "torch not importable"}
    assert "cuda visible" not in failures(evaluate(gpu_spec, probes))


def test_verl_needs_ten_cpus_on_the_head(gpu_spec):
    nodes = [node(1, head=True, cpus=4), node(2), node(3)]
    bad = failures(evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)], nodes=nodes))
    assert bad["ray cpus"]["node"] == "10.0.0.1" and ">= 10" in bad["ray cpus"]["detail"]


def test_framework_pins(gpu_spec):
    gpu_spec["pins"]["framework_commit"] = "a1b2c3d4e5f6" + "0" * 28
    probes = [probe(i, gpus=8, commit="0123456789abcdef") for i in (1, 2, 3)]
    assert "a1b2c3d4e5f6" in failures(evaluate(gpu_spec, probes))["framework pin"]["detail"]
    probes = [probe(i, gpus=8, version="absent") for i in (1, 2, 3)]
    assert "not importable" in failures(evaluate(gpu_spec, probes))["framework"]["detail"]


def test_storage_not_shared_names_both_nodes(gpu_spec):
    bad = failures(evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)], peer=peers(3, missing=(2, 3))))
    detail = bad["shared storage"]["detail"]
    assert bad["shared storage"]["node"] == "10.0.0.2" and "node 10.0.0.2 cannot see node 10.0.0.3" in detail


def test_missing_node_and_silent_probe(gpu_spec):
    probes = [probe(1, gpus=8), probe(2, gpus=8), {"node_id": "id3", "error": "no answer within 120 s"}]
    bad = failures(evaluate(gpu_spec, probes, peer=peers(3, missing=(1, 3)), expected=4))
    assert "expected 4" in bad["node count"]["detail"]
    assert bad["probe"]["node"] == "10.0.0.3"
    assert "shared storage" not in bad  # the silent node wrote no token: not a storage finding


def test_kuberay_cpu_head_counts_as_a_node_without_gpus(gpu_spec):
    gpu_spec["infra"]["name"] = "kuberay"
    gpu_spec["cluster"].update(cpu_head=True, nodes=2)
    runtrees.rederive(gpu_spec)
    assert preflight.expected_nodes(gpu_spec) == 3
    probes = [probe(1, gpus=0), probe(2, gpus=8), probe(3, gpus=8)]
    assert not failures(evaluate(gpu_spec, probes))


def test_trl_needs_a_cpu_on_every_node_but_a_kuberay_cpu_only_head(tmp_path):
    # The CPU-only head (num-cpus 0) runs the driver, not one of trl's Ray Train workers.
    spec = runtrees.make_spec("trl", tmp_path, cluster__nodes=2)
    nodes = [node(1, head=True, cpus=0), node(2, cpus=2), node(3, cpus=2)]
    probes = [probe(i) for i in (1, 2, 3)]
    bad = failures(preflight.evaluate(spec, nodes, {p["node_id"]: p for p in probes}, peers(3), 3, []))
    assert bad["ray cpus"]["node"] == "10.0.0.1" and "every node" in bad["ray cpus"]["detail"]
    spec["infra"]["name"] = "kuberay"
    spec["cluster"]["cpu_head"] = True
    runtrees.rederive(spec)
    assert "ray cpus" not in failures(preflight.evaluate(spec, nodes, {p["node_id"]: p for p in probes},
                                                         peers(3), 3, []))
    nodes[2]["cpus"] = 0  # a worker without CPUs still fails, named
    bad = failures(preflight.evaluate(spec, nodes, {p["node_id"]: p for p in probes}, peers(3), 3, []))
    assert bad["ray cpus"]["node"] == "10.0.0.3"


def test_python_executable_must_be_under_image_bin(gpu_spec):
    """Seed 003: the job's Python is the image's venv's on every node, recorded and compared."""
    probes = [probe(i, gpus=8) for i in (1, 2, 3)]
    for p, exe in zip(probes, ["/opt/venv/reason/bin/python", "/opt/venv/reason/bin/python3", "/usr/bin/python3"]):
        p["python_executable"] = exe
    ok = next(c for c in evaluate(gpu_spec, probes) if c["name"] == "python executable")
    assert ok["passed"] and "not compared" in ok["detail"] and "/usr/bin/python3" in ok["detail"]
    gpu_spec["infra"]["image_bin"] = "/opt/venv/reason/bin/"
    bad = failures(evaluate(gpu_spec, probes))["python executable"]
    assert bad["node"] == "10.0.0.3"
    assert "sys.executable=/usr/bin/python3, not under infra.image_bin=/opt/venv/reason/bin" in bad["detail"]
    probes[2]["python_executable"] = "/opt/venv/reason/binx/python"  # a sibling directory is not under it
    assert failures(evaluate(gpu_spec, probes))["python executable"]["node"] == "10.0.0.3"
    probes[2]["python_executable"] = "/opt/venv/reason/bin/python"
    assert "python executable" not in failures(evaluate(gpu_spec, probes))


# ---------------------------------------------------------------- NVLink on GB200 (seed 004)


SMI_Q = """
GPU 00000008:06:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : {state}
        Status                            : {status}
        CliqueId                          : {clique}
        ClusterUUID                       : 5a3d8f2e-0000-4000-8000-00000000abcd
        Health
            Bandwidth                     : Full
    Processes                             : None
"""
P2P = """ \tGPU0\tGPU1\t
 GPU0\tX\t{cell}\t
 GPU1\t{cell}\tX\t

Legend:

  X    = Self
  OK   = Status Ok
  NS   = Not supported
"""


def gb200_probe(i: int, *, state="Completed", status="Success", clique="32766", cell="OK") -> dict:
    out = probe(i, gpus=4, model="NVIDIA GB200", env={})
    out["gpu"]["nvlink"] = {"fabric": on_node.parse_fabric(SMI_Q.format(state=state, status=status, clique=clique)),
                            "p2p_not_ok": on_node.parse_p2p(P2P.format(cell=cell))}
    return out


@pytest.fixture
def gb200_spec(tmp_path):
    spec = runtrees.make_spec("verl", tmp_path, cluster__nodes=3, cluster__gpus_per_node=4,
                              cluster__accelerator="GB200", infra__rdma=True)
    spec["pins"]["framework_version"] = "0.9.1"
    return spec


def test_nvidia_smi_fabric_and_p2p_are_parsed():
    fabric = on_node.parse_fabric(SMI_Q.format(state="Completed", status="Success", clique="7"))
    assert fabric == [{"state": "Completed", "status": "Success", "cliqueid": "7",
                       "clusteruuid": "5a3d8f2e-0000-4000-8000-00000000abcd"}]
    assert on_node.parse_p2p(P2P.format(cell="OK")) == []
    assert on_node.parse_p2p(P2P.format(cell="NS")) == ["GPU0-GPU1: NS", "GPU1-GPU0: NS"]


def test_gb200_nodes_in_one_completed_fabric_pass(gb200_spec):
    checks = {c["name"]: c for c in evaluate(gb200_spec, [gb200_probe(i) for i in (1, 2, 3)])}
    assert checks["nvlink p2p"]["passed"] and checks["nvlink fabric"]["passed"], checks
    assert checks["nvlink clique"]["passed"] and "/32766 on all 3 nodes" in checks["nvlink clique"]["detail"]


@pytest.mark.parametrize(("odd", "name", "needle"), [
    ({"state": "In Progress", "status": "N/A"}, "nvlink fabric", "fabric state In Progress"),
    ({"clique": "1"}, "nvlink clique", "on 10.0.0.3"),
    ({"cell": "NS"}, "nvlink p2p", "P2P not OK: GPU0-GPU1: NS"),
])
def test_a_gb200_node_off_the_fabric_is_named(gb200_spec, odd, name, needle):
    bad = failures(evaluate(gb200_spec, [gb200_probe(1), gb200_probe(2), gb200_probe(3, **odd)]))
    assert name in bad and needle in bad[name]["detail"] and bad[name]["node"] == "10.0.0.3", bad


def test_nvlink_probe_on_a_node_without_gpus_is_recorded_as_skipped(gb200_spec, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda _: None)  # no nvidia-smi, no GPUs
    assert on_node.gpu_info(False, nvlink=True)["nvlink"] == {"skipped": "no GPUs on this node"}
    probes = [probe(i, gpus=4, model="NVIDIA GB200", env={}) for i in (1, 2, 3)]
    for p in probes:
        p["gpu"]["nvlink"] = {"skipped": "no GPUs on this node"}
    checks = {c["name"]: c for c in evaluate(gb200_spec, probes)}
    assert checks["nvlink"]["skipped"] and "no GPUs on this node" in checks["nvlink"]["detail"]


def test_nvlink_is_not_checked_off_gb200(gpu_spec):
    assert not preflight.nvlink_expected(gpu_spec)
    assert not any(c["name"].startswith("nvlink") for c in evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)]))


# ---------------------------------------------------------------- framework/accelerator rules (A100)

RULE = "a100-flash-attn-4"


@pytest.fixture
def a100_spec(tmp_path):
    spec = runtrees.make_spec("rlinf", tmp_path, cluster__nodes=3, cluster__gpus_per_node=2,
                              cluster__accelerator="A100-SXM4-80GB")
    spec["pins"]["framework_version"] = "0.9.1"  # probe()'s version
    return spec


def a100_probe(i: int, *, visible=None, capabilities=("8.0", "8.0"), imports=None, error=None) -> dict:
    out = probe(i, gpus=2, model="NVIDIA A100-SXM4-80GB")
    answer = {"python_executable": "/opt/venv/reason/bin/python", "visible": {"flash-attn-4": visible},
              "capabilities": list(capabilities), "devices": ["NVIDIA A100-SXM4-80GB"] * len(capabilities),
              "imports": imports or {"transformer_engine.pytorch": "ok", "sglang": "ok"}}
    if error:
        answer["error"] = error
    out["accelerator"] = {RULE: answer}
    return out


def rule_checks(checks) -> dict[str, dict]:
    return {c["name"]: c for c in checks if c["name"].startswith(RULE)}


def test_a100_rule_passes_where_the_workaround_took(a100_spec):
    checks = rule_checks(evaluate(a100_spec, [a100_probe(i) for i in (1, 2, 3)]))
    assert set(checks) == {f"{RULE} metadata", f"{RULE} compute capability", f"{RULE} imports"}
    assert all(c["passed"] and not c.get("skipped") for c in checks.values()), checks


@pytest.mark.parametrize(("odd", "name", "needle"), [
    ({"visible": "4.0.0b4"}, "metadata", "flash-attn-4 4.0.0b4 is visible to /opt/venv/reason/bin/python"),
    ({"capabilities": ("8.0", "9.0")}, "compute capability", "GPU 1 (NVIDIA A100-SXM4-80GB) reports compute capability 9.0"),
    ({"capabilities": ()}, "compute capability", "torch sees no CUDA device"),
    ({"imports": {"transformer_engine.pytorch": "RuntimeError: no usable FlashAttention kernel", "sglang": "ok"}},
     "imports", "transformer_engine.pytorch does not import in /opt/venv/reason/bin/python: RuntimeError"),
    ({"error": "/opt/venv/reason/bin/python did not finish importing sglang in 110 s"}, "imports", "did not finish"),
])
def test_a100_rule_failure_names_the_node_and_the_known_cause(a100_spec, odd, name, needle):
    probes = [a100_probe(1), a100_probe(2), a100_probe(3, **odd)]
    bad = failures(evaluate(a100_spec, probes))[f"{RULE} {name}"]
    assert bad["node"] == "10.0.0.3"
    assert needle in bad["detail"], bad["detail"]
    assert "known A100 failure of the RLinf image (seed 003)" in bad["detail"]
    assert report.failure_line("preflight", bad).startswith(f"preflight: FAILED {RULE} {name} on node 10.0.0.3: ")


def test_a100_rule_on_nodes_without_gpus_checks_metadata_and_skips_the_gpu_part(a100_spec):
    """The CPU stand-in: the workaround and the metadata check are real; no GPU, no CUDA to ask."""
    a100_spec["cluster"]["gpus_per_node"] = 0
    probes = [probe(i) for i in (1, 2, 3)]
    for p in probes:
        p["accelerator"] = {RULE: {"python_executable": "/x/bin/python", "visible": {"flash-attn-4": None}}}
    checks = rule_checks(evaluate(a100_spec, probes))
    assert checks[f"{RULE} metadata"]["passed"] and not checks[f"{RULE} metadata"].get("skipped")
    for name in ("compute capability", "imports"):
        assert checks[f"{RULE} {name}"]["skipped"] and "cluster.gpus_per_node=0" in checks[f"{RULE} {name}"]["detail"]
    probes[1]["accelerator"][RULE]["visible"]["flash-attn-4"] = "4.0.0b4"
    assert failures(evaluate(a100_spec, probes))[f"{RULE} metadata"]["node"] == "10.0.0.2"


def test_no_rule_off_a100_or_for_other_frameworks(a100_spec, gpu_spec):
    a100_spec["cluster"]["accelerator"] = "H100"
    assert not rule_checks(evaluate(a100_spec, [probe(i, gpus=2) for i in (1, 2, 3)]))
    gpu_spec["cluster"]["accelerator"] = "A100"
    assert not rule_checks(evaluate(gpu_spec, [probe(i, gpus=8) for i in (1, 2, 3)]))


def test_unreachable_cluster_is_one_failed_check_within_the_deadline(tmp_path, monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    spec = runtrees.make_spec("trl", tmp_path / "run")
    started = time.monotonic()
    report = preflight.run(spec, tmp_path / "preflight.json", timeout_s=1)
    assert time.monotonic() - started < 20
    assert [c["name"] for c in report["checks"]] == ["ray cluster"] and not report["passed"]
    assert f"127.0.0.1:{port} not reachable" in report["checks"][0]["detail"]
    assert json.loads((tmp_path / "preflight.json").read_text())["passed"] is False


# ---------------------------------------------------------------- the input probe on real files


def _sums(directory: Path) -> None:
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(directory.iterdir())
             if p.is_file() and p.name != "SHA256SUMS"]
    (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def test_input_probe_file_dir_and_manifest(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    _sums(model)
    assert on_node.probe_input(str(model))["problems"] == []
    (model / "model.safetensors").write_bytes(b"")
    assert "model.safetensors (listed in SHA256SUMS) missing or empty" in on_node.probe_input(str(model))["problems"]

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"q": 1}\n')
    _sums(data)
    seen = on_node.probe_input(str(data / "train.jsonl"))
    assert seen["problems"] == [] and seen["sha256"] == hashlib.sha256(b'{"q": 1}\n').hexdigest()
    (data / "train.jsonl").write_text('{"q": 2}\n')  # altered after the manifest was written
    assert on_node.probe_input(str(data / "train.jsonl"))["problems"] == ["does not match its SHA256SUMS entry"]
    assert on_node.probe_input(str(tmp_path / "nope"))["problems"] == ["missing"]

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a").write_text("1")
    before = on_node.probe_input(str(plain))["digest"]
    (plain / "a").write_text("2")
    assert on_node.probe_input(str(plain))["digest"] != before


def _git_package(root: Path, package: str) -> str:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("__version__ = '9.9'\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def test_framework_commit_only_from_the_frameworks_own_checkout(tmp_path, monkeypatch):
    head = _git_package(tmp_path / "checkout", "fakefw_a")
    # A package installed somewhere inside another repository (a venv inside a project).
    _git_package(tmp_path / "project", "unrelated")
    (tmp_path / "project" / "venv" / "fakefw_b").mkdir(parents=True)
    (tmp_path / "project" / "venv" / "fakefw_b" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "checkout"))
    monkeypatch.syspath_prepend(str(tmp_path / "project" / "venv"))
    assert on_node.framework_info("fakefw_a") == {"version": "9.9", "commit": head}
    assert on_node.framework_info("fakefw_b")["commit"] == ""
    missing = on_node.framework_info("fakefw_nope")
    assert missing["version"] == "absent" and "ModuleNotFoundError" in missing["error"]


# ---------------------------------------------------------------- a real 3-node cluster

NODES = 3


LOCAL_CLUSTER = REPO / "scripts" / "local-cluster"


class LocalCluster:
    """scripts/local-cluster with a unique name: one Ray node per network namespace, behind a bridge
    in a switch namespace of its own, so it coexists with the other clusters on this machine.
    `down` stops only what this cluster's `up` created (never `ray stop`)."""

    def __init__(self, n: int, state_dir: Path):
        name = f"pf{os.getpid() % 10000}-{random.randrange(16**4):04x}"
        self.env = {**os.environ, "RLAUNCH_CLUSTER_NAME": name, "RLAUNCH_NODES": str(n),
                    "RLAUNCH_STATE_DIR": str(state_dir), "RLAUNCH_LOCAL_MODE": "netns",
                    "RLAUNCH_NUM_CPUS": "1", "RLAUNCH_OBJECT_STORE_BYTES": "80000000",
                    "RLAUNCH_RAY": str(Path(sys.executable).parent / "ray"), "RLAUNCH_DEADLINE_S": "120",
                    "RLAUNCH_STOP_GRACE_S": "5"}
        self.state_dir = state_dir
        self.ips: list[str] = []
        self.address = ""

    def _script(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([str(LOCAL_CLUSTER), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def up(self) -> None:
        proc = self._script("up")
        assert proc.returncode == 0, f"local-cluster up failed ({proc.returncode}): {proc.stderr[-3000:]}"
        info = json.loads((self.state_dir / "cluster.json").read_text())
        self.ips = [node["ip"] for node in info["nodes"]]
        self.address = f"{info['head_ip']}:{info['ray_port']}"

    def run_in_head(self, argv: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
        env = {**self.env, "RAY_ADDRESS": self.address, "PYTHONPATH": str(REPO / "tools")}
        return subprocess.run([str(LOCAL_CLUSTER), "exec", "0", "--", *argv], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def down(self) -> None:
        proc = self._script("down", timeout=120)
        assert proc.returncode == 0, f"local-cluster down failed: {proc.stderr[-2000:]}"


def _can_build_namespaces() -> str:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    return ""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = _can_build_namespaces()
    if why:
        missing(why)
    c = LocalCluster(NODES, tmp_path_factory.mktemp("cluster"))
    try:
        c.up()
        yield c
    finally:
        c.down()


@pytest.fixture
def workspace(tmp_path):
    """A spec whose run dir, inputs and per-node copies live under one tmp dir (host = every node)."""
    run_dir = tmp_path / "runs" / "pf" / "r1"
    spec = runtrees.make_spec("trl", run_dir, cluster__nodes=NODES)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"prompt": "copy 3", "answer": "3"}\n')
    _sums(data)
    return tmp_path, spec


def preflight_in_head(cluster, tmp_path: Path, spec: dict, *args: str) -> tuple[int, dict, str]:
    spec_path = tmp_path / f"spec-{random.randrange(1 << 30)}.json"
    spec_path.write_text(json.dumps(spec))
    out = tmp_path / f"preflight-{spec_path.stem}.json"
    proc = cluster.run_in_head([sys.executable, "-m", "rlaunch.verify.preflight", "--spec", str(spec_path),
                                "--out", str(out), "--timeout", "60", *args])
    assert out.exists(), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text()), proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""


@pytest.mark.cluster
def test_cluster_passes(cluster, workspace):
    tmp_path, spec = workspace
    rc, report, last = preflight_in_head(cluster, tmp_path, spec, "--input", str(tmp_path / "data"),
                                         "--input", str(tmp_path / "data" / "train.jsonl"))
    assert rc == 0, report["checks"]
    assert report["passed"]
    assert sorted(n["node_ip"] for n in report["nodes"]) == sorted(cluster.ips)
    assert {n["framework"]["version"] for n in report["nodes"]} == {_version("trl")}
    assert {n["framework"]["commit"] for n in report["nodes"]} == {""}  # pip-installed: no commit
    tokens = list((Path(spec.paths.run_dir) / ".preflight").iterdir())
    assert len(tokens) == NODES  # one token file per node, all in the one shared directory


@pytest.mark.cluster
def test_cluster_names_the_node_whose_input_differs(cluster, workspace):
    tmp_path, spec = workspace
    for i, ip in enumerate(cluster.ips):
        copy_dir = tmp_path / "per-node" / ip
        copy_dir.mkdir(parents=True)
        (copy_dir / "train.jsonl").write_text("same\n" if i != 1 else "altered\n")
    rc, report, last = preflight_in_head(cluster, tmp_path, spec,
                                         "--input", str(tmp_path / "per-node" / "{node_ip}" / "train.jsonl"))
    assert rc == 1
    bad = {c["name"]: c for c in report["checks"] if not c["passed"]}
    assert list(bad) == ["input"]
    assert bad["input"]["node"] == cluster.ips[1]
    assert last.startswith(f"preflight: FAILED input on node {cluster.ips[1]}: ")


@pytest.mark.cluster
def test_cluster_fails_when_a_node_is_missing(cluster, workspace):
    tmp_path, spec = workspace
    rc, report, last = preflight_in_head(cluster, tmp_path, spec, "--expect-nodes", "4")
    assert rc == 1
    assert [c["name"] for c in report["checks"] if not c["passed"]] == ["node count"]
    assert last.startswith("preflight: FAILED node count: 3 alive Ray nodes") and "expected 4" in last


@pytest.mark.cluster
def test_cluster_fails_when_storage_is_not_shared(cluster, workspace):
    tmp_path, spec = workspace
    spec = copy.deepcopy(spec)
    spec["paths"]["run_dir"] = str(tmp_path / "local-disk" / "{node_ip}" / "run")
    rc, report, last = preflight_in_head(cluster, tmp_path, spec)
    assert rc == 1
    bad = {c["name"]: c for c in report["checks"] if not c["passed"]}
    assert list(bad) == ["shared storage"]
    reader = bad["shared storage"]["node"]
    assert reader in cluster.ips and "storage not shared" in bad["shared storage"]["detail"]
    assert any(f"cannot see node {ip}'s file" in bad["shared storage"]["detail"] for ip in cluster.ips if ip != reader)


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def test_default_inputs_come_from_the_framework_adapter(tmp_path, monkeypatch):
    from rlaunch.registry import frameworks

    spec = runtrees.make_spec("trl", tmp_path)
    assert preflight.default_inputs(spec) == []  # the rehearsal builds its inputs at run time

    class WithInputs:
        def inputs(self, spec):
            return [Path(spec.paths.model_dir), spec.paths.data_dir + "/train.jsonl"]

    monkeypatch.setattr(frameworks, "get", lambda name: WithInputs())
    assert preflight.default_inputs(spec) == [spec.paths.model_dir, spec.paths.data_dir + "/train.jsonl"]


# ---------------------------------------------------------------- CODE's pack on every node (issue 47)


@pytest.mark.parametrize(("third", "needle"), [
    ({"hash": "bb" * 32}, f"hash {'bb' * 6} on 10.0.0.3, {'aa' * 6} on the others"),
    ({"problems": ["pkg/reward.py differs from the manifest"]}, "pkg/reward.py differs"),
])
def test_code_must_be_whole_and_the_same_on_every_node(gpu_spec, third, needle):
    gpu_spec["paths"]["code_dir"], gpu_spec["pins"]["code"] = "/storage/code/h", {"hash": "aa" * 32}
    code = {"path": "/storage/code/h", "hash": "aa" * 32, "problems": []}
    probes = [{**probe(i, gpus=8), "code": code} for i in (1, 2)] + [{**probe(3, gpus=8), "code": {**code, **third}}]
    checks = evaluate(gpu_spec, probes)
    assert failures(checks).keys() == {"code"}
    assert failures(checks)["code"]["node"] == "10.0.0.3" and needle in failures(checks)["code"]["detail"]
    probes[2]["code"] = code
    assert [c["detail"] for c in evaluate(gpu_spec, probes) if c["name"] == "code"] == [
        f"/storage/code/h: hash {'aa' * 6} on all 3 nodes"]
    gpu_spec["pins"]["code"] = {"hash": "cc" * 32}  # the same everywhere, but not what the plan pinned
    assert "the plan pinned cccccc" in failures(evaluate(gpu_spec, probes))["code"]["detail"]

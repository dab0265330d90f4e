"""Preflight's collective: the pure rules (interface matching, blame, exports, the job's runtime env),
then the real thing on a REAL 3-node namespace cluster (`-m cluster`, root) with a second network
(eth1 on its own bridge, like a data NIC beside the one Ray uses): it passes and exports the route's
interface when the variables are unset; it passes over eth1 when the job names it; and when one node's
route on eth1 is broken, or the job names a wrong interface, it fails within its deadline naming the
node, the interface and the peer, where the framework would hang in process-group init."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlaunch.verify import collective
from needs import missing

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("test_preflight_helpers", REPO / "tests" / "unit" / "test_preflight.py")
pf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pf)

IFACES = {"lo": {"ipv4": ["127.0.0.1"], "up": True}, "eth0": {"ipv4": ["10.0.0.2"], "up": True},
          "eth1": {"ipv4": ["10.9.0.2"], "up": True}, "docker0": {"ipv4": ["172.17.0.1"], "up": True},
          "ib0": {"ipv4": [], "up": False}}


# ---------------------------------------------------------------- the rules


@pytest.mark.parametrize(("backend", "value", "iface"), [
    ("gloo", "eth1", "eth1"), ("gloo", "eth7,eth0", "eth0"), ("gloo", "eth", ""),
    ("nccl", "eth", "eth0"), ("nccl", "=eth1", "eth1"), ("nccl", "=eth", ""), ("nccl", "^lo,docker,eth0", "eth1"),
    ("nccl", "ib", "")])
def test_interface_variables_match_as_each_backend_reads_them(backend, value, iface):
    assert collective._match(value, backend, IFACES) == iface


def test_resolve_names_what_is_wrong_on_the_node(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    got = collective._resolve("gloo", "10.0.0.1", IFACES)
    assert got["error"].startswith("GLOO_SOCKET_IFNAME=eth7 names no interface here (has: lo (127.0.0.1), eth0")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth1")
    assert collective._resolve("gloo", "10.0.0.1", IFACES)["addr"] == "10.9.0.2"
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "=ib0")
    monkeypatch.setattr(collective, "_match", lambda *a: "ib0")
    assert collective._resolve("nccl", "10.0.0.1", IFACES)["error"] == "interface ib0 (NCCL_SOCKET_IFNAME) is down"


def test_blame_names_the_node_cut_off_not_its_peers():
    cut = "no answer from 10.9.0.3:4000 within 5 s"
    matrix = {"a": {"b": "ok", "c": cut}, "b": {"a": "ok", "c": cut},
              "c": {"a": "no answer from 10.9.0.1:4001 within 5 s", "b": "no answer from 10.9.0.2:4002 within 5 s"}}
    assert collective.blame(matrix)[0] == "c"
    # Its own kernel refusing (no route) names it even with two nodes.
    two = {"a": {"c": cut}, "c": {"a": "Network is unreachable (10.9.0.1:4001)"}}
    assert collective.blame(two) == ("c", "a", "Network is unreachable (10.9.0.1:4001)")
    assert collective.blame({"a": {"b": "ok"}, "b": {"a": "ok"}}) is None


def _prepared(**ifaces):
    return {label: {"backends": {"gloo": {"var": "GLOO_SOCKET_IFNAME", "value": "", "set": False, "iface": name}}}
            for label, name in ifaces.items()}


def test_exports_only_what_is_unset_and_alike_everywhere():
    assert collective.exports(_prepared(a="eth0", b="eth0"), ["gloo"]) == ({"GLOO_SOCKET_IFNAME": "eth0"}, [])
    out, problems = collective.exports(_prepared(a="eth0", b="ens5"), ["gloo"])
    assert out == {} and "eth0 on a, ens5 on b" in problems[0]
    given = _prepared(a="eth1", b="eth1")
    for p in given.values():
        p["backends"]["gloo"].update(value="eth1", set=True)
    assert collective.exports(given, ["gloo"]) == ({}, [])


def test_job_env_adds_the_export_to_the_jobs_runtime_env_without_overriding_it():
    job = {"runtime_env": {"env_vars": {"HF_TOKEN": "s3cret", "NCCL_SOCKET_IFNAME": "=ib"}}, "metadata": {"k": "v"}}
    env = collective.job_env({"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "=eth0"},
                             {collective.JOB_CONFIG: json.dumps(job)})
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"
    merged = json.loads(env[collective.JOB_CONFIG])
    assert merged["runtime_env"]["env_vars"] == {"HF_TOKEN": "s3cret", "NCCL_SOCKET_IFNAME": "=ib",
                                                 "GLOO_SOCKET_IFNAME": "eth0"}
    assert merged["metadata"] == {"k": "v"}
    assert collective.job_env({"GLOO_SOCKET_IFNAME": "eth0"}, {"GLOO_SOCKET_IFNAME": "eth1"}) == {}
    assert collective.job_env({}, {collective.JOB_CONFIG: json.dumps(job)}) == {}


def test_exports_cli_writes_pairs_for_job_sh(tmp_path, capfdbinary, monkeypatch):
    report = tmp_path / "preflight.json"
    report.write_text(json.dumps({"network": {"exports": {"GLOO_SOCKET_IFNAME": "eth0"}}}))
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv(collective.JOB_CONFIG, raising=False)
    assert collective.main(["exports", str(report)]) == 0
    assert capfdbinary.readouterr().out == b"GLOO_SOCKET_IFNAME=eth0\0"
    assert collective.main(["exports", str(tmp_path / "none.json")]) == 2


# ---------------------------------------------------------------- a real 3-node cluster, two networks

DATA_NET = "10.250.7"  # the second network's /24; namespaces are private, so any subnet does


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = pf._can_build_namespaces()
    if why:
        missing(why)
    c = pf.LocalCluster(pf.NODES, tmp_path_factory.mktemp("cluster"))
    try:
        c.up()
        info = json.loads((c.state_dir / "cluster.json").read_text())
        switch = f"rl-{info['name']}-sw"
        # A second NIC on every node (eth1 on bridge br1), as GPU nodes have a data network beside
        # the one Ray uses; deleting the namespaces at `down` removes it with them.
        _ip("-n", switch, "link", "add", "br1", "type", "bridge")
        _ip("-n", switch, "link", "set", "br1", "up")
        c.namespaces = []
        for rank, node in enumerate(info["nodes"]):
            _ip("-n", switch, "link", "add", f"d{rank}", "type", "veth", "peer", "name", "eth1", "netns", node["ns"])
            _ip("-n", switch, "link", "set", f"d{rank}", "master", "br1")
            _ip("-n", switch, "link", "set", f"d{rank}", "up")
            _ip("-n", node["ns"], "addr", "add", f"{DATA_NET}.{rank + 1}/24", "dev", "eth1")
            _ip("-n", node["ns"], "link", "set", "eth1", "up")
            c.namespaces.append(node["ns"])
        yield c
    finally:
        c.down()


def run_preflight(cluster, tmp_path: Path, job_env: dict[str, str] | None = None) -> tuple[int, dict, str, float]:
    """Preflight inside the head's namespace as a job's driver: the job's runtime env (the Ray job
    supervisor's RAY_JOB_CONFIG_JSON_ENV_VAR) reaches its probes as it reaches the job's workers."""
    spec = pf.runtrees.make_spec("trl", tmp_path / "runs" / "c" / "r1", cluster__nodes=pf.NODES)
    spec_path, out = tmp_path / "spec.json", tmp_path / "preflight.json"
    spec_path.write_text(json.dumps(spec))
    env = {collective.JOB_CONFIG: json.dumps({"runtime_env": {"env_vars": job_env or {}}})}
    started = time.monotonic()
    proc = cluster.run_in_head(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m",
                                "rlaunch.verify.preflight", "--spec", str(spec_path), "--out", str(out),
                                "--timeout", "60"])
    elapsed = time.monotonic() - started
    assert out.exists(), proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    return proc.returncode, json.loads(out.read_text()), last, elapsed


def _collective(report: dict) -> dict:
    return next(c for c in report["checks"] if c["name"] == "collective")


@pytest.mark.cluster
def test_unset_variables_pick_the_route_to_the_head_and_reach_every_ray_worker(cluster, tmp_path):
    rc, report, last, _ = run_preflight(cluster, tmp_path)
    assert rc == 0, report["checks"]
    check = _collective(report)
    assert check["passed"] and "GLOO_SOCKET_IFNAME=eth0 (picked: route to the head)" in check["detail"]
    assert report["network"]["exports"] == {"GLOO_SOCKET_IFNAME": "eth0"}
    assert {v["gloo"]["iface"] for v in report["network"]["interfaces"].values()} == {"eth0"}
    # job.sh's step: the exports into the driver's env and the job's runtime env ...
    secret_job = {"runtime_env": {"env_vars": {"HF_TOKEN": "s3cret"}}}
    pairs = cluster.run_in_head(["env", f"{collective.JOB_CONFIG}={json.dumps(secret_job)}", sys.executable, "-m",
                                 "rlaunch.verify.collective", "exports", str(tmp_path / "preflight.json")])
    env = dict(p.split("=", 1) for p in pairs.stdout.split("\0") if p)
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"
    # ... and a framework's driver started with them: every Ray worker, on every node, sees it.
    driver = ("import json, ray\n"
              "ray.init()\n"
              "@ray.remote(num_cpus=0)\n"
              "def seen():\n"
              "    import os\n"
              "    return ray.util.get_node_ip_address(), os.environ.get('GLOO_SOCKET_IFNAME'), "
              "os.environ.get('HF_TOKEN')\n"
              "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as A\n"
              "refs = [seen.options(scheduling_strategy=A(n['NodeID'], soft=False)).remote() "
              "for n in ray.nodes() if n['Alive']]\n"
              "print(json.dumps(ray.get(refs, timeout=60)))\n")
    proc = cluster.run_in_head(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-c", driver])
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(ip for ip, _, _ in seen) == sorted(cluster.ips)
    assert {(ifname, token) for _, ifname, token in seen} == {("eth0", "s3cret")}


@pytest.mark.cluster
def test_the_jobs_second_nic_is_used_as_named(cluster, tmp_path):
    rc, report, _, _ = run_preflight(cluster, tmp_path, {"GLOO_SOCKET_IFNAME": "eth1"})
    assert rc == 0, report["checks"]
    assert report["network"]["exports"] == {}  # the job named it: nothing to pick
    used = {v["gloo"]["addr"] for v in report["network"]["interfaces"].values()}
    assert used == {f"{DATA_NET}.{r + 1}" for r in range(pf.NODES)}
    detail = _collective(report)["detail"]
    assert detail.startswith("all-reduce over gloo on 3 nodes in ") and detail.endswith("; GLOO_SOCKET_IFNAME=eth1")


@pytest.mark.cluster
def test_a_broken_route_on_one_node_fails_in_seconds_naming_that_node(cluster, tmp_path):
    broken = 2
    ns, node_ip = cluster.namespaces[broken], cluster.ips[broken]
    _ip("-n", ns, "route", "del", f"{DATA_NET}.0/24", "dev", "eth1")
    try:
        rc, report, last, elapsed = run_preflight(cluster, tmp_path, {"GLOO_SOCKET_IFNAME": "eth1"})
    finally:
        _ip("-n", ns, "route", "add", f"{DATA_NET}.0/24", "dev", "eth1")
    assert rc == 1
    failed = [c for c in report["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["collective"], failed  # Ray itself (on eth0) is fine
    check = failed[0]
    assert check["node"] == node_ip
    assert check["detail"].startswith(f"gloo on eth1 ({DATA_NET}.{broken + 1}, GLOO_SOCKET_IFNAME=eth1) cannot reach peer ")
    assert "Network is unreachable" in check["detail"]
    assert last.startswith(f"preflight: FAILED collective on node {node_ip}: ")
    # Within the collective's deadline, where a gloo process group would wait its 1800 s.
    assert report["network"]["seconds"] < collective.DEFAULT_TIMEOUT_S
    print(f"\nbroken route: preflight failed after {elapsed:.1f} s in all, "
          f"the collective after {report['network']['seconds']} s: {check['detail']}")


@pytest.mark.cluster
@pytest.mark.parametrize(("ifname", "needle"), [
    ("lo", "interface lo (GLOO_SOCKET_IFNAME=lo) has the loopback address 127.0.0.1: the other nodes cannot reach it"),
    ("eth7", "GLOO_SOCKET_IFNAME=eth7 names no interface here (has: ")])
def test_a_wrong_interface_fails_naming_it(cluster, tmp_path, ifname, needle):
    rc, report, last, _ = run_preflight(cluster, tmp_path, {"GLOO_SOCKET_IFNAME": ifname})
    assert rc == 1
    check = _collective(report)
    assert not check["passed"] and needle in check["detail"] and check["node"] in cluster.ips

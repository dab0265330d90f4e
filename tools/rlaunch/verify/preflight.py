"""Preflight: check every node of the running Ray cluster before the expensive part starts.

One Ray task is pinned to every alive node (rlaunch.verify.cluster: hard node affinity, num_cpus=0
so a busy cluster still runs it). Each (rlaunch.verify.probes) reports: node IP, hostname, Python,
the framework's version and commit (imported if importable, else "absent"), GPUs (nvidia-smi;
torch.cuda when GPUs are expected), CUDA_VISIBLE_DEVICES and NCCL_* env, the SHA256 of every input
(and of SHA256SUMS manifests), and writes a random token to <run_dir>/.preflight/<node_id>. A
second round has every node read every other node's token: a node that cannot means the storage is
not shared.

Checks: node count; probes answered; enough Ray CPUs for the framework (its descriptor's CPU rule:
verl >= 10 on the head, its TransferQueue hangs silently with fewer; trl 1 per node for its one Ray
Train worker each); the same Python, framework version and commit everywhere (and the pinned ones);
sys.executable under infra.image_bin when that is set; GPU count, model and driver identical when
cluster.gpus_per_node > 0, CUDA usable; NCCL_IB_DISABLE=1 without RDMA; the framework/accelerator
rules (rlaunch.frameworks.accel: their hidden packages hidden, each GPU's compute capability, their
modules importable in the job's Python; the GPU parts skipped on nodes without GPUs); inputs
present, non-empty, consistent with their SHA256SUMS and identical on every node; the shared
storage shared, with room for every checkpoint the run keeps (rlaunch.config.ckptsize: one checkpoint's
size from the model's facts and what the framework saves, times those it keeps; the run is refused,
naming the sizes and the fixes, when the least free space a node sees cannot hold them). Env vars reach
the probes only through their runtime_env (the framework
adapter's env(spec)), exactly as they reach the job; nothing is assumed from the driver.

Paths may contain {node_ip}, replaced on each node by that node's IP: a per-node disk (or a test
that gives each node its own copy) is written as /data/{node_ip}/model.

Usage:
  python -m rlaunch.verify.preflight --spec SPEC.json [--out REPORT.json] [--expect-nodes N]
                                     [--input PATH ...] [--timeout S]
  --out           default: <paths.run_dir>/preflight.json (on the driver)
  --expect-nodes  default: cluster.nodes (+1 for a KubeRay CPU-only head)
  --input         a file or directory every node must see identically (repeatable, or several
                  joined with ':' as in PATH); default: the framework adapter's inputs(spec)
A last round runs the collective (rlaunch.verify.collective): one process per node joins a small
all-reduce over the job's backend and interface settings within seconds, and names the node, its
interface and the peer it cannot reach when it cannot; an interface it picks for unset variables is
recorded under "network.exports" in the report for job.sh to export.

Env: RAY_ADDRESS (default: auto), RLAUNCH_PREFLIGHT_TIMEOUT_S (default 120): deadline per round;
RLAUNCH_COLLECTIVE_TIMEOUT_S (default 20): the collective's; RLAUNCH_PREFLIGHT_COLLECTIVE=0 skips it.
Exit: 0 passed, 1 a check failed (the last stderr line names the check and the node), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import time
from collections import defaultdict
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rlaunch import verify
from rlaunch.config import ckptsize
from rlaunch.config.code import MANIFEST as CODE_MANIFEST
from rlaunch.errors import UsageError
from rlaunch.frameworks import accel as accel_rules
from rlaunch.registry import frameworks
from rlaunch.verify import accel, cluster, collective
from rlaunch.verify import probes as on_node
from rlaunch.verify.report import all_passed, check, load_spec, positive_timeout, skipped, stage_main, table, write_json

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROG = "preflight"
NODE_CODE = (on_node, accel, collective)  # what runs on the nodes (accel: the rules' probe), shipped by value
V = TypeVar("V", bound=Hashable)


# ---------------------------------------------------------------- the checks (pure)


def _label(node: dict[str, Any]) -> str:
    return str(node.get("ip") or node.get("node_ip") or node.get("node_id", "?")[:12])


def _odd_ones(values: Mapping[str, V]) -> tuple[V, list[str]]:
    """The majority value and the nodes that differ from it (ties: the first-seen value wins)."""
    groups: dict[V, list[str]] = defaultdict(list)
    for node, value in values.items():
        groups[value].append(node)
    majority = max(groups, key=lambda v: len(groups[v]))
    return majority, [n for v, nodes in groups.items() if v != majority for n in nodes]


def _same_everywhere(name: str, values: Mapping[str, Hashable], what: str) -> dict[str, Any]:
    if not values:
        return check(name, False, "no node answered")
    majority, odd = _odd_ones(values)
    if odd:
        return check(name, False, f"{what} {values[odd[0]]} on {odd[0]}, {majority} on the others "
                                  f"({', '.join(k for k in values if k not in odd)})", node=odd[0])
    return check(name, True, f"{what} {majority} on all {len(values)} nodes")


def check_cpus(spec: Spec, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The framework's CPU rule (its descriptor) against the Ray CPUs each node registered."""
    rule = frameworks.descriptor(spec.framework.name).cpu_rule
    if rule is None:
        return skipped("ray cpus", f"no CPU rule for {spec.framework.name}")
    if rule.where == "head":
        pool = [n for n in nodes if n["is_head"]]
    else:  # every node that runs the framework's workers: not a CPU-only head (num-cpus 0)
        pool = [n for n in nodes if not (n["is_head"] and spec.derived.cpu_only_head)]
    short = next((n for n in pool if n["cpus"] < rule.count), None)
    if short:
        return check("ray cpus", False, f"{short['cpus']:g} Ray CPUs there, {spec.framework.name} needs "
                                        f">= {rule.count} on {rule.place} ({rule.why})", node=_label(short))
    return check("ray cpus", True, f">= {rule.count} Ray CPUs on {rule.place}")


def check_framework(spec: Spec, probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    name = spec.framework.name
    absent = [(ip, p["framework"]) for ip, p in probes.items() if p["framework"]["version"] == "absent"]
    if absent:
        ip, info = absent[0]
        return [check("framework", False, f"{name} not importable: {info.get('error', 'absent')}", node=ip)]
    out = [_same_everywhere("framework version", {ip: p["framework"]["version"] for ip, p in probes.items()},
                            f"{name}"),
           _same_everywhere("framework commit", {ip: p["framework"]["commit"] or "unknown"
                                                 for ip, p in probes.items()}, f"{name} commit")]
    version, commit = spec.pins.framework_version, spec.pins.framework_commit
    for ip, p in probes.items():
        got = p["framework"]["version"]
        # A local build tag (+cu126) is the same release; anything else is not the pinned one.
        if version and got.split("+")[0] != version:
            out.append(check("framework pin", False, f"{name} {got} installed, {version} pinned", node=ip))
            break
        if commit and p["framework"]["commit"] and p["framework"]["commit"] != commit:
            out.append(check("framework pin", False, f"{name} at commit {p['framework']['commit'][:12]}, "
                                                     f"{commit[:12]} pinned", node=ip))
            break
    else:
        out.append(check("framework pin", True, f"{name} {version or '(no version pin)'}"
                                                f"{' @ ' + commit[:12] if commit else ''}"))
    return out


def _is_accelerator(model: str, accelerator: str) -> bool:
    """"A100-80GB" matches "NVIDIA A100-SXM4-80GB": the family (first part) and any memory size must
    appear; SkyPilot's other parts (H100-MEGA-80GB) are not in the driver's name, so not compared."""
    parts = [p.lower() for p in accelerator.replace("_", "-").split("-") if p]
    wanted = parts[:1] + [p for p in parts[1:] if re.fullmatch(r"\d+gb", p)]
    return all(p in model.lower() for p in wanted)


def _cuda_short(probe: dict[str, Any], want: int) -> str:
    """Why torch on this node cannot use the node's GPUs; "" if it can (or torch is not installed)."""
    cuda = probe["gpu"].get("cuda") or {}
    if cuda.get("available") is None:
        return ""
    if cuda["available"] and cuda["count"] >= want:
        return ""
    visible = probe["env"].get("CUDA_VISIBLE_DEVICES", "unset")
    return f"torch sees {cuda['count']} CUDA device(s) of {want} (CUDA_VISIBLE_DEVICES={visible})"


def nvlink_expected(spec: Spec) -> bool:
    """GB200 (NVL72): the GPUs talk over NVLink within and across nodes (seed 004 reads "via
    P2P/MNNVL" in NCCL's log for it); preflight checks the fabric instead of leaving it to the log."""
    return spec.cluster.gpus_per_node > 0 and spec.cluster.accelerator == "GB200"


def check_nvlink(spec: Spec, gpu_probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each GB200 node's GPUs: P2P OK between them, and every GPU in the same completed NVLink fabric
    (cluster UUID and clique) as every other node's: multi-node NVLink, not the network, carries NCCL."""
    if not nvlink_expected(spec):
        return []
    seen = {ip: p["gpu"].get("nvlink") or {"skipped": "not probed"} for ip, p in gpu_probes.items()}
    probed = {ip: n for ip, n in seen.items() if "skipped" not in n}
    if not probed:
        return [skipped("nvlink", next(iter(seen.values()), {}).get("skipped", "no GPU nodes"))]
    out = []
    broken = {ip: n["error"] for ip, n in probed.items() if "error" in n}
    p2p = {ip: n["p2p_not_ok"] for ip, n in probed.items() if n.get("p2p_not_ok")}
    bad = {ip: f for ip, n in probed.items() if "error" not in n
           for f in n.get("fabric") or [{}] if (f.get("state"), f.get("status")) != ("Completed", "Success")}
    if broken:
        ip = next(iter(broken))
        detail = broken[ip]
    elif p2p:
        ip = next(iter(p2p))
        detail = f"P2P not OK: {', '.join(p2p[ip][:4])}"
    else:
        ip, detail = None, f"P2P OK between the GPUs of each of {len(probed)} nodes"
    out.append(check("nvlink p2p", not broken and not p2p, detail, node=ip))
    ip = next(iter(bad), None)
    out.append(check("nvlink fabric", not bad,
                     f"fabric state {bad[ip].get('state', 'absent')}, status {bad[ip].get('status', 'absent')} "
                     "(the IMEX/NVLink fabric is not up on this node: its ComputeDomain, the nvidia-imex daemon)"
                     if ip else f"every GPU of {len(probed)} nodes in a completed NVLink fabric", node=ip))
    cliques = {ip: ", ".join(sorted({f"{f.get('clusteruuid', '?')}/{f.get('cliqueid', '?')}"
                                      for f in n.get("fabric") or []})) or "none"
               for ip, n in probed.items() if "error" not in n}
    if cliques:
        out.append(_same_everywhere("nvlink clique", cliques, "NVLink cluster/clique"))
    return out


def check_gpus(spec: Spec, nodes: list[dict[str, Any]], probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    want = spec.cluster.gpus_per_node
    if want <= 0:
        return [skipped("gpus", "cluster.gpus_per_node=0")]
    heads = {_label(n) for n in nodes if n["is_head"]}
    # A KubeRay CPU-only head has no GPUs by design; every other node must have exactly `want`.
    gpu_probes = {ip: p for ip, p in probes.items()
                  if not (spec.derived.cpu_only_head and ip in heads)}
    out = []
    wrong = [(ip, p["gpu"]["count"]) for ip, p in gpu_probes.items() if p["gpu"]["count"] != want]
    out.append(check("gpu count", not wrong, f"{wrong[0][1]} GPUs, cluster.gpus_per_node={want}" if wrong
                     else f"{want} GPUs on each of {len(gpu_probes)} nodes", node=wrong[0][0] if wrong else None))
    models = {ip: ", ".join(p["gpu"]["models"]) or "none" for ip, p in gpu_probes.items()}
    out.append(_same_everywhere("gpu model", models, "GPU"))
    accelerator = spec.cluster.accelerator
    off = [ip for ip, m in models.items() if not _is_accelerator(m, accelerator)]
    if off:
        out.append(check("gpu type", False, f"{models[off[0]]} is not cluster.accelerator={accelerator}",
                         node=off[0]))
    drivers = {ip: ", ".join(p["gpu"]["drivers"]) or "unknown" for ip, p in gpu_probes.items()}
    out.append(_same_everywhere("gpu driver", drivers, "driver"))
    no_cuda = {ip: why for ip, p in gpu_probes.items() if (why := _cuda_short(p, want))}
    ip = next(iter(no_cuda), None)
    out.append(check("cuda visible", not no_cuda, no_cuda[ip] if ip else
                     "torch sees the GPUs (where torch is installed)", node=ip))
    out += check_nvlink(spec, gpu_probes)
    for name, value in spec.derived.nccl_env.items():  # what config.derive set for this run
        unset = [(ip, p["env"].get(name, "unset")) for ip, p in gpu_probes.items() if p["env"].get(name) != value]
        out.append(check("nccl env", not unset,
                         f"{name}={unset[0][1]}; without RDMA (infra.rdma=false) it must be {value}"
                         if unset else f"{name}={value} on every node (no RDMA)",
                         node=unset[0][0] if unset else None))
    return out


def check_python_executable(spec: Spec, probes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every node runs the job's Python from the image's bin directory, when infra.image_bin names it."""
    exes = {ip: p.get("python_executable") or "unknown" for ip, p in probes.items()}
    bin_dir = spec.infra.image_bin.rstrip("/")
    if not bin_dir:
        return check("python executable", True, f"{', '.join(sorted(set(exes.values())))} "
                                                f"(infra.image_bin not set: not compared)")
    off = next((ip for ip, exe in exes.items() if not exe.startswith(bin_dir + "/")), None)
    if off:
        return check("python executable", False, f"sys.executable={exes[off]}, not under infra.image_bin={bin_dir}: "
                                                  f"the task's PATH must put the image's venv first "
                                                  f"(PATH={bin_dir}:... in the task form)", node=off)
    return check("python executable", True, f"under {bin_dir} on all {len(exes)} nodes")


def check_rules(spec: Spec, probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The framework/accelerator rules, asked of the job's Python on every node (frameworks/accel.py)."""
    gpus = spec.cluster.gpus_per_node > 0
    out = []
    for rule in accel_rules.rules_for(spec.framework.name, spec.cluster.accelerator):
        name, why = rule.name, rule.cause
        answers = {ip: (p.get("accelerator") or {}).get(name) for ip, p in probes.items()}
        missing = next((ip for ip, s in answers.items() if s is None), None)
        if missing:
            out.append(check(f"{name} probe", False, f"no answer for rule {name}; {why}", node=missing))
            continue
        seen = {ip: s for ip, s in answers.items() if s is not None}  # every node's, as none is missing
        visible = next(((ip, d, v) for ip, s in seen.items() for d, v in s["visible"].items() if v), None)
        out.append(check(f"{name} metadata", not visible,
                         f"{visible[1]} {visible[2]} is visible to {seen[visible[0]]['python_executable']}: the "
                         f"workaround did not take on this node (job.sh runs rlaunch.verify.accel before "
                         f"preflight); {why}" if visible else
                         f"{', '.join(rule.hide)} not visible to the job's Python on all {len(seen)} nodes",
                         node=visible[0] if visible else None))
        if not gpus:
            why_skip = "cluster.gpus_per_node=0: no GPU and no CUDA libraries to ask on these nodes"
            out += [skipped(f"{name} compute capability", why_skip), skipped(f"{name} imports", why_skip)]
            continue
        out.append(_capability_check(rule, seen))
        out.append(_imports_check(rule, seen))
    return out


def _capability_check(rule: accel_rules.Rule, seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    name = f"{rule.name} compute capability"
    for ip, s in seen.items():
        if s.get("error") or s.get("cuda_error") or not s.get("capabilities"):
            problem = s.get("error") or s.get("cuda_error") or "torch sees no CUDA device"
            return check(name, False, f"cannot read the compute capability in {s['python_executable']}: {problem}; "
                                      f"{rule.cause}", node=ip)
        odd = next(((i, c) for i, c in enumerate(s["capabilities"]) if c != rule.compute_capability), None)
        if odd:
            device = (s.get("devices") or [""] * (odd[0] + 1))[odd[0]]
            return check(name, False, f"GPU {odd[0]} ({device}) reports compute capability {odd[1]}; rule "
                                      f"{rule.name} is for {rule.compute_capability} ({', '.join(rule.families)}), "
                                      f"so recheck the image's kernels for this GPU; {rule.cause}", node=ip)
    return check(name, True, f"{rule.compute_capability} on every GPU of {len(seen)} nodes")


def _imports_check(rule: accel_rules.Rule, seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    name = f"{rule.name} imports"
    for ip, s in seen.items():
        if s.get("error"):
            return check(name, False, f"{s['error']}; {rule.cause}", node=ip)
        bad = next(((m, r) for m, r in s.get("imports", {}).items() if r != "ok"), None)
        if bad:
            return check(name, False, f"{bad[0]} does not import in {s['python_executable']}: {bad[1]}; "
                                      f"{rule.cause}", node=ip)
    return check(name, True, f"{', '.join(rule.imports)} import in the job's Python on all {len(seen)} nodes")


def check_inputs(inputs: list[str], probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, path in enumerate(inputs):
        seen = {ip: p["inputs"][i] for ip, p in probes.items()}
        bad = [(ip, s) for ip, s in seen.items() if s["problems"]]
        if bad:
            ip, s = bad[0]
            out.append(check("input", False, f"{s['path']}: {'; '.join(s['problems'])}", node=ip))
            continue
        digests = {ip: s["digest"] for ip, s in seen.items()}
        majority, odd = _odd_ones(digests)
        if odd:
            out.append(check("input", False, f"{seen[odd[0]]['path']} differs: sha256 {digests[odd[0]][:12]} "
                                             f"there, {majority[:12]} on "
                                             f"{', '.join(k for k in seen if k not in odd)}", node=odd[0]))
        else:
            out.append(check("input", True, f"{path}: sha256 {majority[:12]} on all {len(seen)} nodes"))
    return out


def check_code(spec: Spec, probes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """CODE's pack: on every node, whole, and the hash the plan pinned (the same everywhere)."""
    if not spec.paths.code_dir:
        return []
    want = str(spec.pins.code["hash"])
    seen = {ip: p["code"] for ip, p in probes.items()}
    bad = next(((ip, s) for ip, s in seen.items() if s["problems"]), None)
    if bad:
        return [check("code", False, f"{bad[1]['path']}: {'; '.join(bad[1]['problems'][:3])}", node=bad[0])]
    hashes = {ip: s["hash"] for ip, s in seen.items()}
    majority, odd = _odd_ones(hashes)
    if odd:
        return [check("code", False, f"hash {hashes[odd[0]][:12]} on {odd[0]}, {majority[:12]} on the others",
                      node=odd[0])]
    if majority != want:
        return [check("code", False, f"hash {majority[:12]} on every node, the plan pinned {want[:12]}")]
    return [check("code", True, f"{spec.paths.code_dir}: hash {want[:12]} on all {len(seen)} nodes")]


def check_storage(probes: dict[str, dict[str, Any]], peers: dict[str, dict[str, Any]],
                  ip_of: dict[str, str]) -> dict[str, Any]:
    """probes by IP, peers by node id: each reader's view of each writer's token."""
    answered = {p["node_id"] for p in probes.values()}
    for ip, p in probes.items():
        if "error" in p["storage"]:
            return check("shared storage", False, f"cannot write {p['storage']['path']}: {p['storage']['error']}",
                         node=ip)
    for node_id, result in peers.items():
        reader = ip_of.get(node_id, node_id)
        if "error" in result:
            return check("shared storage", False, f"read round failed: {result['error']}", node=reader)
        for peer, state in result["seen"].items():
            if state != "ok" and peer in answered:  # a node whose probe failed wrote no token
                writer = ip_of.get(peer, peer)
                return check("shared storage", False,
                             f"storage not shared: node {reader} cannot see node {writer}'s file "
                             f"{result['storage']}/{peer} ({state})", node=reader)
    return check("shared storage", True, f"every node read every other node's token under "
                                         f"{next(iter(probes.values()))['storage']['path'].rsplit('/', 2)[0]}"
                 if probes else "no node answered")


def _held(spec: Spec) -> int:
    """Bytes of this run's checkpoints already on the storage (a resumed run's): they count as room."""
    total = 0
    for root in {spec.paths.ckpt_dir, str(Path(spec.paths.run_dir) / "checkpoint")}:
        for base, _, names in os.walk(root):
            for name in names:
                try:
                    total += os.lstat(os.path.join(base, name)).st_size
                except OSError:
                    pass
    return total


def check_space(spec: Spec, probes: dict[str, dict[str, Any]], estimate: ckptsize.Estimate | str,
                held: int = 0) -> dict[str, Any]:
    """The shared storage holds every checkpoint the run keeps (rlaunch.config.ckptsize's estimate
    from the model's facts); the least free space any node sees counts."""
    name = "checkpoint space"
    if isinstance(estimate, str):
        return skipped(name, f"no estimate: {estimate}")
    seen = {ip: p["storage"] for ip, p in probes.items() if "free" in p.get("storage", {})}
    if not seen:
        return skipped(name, f"no node measured its free space; {estimate.line()}")
    ip = min(seen, key=lambda k: seen[k]["free"])
    problem = ckptsize.shortfall(estimate, seen[ip]["free"], held, f"the storage at {seen[ip]['free_at']}")
    if problem:
        return check(name, False, problem, node=ip)
    return check(name, True, f"{ckptsize.gb(seen[ip]['free'])} free at {seen[ip]['free_at']}; {estimate.line()}")


def evaluate(spec: Spec, nodes: list[dict[str, Any]], probes: dict[str, dict[str, Any]],
             peers: dict[str, dict[str, Any]], expected: int, inputs: list[str]) -> list[dict[str, Any]]:
    """All checks from what the nodes reported; pure, so every rule is testable without Ray."""
    ip_of = {n["node_id"]: _label(n) for n in nodes}
    checks = [check("node count", len(nodes) == expected,
                    f"{len(nodes)} alive Ray nodes ({', '.join(ip_of.values())}), expected {expected}")]
    failed = {ip_of[k]: v["error"] for k, v in probes.items() if "error" in v}
    checks.append(check("probe", not failed, f"no result: {next(iter(failed.values()))}" if failed
                        else f"answered on all {len(probes)} nodes", node=next(iter(failed), None)))
    ok = {ip_of[k]: v for k, v in probes.items() if "error" not in v}
    checks.append(check_cpus(spec, nodes))
    if not ok:
        return checks
    checks.append(_same_everywhere("python", {ip: p["python"] for ip, p in ok.items()}, "Python"))
    checks.append(check_python_executable(spec, ok))
    checks += check_framework(spec, ok)
    checks += check_gpus(spec, nodes, ok)
    checks += check_rules(spec, ok)
    checks += check_inputs(inputs, ok)
    checks += check_code(spec, ok)
    checks.append(check_storage(ok, {k: v for k, v in peers.items() if ip_of[k] in ok}, ip_of))
    checks.append(check_space(spec, ok, ckptsize.of(spec, offline=True), _held(spec)))
    return checks


# ---------------------------------------------------------------- on the driver


def expected_nodes(spec: Spec) -> int:
    """Ray nodes the spec asks for: cluster.nodes (AIStudio: its workers), plus a KubeRay CPU head
    (decided once, in config.derive)."""
    return spec.derived.ray_nodes


def default_inputs(spec: Spec) -> list[str]:
    """Without --input: what the framework adapter says must be on the shared storage before the run
    (`inputs(spec)`, e.g. the pinned model dir and dataset file); none if it says nothing."""
    return [str(p) for p in frameworks.get(spec.framework.name).inputs(spec)]


def collect(spec: Spec, inputs: list[str], timeout_s: float) -> tuple[
        list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, dict[str, Any]], collective.Result]:
    """Both probe rounds and the collective on the running cluster: (nodes, probes by node_id, peers
    by node_id, the collective's result)."""
    with cluster.joined(timeout_s):
        cluster.ship_by_value(*NODE_CODE)
        nodes = cluster.alive_nodes()
        tokens = {n["node_id"]: secrets.token_hex(16) for n in nodes}
        env = verify.task_env(spec)
        ctx = {"framework": spec.framework.name, "inputs": inputs, "run_dir": spec.paths.run_dir,
               "ckpt_dir": spec.paths.ckpt_dir,
               "code": {"dir": spec.paths.code_dir, "manifest": CODE_MANIFEST} if spec.paths.code_dir else None,
               "tokens": tokens, "expect_gpus": spec.cluster.gpus_per_node > 0,
               "nvlink": nvlink_expected(spec),
               "rules": [r.as_dict() for r in accel_rules.rules_for(spec.framework.name, spec.cluster.accelerator)], "child_timeout_s": max(timeout_s - 10, 5)}
        probes = cluster.on_every_node(on_node.probe, nodes, ctx, env, timeout_s)
        # Round 2 only after every token is written (round 1 finished everywhere): no race, no polling.
        peers = cluster.on_every_node(on_node.read_peers, nodes, {"run_dir": ctx["run_dir"], "tokens": tokens}, env,
                                      timeout_s)
        network: collective.Result
        if os.environ.get("RLAUNCH_PREFLIGHT_COLLECTIVE", "1") == "0":
            network = {"checks": [skipped("collective", "RLAUNCH_PREFLIGHT_COLLECTIVE=0")], "exports": {}}
        else:
            network = collective.run(spec, nodes, env)
    return nodes, probes, peers, network


def nodes_table(nodes: list[dict[str, Any]], probes: dict[str, dict[str, Any]]) -> str:
    rows = []
    for n in nodes:
        p = probes.get(n["node_id"], {})
        fw = p.get("framework", {})
        gpu = p.get("gpu", {})
        rows.append([n["ip"], "head" if n["is_head"] else "worker", f"{n['cpus']:g}", str(gpu.get("count", "?")),
                     p.get("python", "?"), f"{fw.get('version', '?')}{' @' + fw['commit'][:8] if fw.get('commit') else ''}",
                     p.get("error", "ok")])
    return table(["node", "role", "cpus", "gpus", "python", "framework", "probe"], rows)


def run(spec: Spec, report_path: Path, *, expect_nodes: int | None = None,
        inputs: list[Path] | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Probe every node of the cluster at RAY_ADDRESS; write and return the preflight report.
    inputs=None: the framework adapter's inputs(spec), if it has that method."""
    paths = default_inputs(spec) if inputs is None else [str(p) for p in inputs]
    expected = expect_nodes if expect_nodes is not None else expected_nodes(spec)
    timeout_s = cluster.round_timeout(timeout_s)
    started = time.monotonic()
    try:
        nodes, probes, peers, network = collect(spec, paths, timeout_s)
        checks = evaluate(spec, nodes, probes, peers, expected, paths) + network["checks"]
    except (ConnectionError, TimeoutError) as err:  # no cluster at RAY_ADDRESS: a finding, one line
        nodes, probes, peers, network = [], {}, {}, {}
        checks = [check("ray cluster", False, cluster.unreachable(err))]
    by_ip = {n["node_id"]: n for n in nodes}
    report = {
        "passed": all_passed(checks),
        "framework": spec.framework.name,
        "expected_nodes": expected,
        "inputs": paths,
        "checks": checks,
        "nodes": [{**by_ip[k], **v, "peers": peers.get(k, {}).get("seen", {})} for k, v in probes.items()],
        # The collective: the interface each node used per backend, and what the job gets exported.
        "network": {k: network[k] for k in ("backend", "interfaces", "exports", "seconds") if k in network},
        "duration_s": round(time.monotonic() - started, 1),
    }
    write_json(Path(report_path), report)
    report["table"] = nodes_table(nodes, probes)
    return report


def main(argv: list[str] | None = None) -> int:
    def stage(args: argparse.Namespace) -> tuple[dict[str, Any] | None, list[str], str]:
        spec = load_spec(args.spec)
        if args.expect_nodes is not None and args.expect_nodes < 1:
            raise UsageError(f"--expect-nodes={args.expect_nodes}: must be >= 1")
        timeout = positive_timeout(args.timeout)
        out = args.out or Path(spec.paths.run_dir) / "preflight.json"
        inputs = [Path(p) for item in args.input for p in item.split(os.pathsep) if p] or None
        report = run(spec, out, expect_nodes=args.expect_nodes, inputs=inputs, timeout_s=timeout)
        return report, [report["table"]] if report["nodes"] else [], \
            f"{PROG}: passed on {len(report['nodes'])} nodes in {report['duration_s']} s; report {out}"

    return stage_main(PROG, __doc__, [(("--spec",), {"required": True, "type": Path}), (("--out",), {"type": Path}),
                                      (("--expect-nodes",), {"type": int}),
                                      (("--input",), {"action": "append", "default": []}),
                                      (("--timeout",), {"type": float})], stage, argv)


if __name__ == "__main__":
    sys.exit(main())

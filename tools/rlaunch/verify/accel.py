"""Apply the framework/accelerator rules (rlaunch.frameworks.accel) on every node of the cluster.

Run by the job script before preflight. One Ray task per alive node (hard node affinity, no CPUs)
hides each rule's packages from the job's Python there: the distribution's metadata directory in
that Python's environment (sys.prefix, the image's venv) is renamed to <name>.dist-info.rlaunch-hidden,
in the node's container only; the shared storage and the image in its registry are not touched. It
is idempotent: a directory already renamed is left as it is. Metadata outside the job's environment
is refused, never moved. Afterwards importlib.metadata must no longer find the package.

The per-node functions here also answer preflight's questions (runtime_probe): which hidden
packages are still visible, each GPU's compute capability, and whether the rule's modules import,
asked of a child process of the job's own Python so that no CUDA context stays in a Ray worker.

Usage:
  python -m rlaunch.verify.accel --spec SPEC.json [--out REPORT.json] [--timeout S]
  --out  default: <paths.run_dir>/accelerator.json
Env: RAY_ADDRESS (default: auto), RLAUNCH_PREFLIGHT_TIMEOUT_S (default 120): the deadline.
Exit: 0 applied on every node, or no rule applies; 1 a node failed (the last stderr line names the
node, the rule and its known cause); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import verify
from rlaunch.frameworks import accel as accel_rules
from rlaunch.verify import cluster
from rlaunch.verify.report import check, load_spec, positive_timeout, stage_main, write_json

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROG = "accelerator"
HIDDEN = ".rlaunch-hidden"  # suffix of a hidden metadata directory
PROBE_MARK = "RLAUNCH_RUNTIME_PROBE="

# ---------------------------------------------------------------- on every node (Ray tasks)
# Shipped by value like preflight's probes (verify.cluster.ship_by_value): the standard library, Ray
# and this section only.


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _site_dirs(prefix: str) -> list[str]:
    found = []
    for path in [sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")] + list(sys.path):
        real = os.path.realpath(path) if path else ""
        if real and os.path.isdir(real) and real.startswith(prefix + os.sep) and real not in found:
            found.append(real)
    return found


def _hidden_copies(name: str, prefix: str) -> list[str]:
    want = _normalized(name)
    out = []
    for site in _site_dirs(prefix):
        for entry in sorted(os.listdir(site)):
            if entry.endswith(HIDDEN) and _normalized(entry.split("-", 1)[0]) == want:
                out.append(os.path.join(site, entry))
    return out


def hide_metadata(names: list[str], prefix: str | None = None) -> list[dict[str, Any]]:
    """Hide each distribution from importlib.metadata in this Python's environment; one record each."""
    prefix = os.path.realpath(prefix or sys.prefix)
    out = []
    for name in names:
        record = {"name": name, "prefix": prefix}
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            hidden = _hidden_copies(name, prefix)
            record.update(action="already hidden" if hidden else "absent", path=hidden[0] if hidden else "")
            out.append(record)
            continue
        path = getattr(dist, "_path", None)  # PathDistribution's metadata directory
        real = os.path.realpath(str(path)) if path else ""
        record["path"] = real
        if not real or not real.startswith(prefix + os.sep):
            record.update(action="refused", error=f"{name}'s metadata {real or '(no path)'} is outside the job's "
                                                  f"Python environment {prefix}: not touched")
        elif os.path.exists(real + HIDDEN):
            record.update(action="refused", error=f"both {real} and {real + HIDDEN} exist: remove one")
        else:
            try:
                os.rename(real, real + HIDDEN)
                record.update(action="hidden", path=real + HIDDEN)
            except OSError as err:
                record.update(action="refused", error=f"cannot rename {real}: {err}")
        importlib.invalidate_caches()
        if record["action"] == "hidden" and _visible(name):
            record.update(action="refused", error=f"{name} is still visible after hiding {real}")
        out.append(record)
    return out


def _visible(name: str) -> str | None:
    """The version importlib.metadata finds for a distribution, None when it finds none."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


# What the child process of the job's Python runs: CUDA's view and the imports, one JSON line.
_CHILD = r'''
import importlib, json, sys
out = {"capabilities": [], "devices": [], "imports": {}}
try:
    import torch
    n = torch.cuda.device_count()
    out["capabilities"] = [".".join(map(str, torch.cuda.get_device_capability(i))) for i in range(n)]
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(n)]
except Exception as err:
    out["cuda_error"] = f"{type(err).__name__}: {err}"[:300]
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
        out["imports"][module] = "ok"
    except BaseException as err:
        out["imports"][module] = f"{type(err).__name__}: {err}"[:400]
print("%s" + json.dumps(out), flush=True)
''' % PROBE_MARK


def runtime_probe(rule: dict[str, Any], expect_gpus: bool, timeout_s: float) -> dict[str, Any]:
    """On one node, for one rule: what the job's Python sees (hidden packages, GPUs, imports)."""
    out = {"python_executable": sys.executable, "visible": {n: _visible(n) for n in rule["hide"]}}
    if not expect_gpus:
        return out  # no GPU, no CUDA libraries: the GPU side is not asked (preflight says skipped)
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, *rule["imports"]], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        out["error"] = f"{sys.executable} did not finish importing {', '.join(rule['imports'])} in {timeout_s:.0f} s"
        return out
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(PROBE_MARK)), None)
    if line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
        out["error"] = f"{sys.executable} exited {proc.returncode} before answering: {tail}"[:500]
        return out
    out.update(json.loads(line[len(PROBE_MARK):]))
    return out


def _apply(ctx: dict[str, Any]) -> dict[str, Any]:
    """Round on one node: every rule's workaround."""
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
            "rules": {r["name"]: hide_metadata(list(r["hide"])) for r in ctx["rules"]}}


# ---------------------------------------------------------------- on the driver


def evaluate(rules: list[dict[str, Any]], nodes: list[dict[str, Any]],
             results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One check per rule: applied on every node, or the first node where it was not, and why."""
    label = {n["node_id"]: n.get("ip") or n["node_id"][:12] for n in nodes}
    if not results:
        return [check(f"rule {r['name']}", False, f"no node answered; {r['cause']}") for r in rules]
    checks = []
    for rule in rules:
        bad = None
        for node_id, result in results.items():
            if "error" in result:
                bad = (label.get(node_id, node_id), f"no result: {result['error']}")
                break
            refused = next((r for r in result["rules"][rule["name"]] if r["action"] == "refused"), None)
            if refused:
                bad = (label.get(node_id, node_id), refused["error"])
                break
        if bad:
            checks.append(check(f"rule {rule['name']}", False, f"{bad[1]}; {rule['cause']}", node=bad[0]))
            continue
        actions = sorted({f"{r['name']} {r['action']}" for res in results.values() for r in res["rules"][rule["name"]]})
        checks.append(check(f"rule {rule['name']}", True, f"{'; '.join(actions)} on {len(results)} nodes"))
    return checks


def run(spec: Spec, report_path: Path, timeout_s: float | None = None) -> dict[str, Any]:
    rules = [r.as_dict() for r in accel_rules.rules_for(spec.framework.name, spec.cluster.accelerator)]
    timeout_s = cluster.round_timeout(timeout_s)
    started = time.monotonic()
    nodes, results = [], {}
    if rules:
        try:
            with cluster.joined(timeout_s):
                cluster.ship_by_value(sys.modules[__name__])
                nodes = cluster.alive_nodes()
                results = cluster.on_every_node(_apply, nodes, {"rules": rules}, verify.task_env(spec), timeout_s)
            checks = evaluate(rules, nodes, results)
        except (ConnectionError, TimeoutError) as err:
            checks = [check("ray cluster", False, cluster.unreachable(err))]
    else:
        checks = []
    label = {n["node_id"]: n["ip"] for n in nodes}
    report = {
        "passed": all(c["passed"] for c in checks),
        "rules": rules,
        "checks": checks,
        "nodes": [{"node_id": k, "ip": label.get(k, ""), **v} for k, v in results.items()],
        "duration_s": round(time.monotonic() - started, 1),
    }
    write_json(Path(report_path), report)
    return report


def main(argv: list[str] | None = None) -> int:
    def stage(args: argparse.Namespace) -> tuple[dict[str, Any] | None, list[str], str]:
        spec = load_spec(args.spec)
        out = args.out or Path(spec.paths.run_dir) / "accelerator.json"
        report = run(spec, out, timeout_s=positive_timeout(args.timeout))
        if not report["rules"]:
            return None, [], (f"{PROG}: no framework/accelerator rule for {spec.framework.name} on "
                              f"{spec.cluster.accelerator or 'no accelerator'}; report {out}")
        applied = [f"{PROG}: {node['ip']}: rule {name}: {r['name']} {r['action']}"
                   f"{' (' + r['path'] + ')' if r.get('path') else ''}"
                   for node in report["nodes"] for name, records in node.get("rules", {}).items() for r in records]
        return report, applied, (f"{PROG}: applied {', '.join(r['name'] for r in report['rules'])} on "
                                 f"{len(report['nodes'])} nodes in {report['duration_s']} s; report {out}")

    return stage_main(PROG, __doc__, [(("--spec",), {"required": True, "type": Path}), (("--out",), {"type": Path}),
                                      (("--timeout",), {"type": float})], stage, argv)


if __name__ == "__main__":
    sys.exit(main())

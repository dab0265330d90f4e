"""What preflight runs on every node (two Ray tasks, rlaunch.verify.preflight sends them).

Round 1 (probe): the node's IP, hostname, Python and its executable, the framework's version and
commit (imported if importable, else "absent"), the GPUs (nvidia-smi; torch.cuda where GPUs are
expected; on GB200 the NVLink fabric and P2P), CUDA_VISIBLE_DEVICES and NCCL_* env, the
framework/accelerator rules' runtime probe (verify.accel), the SHA256 of every input (a directory's
SHA256SUMS stands for it), and a random token written to <run_dir>/.preflight/<node_id>. Round 2
(read_peers): every other node's token, read back under this node's view of run_dir.

A path may contain {node_ip}, replaced on each node by that node's IP (a per-node disk).

This module is shipped to the nodes by value (cloudpickle, verify.cluster.ship_by_value): its
functions use only the standard library, Ray, torch and verify.accel's node side (shipped so too),
never the rest of rlaunch, so a node need not have rlaunch installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from typing import Any, Required, TypedDict

from rlaunch.verify.accel import runtime_probe

NODE_IP = "{node_ip}"  # in a path: replaced on each node by that node's IP
PROBE_DIR = ".preflight"  # under run_dir: one token file per node, left as evidence
MANIFEST = "SHA256SUMS"


# The shapes of the node's answers (types only: nothing below builds them by name, so the functions
# shipped by value reference none of them).
class InputProbe(TypedDict, total=False):
    path: Required[str]
    problems: Required[list[str]]
    size: int
    digest: str  # what preflight compares across nodes: the file's SHA256 or its manifest's
    sha256: str
    manifest_sha256: str
    files: int


class FrameworkInfo(TypedDict, total=False):
    version: Required[str]
    commit: Required[str]
    error: str


class NvlinkInfo(TypedDict, total=False):
    fabric: list[dict[str, str]]
    p2p_not_ok: list[str]
    error: str
    skipped: str


class CudaInfo(TypedDict, total=False):
    available: Required[bool | None]
    count: Required[int]
    error: str


class GpuInfo(TypedDict, total=False):
    count: Required[int]
    models: Required[list[str]]
    drivers: Required[list[str]]
    source: Required[str]
    error: str
    nvlink: NvlinkInfo
    cuda: CudaInfo


class Storage(TypedDict, total=False):
    path: Required[str]  # this node's token file
    error: str
    free: int            # bytes free on the filesystem that holds the checkpoints (ctx["ckpt_dir"])
    free_at: str         # the nearest existing directory to it, where that was measured


class Probe(TypedDict, total=False):
    """Round 1's answer (keys in the order the report shows them)."""
    node_id: Required[str]
    node_ip: Required[str]
    hostname: Required[str]
    python: Required[str]
    python_executable: Required[str]
    env: Required[dict[str, str]]  # NCCL_* and CUDA_VISIBLE_DEVICES
    framework: Required[FrameworkInfo]
    gpu: Required[GpuInfo]
    accelerator: dict[str, dict[str, Any]]  # rule name -> verify.accel.runtime_probe's answer
    inputs: list[InputProbe]
    code: CodeProbe
    storage: Storage


class CodeProbe(TypedDict):
    """CODE's pack as this node sees it: the hash of its manifest, once every file matched it."""
    path: str
    hash: str
    problems: list[str]


class Peers(TypedDict):
    """Round 2's answer; seen: peer node id -> "ok", "missing", "different content" or the error."""
    node_id: str
    node_ip: str
    storage: str
    seen: dict[str, str]


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _manifest_entries(path: str) -> dict[str, str]:
    """SHA256SUMS (`sha256sum` output): relative name -> digest."""
    entries = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            digest, _, name = line.strip().partition(" ")
            if digest and name:
                entries[name.lstrip(" *")] = digest
    return entries


def probe_code(path: str, manifest: str) -> CodeProbe:
    """A staged pack (rlaunch.config.code) at `path`: every file its manifest lists checked, the
    manifest's sha256 (the pack's content hash) reported."""
    out: CodeProbe = {"path": path, "hash": "", "problems": []}
    try:
        with open(os.path.join(path, manifest), "rb") as fh:
            text = fh.read()
    except OSError as err:
        out["problems"].append(f"no manifest ({type(err).__name__}: {err})")
        return out
    for line in text.decode("utf-8", "replace").splitlines():
        digest, _, rel = line.split(" ", 2)  # <sha256> <x|-> <path>
        try:
            same = _sha256(os.path.join(path, rel)) == digest
        except OSError:
            out["problems"].append(f"{rel} missing")
            continue
        if not same:
            out["problems"].append(f"{rel} differs from the manifest")
    out["hash"] = hashlib.sha256(text).hexdigest()
    return out


def probe_input(path: str) -> InputProbe:
    """What this node sees at one input path: a digest to compare across nodes, and problems."""
    out: InputProbe = {"path": path, "problems": []}
    if not os.path.exists(path):
        out["problems"].append("missing")
        return out
    if os.path.isfile(path):
        out["size"] = os.path.getsize(path)
        if out["size"] == 0:
            out["problems"].append("empty")
        out["digest"] = out["sha256"] = _sha256(path)
        manifest = os.path.join(os.path.dirname(path), MANIFEST)
        if os.path.isfile(manifest) and manifest != path:
            out["manifest_sha256"] = _sha256(manifest)
            listed = _manifest_entries(manifest).get(os.path.basename(path))
            if listed and listed != out["sha256"]:
                out["problems"].append("does not match its SHA256SUMS entry")
        return out
    # A directory: its SHA256SUMS stands for it (hashing a model's weights on every node would cost
    # minutes); every listed file must exist and be non-empty. Without a manifest, hash everything.
    manifest = os.path.join(path, MANIFEST)
    if os.path.isfile(manifest):
        entries = _manifest_entries(manifest)
        out["digest"] = out["manifest_sha256"] = _sha256(manifest)
        out["files"] = len(entries)
        if not entries:
            out["problems"].append("SHA256SUMS lists no files")
        for name in sorted(entries):
            full = os.path.join(path, name)
            if not os.path.isfile(full) or os.path.getsize(full) == 0:
                out["problems"].append(f"{name} (listed in SHA256SUMS) missing or empty")
        return out

    tree = hashlib.sha256()
    count = 0
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            tree.update(os.path.relpath(full, path).encode() + b"\0" + _sha256(full).encode())
            count += 1
    out["digest"], out["files"] = tree.hexdigest(), count
    if count == 0:
        out["problems"].append("empty directory")
    return out


def framework_info(name: str) -> FrameworkInfo:
    """Version and commit of the framework as this node imports it; "absent" if it does not."""
    info: FrameworkInfo = {"version": "absent", "commit": ""}
    try:
        module = importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - any import failure means the job would fail too
        info["error"] = f"{type(err).__name__}: {err}"[:300]
        return info
    try:
        info["version"] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        info["version"] = str(getattr(module, "__version__", "unknown"))
    # A git checkout on PYTHONPATH (RLinf): its HEAD, but only if the package sits at the top of that
    # checkout; a site-packages inside some other repository (a venv in a project) says nothing.
    where = os.path.dirname(os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or ".")))
    try:
        top, head = subprocess.run(["git", "-C", where, "rev-parse", "--show-toplevel", "HEAD"],
                                   capture_output=True, text=True, timeout=20, check=True).stdout.split()
        if os.path.realpath(top) != os.path.realpath(where):
            raise ValueError(f"{where} is inside {top}, not a checkout of {name}")
        info["commit"] = head
    except (OSError, subprocess.SubprocessError, ValueError):
        try:
            direct = importlib.metadata.distribution(name).read_text("direct_url.json") or "{}"
            info["commit"] = json.loads(direct).get("vcs_info", {}).get("commit_id", "")
        except (importlib.metadata.PackageNotFoundError, ValueError):
            pass
    return info


def parse_fabric(text: str) -> list[dict[str, str]]:
    """`nvidia-smi -q`'s Fabric section of each GPU (multi-node NVLink, GB200 NVL72): state, status,
    clique id and cluster UUID, as printed."""
    out: list[dict[str, str]] = []
    fabric: dict[str, str] | None = None
    indent = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "Fabric":
            fabric, indent = {}, len(line) - len(line.lstrip())
            out.append(fabric)
            continue
        if fabric is None:
            continue
        if stripped and len(line) - len(line.lstrip()) <= indent:
            fabric = None
            continue
        key, sep, value = stripped.partition(":")
        if sep and key.strip() in ("State", "Status", "CliqueId", "ClusterUUID"):
            fabric.setdefault(key.strip().lower(), value.strip())
    return out


def parse_p2p(text: str) -> list[str]:
    """`nvidia-smi topo -p2p n` (NVLink peer-to-peer between this node's GPUs): each pair whose status
    is not OK, as 'GPU0-GPU1: NS'."""
    gpu = re.compile(r"GPU\d+$")
    lines = [line.split() for line in text.splitlines() if line.split() and gpu.match(line.split()[0])]
    names = next((cells for cells in lines if all(gpu.match(c) for c in cells)), [])
    rows = [cells for cells in lines if cells != names]
    return [f"{row[0]}-{names[j]}: {cell}" for row in rows for j, cell in enumerate(row[1:len(names) + 1])
            if cell not in ("X", "OK")]


def _smi(args: list[str], out: NvlinkInfo) -> str | None:
    """What nvidia-smi prints with these arguments; None, and the error in out, when it fails."""
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        out["error"] = f"{' '.join(args)}: {err}"[:300]
        return None


def nvlink_info() -> NvlinkInfo:
    """GB200: the NVLink fabric (MNNVL) each GPU joined and P2P between this node's GPUs."""
    out: NvlinkInfo = {}
    if (text := _smi(["nvidia-smi", "-q"], out)) is not None:
        out["fabric"] = parse_fabric(text)
    if (text := _smi(["nvidia-smi", "topo", "-p2p", "n"], out)) is not None:
        out["p2p_not_ok"] = parse_p2p(text)
    return out


def gpu_info(expect_gpus: bool, nvlink: bool = False) -> GpuInfo:
    """This node's GPUs as nvidia-smi lists them, and CUDA's view (torch) where GPUs are expected."""
    out: GpuInfo = {"count": 0, "models": [], "drivers": [], "source": "none"}
    if shutil.which("nvidia-smi"):
        try:
            rows = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=60, check=True).stdout
            parsed = [r.rsplit(",", 1) for r in rows.strip().splitlines() if "," in r]
            out.update({"count": len(parsed), "models": sorted({n.strip() for n, _ in parsed}),
                        "drivers": sorted({d.strip() for _, d in parsed}), "source": "nvidia-smi"})
        except (OSError, subprocess.SubprocessError) as err:
            out["error"] = f"nvidia-smi: {err}"[:300]
    if nvlink:
        out["nvlink"] = nvlink_info() if out["count"] else {"skipped": "no GPUs on this node"}
    # torch costs seconds to import: only where GPUs are expected does CUDA's view matter.
    if expect_gpus:
        try:
            import torch

            cuda: CudaInfo = {"available": torch.cuda.is_available(), "count": torch.cuda.device_count()}
            out["cuda"] = cuda
            if out["source"] == "none" and cuda["count"]:
                names = {torch.cuda.get_device_name(i) for i in range(cuda["count"])}
                out.update({"count": cuda["count"], "models": sorted(names), "source": "torch"})
        except ImportError:
            out["cuda"] = {"available": None, "count": 0, "error": "torch not importable"}
    return out


def _expand(path: str, node_ip: str) -> str:
    return path.replace(NODE_IP, node_ip)


def probe(ctx: dict[str, Any]) -> Probe:
    """Round 1 on one node: facts, input digests, and this node's storage token written."""
    import ray

    node_ip = ray.util.get_node_ip_address()
    out: Probe = {
        "node_id": ray.get_runtime_context().get_node_id(),
        "node_ip": node_ip,
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith("NCCL_") or k == "CUDA_VISIBLE_DEVICES"},
        "framework": framework_info(ctx["framework"]),
        "gpu": gpu_info(ctx["expect_gpus"], ctx.get("nvlink", False)),
    }
    if ctx.get("rules"):  # the framework/accelerator rules, after the job applied their workaround
        out["accelerator"] = {r["name"]: runtime_probe(r, ctx["expect_gpus"], ctx["child_timeout_s"])
                              for r in ctx["rules"]}
    out["inputs"] = [probe_input(_expand(p, node_ip)) for p in ctx["inputs"]]
    if ctx.get("code"):
        out["code"] = probe_code(ctx["code"]["dir"], ctx["code"]["manifest"])
    storage = os.path.join(_expand(ctx["run_dir"], node_ip), PROBE_DIR)
    path = os.path.join(storage, out["node_id"])
    out["storage"] = {"path": path}
    try:
        os.makedirs(storage, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(ctx["tokens"][out["node_id"]])
            fh.flush()
            os.fsync(fh.fileno())  # the peers read it next; do not leave it in a page cache only
    except OSError as err:
        out["storage"]["error"] = f"{type(err).__name__}: {err}"
    where = _expand(ctx.get("ckpt_dir") or ctx["run_dir"], node_ip)
    while where and not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        stat = os.statvfs(where)
        out["storage"]["free"] = stat.f_bavail * stat.f_frsize
        out["storage"]["free_at"] = where
    except OSError:
        pass
    return out


def read_peers(ctx: dict[str, Any]) -> Peers:
    """Round 2 on one node: read every other node's token under this node's view of run_dir."""
    import ray

    node_ip = ray.util.get_node_ip_address()
    me = ray.get_runtime_context().get_node_id()
    storage = os.path.join(_expand(ctx["run_dir"], node_ip), PROBE_DIR)
    seen: dict[str, str] = {}
    for peer, token in ctx["tokens"].items():
        if peer == me:
            continue
        try:
            with open(os.path.join(storage, peer), encoding="utf-8") as fh:
                seen[peer] = "ok" if fh.read() == token else "different content"
        except FileNotFoundError:
            seen[peer] = "missing"
        except OSError as err:
            seen[peer] = f"{type(err).__name__}: {err}"
    return {"node_id": me, "node_ip": node_ip, "storage": storage, "seen": seen}

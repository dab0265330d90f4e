#!/usr/bin/env python3
"""Inputs benchmark (issue 46): the seconds and bytes the GPU nodes spend on the inputs, today's design
against the new one, for a first launch, a second launch and a recovery, with SkyPilot's rendered
scripts executed on network-namespace nodes.

What runs: rlaunch renders the SkyPilot specs of one run (preset verl-ppo-gsm8k-0.5b on INFRA=gcp, its
model the generated one below): task.yaml (the GPU task, 2 nodes) and inputs.sky.yaml (the CPU step).
Each node's script is built by SkyPilot's own builders (sky 0.14.1, in a child process): the GPU task's
`setup` as CloudVmRayBackend._setup builds it (log_lib.make_task_bash_script with the task envs,
SKYPILOT_SETUP_NODE_RANK / _IPS / _NUM_GPUS_PER_NODE, SKYPILOT_CLUSTER_INFO, SKYPILOT_USER, run as
`<unset Ray vars>; /bin/bash -i FILE`), the CPU step's `run` as its task codegen builds it
(build_task_bash_script inside make_task_bash_script, SKYPILOT_NODE_RANK / _IPS / _NUM_NODES). Every
node is a Linux network namespace (tests/kuberay_harness.py's Network: a bridge, a namespace per node,
a record under build/kuberay-harness/ so a run killed past its cleanup is swept by the next one): two
fresh ones for the GPU task of every launch, one for each CPU step. The GPU task's `run` is not
executed: before scripts/ray-up it touches no input, and after it the only input work is job.sh's
preflight comparing each node's manifest digest, the same in both designs and a Ray cluster (10-25 s)
per launch. The "bucket" (storage.mount and the inputs bucket's models/ and data/ prefixes) is one
directory all namespaces share; the fake hub (tests/fakehub.py) listens in the harness's own namespace
on the bridge, where every node reaches it (HF_ENDPOINT). The rendered files are the file mount
(RLAUNCH_ARTIFACTS); ~/sky_workdir is this repository; the launcher venv stands in for the image.

  today  the GPU task's setup prepares the inputs on rank 0, every GPU node up and billed: task.yaml's
         `setup` with setup.sh's lines before issue 46 (today_line: `sha256sum --check` of every file,
         else a download). First launch downloads; second launch and recovery hash every file (a
         shared bucket, storage.source; today's default, a new bucket per run, downloaded every time).
  new    first launch: the CPU step (inputs.sky.yaml: setup.sh downloads, hashes, stamps, and records
         the objects' versions) on the CPU node, then the GPU task's check-only setup (inputs-check.sh:
         the stamp against a listing). Second launch: the launcher's own decision,
         SkyPilot._inputs_prepared (rlaunch.job.objects.compare of the recorded object versions),
         skips the CPU step when it matches, then the GPU task's setup. Recovery: the GPU task's setup
         again on fresh nodes, no CPU step.
The bucket is a directory, so GCS is stood in for by tests/bench/dirbucket.py on both sides of that
check: a `gcloud` on the CPU node's PATH for the step's `record`, and the client the launcher's
`compare` lists with; an object's generation is its file's mtime (ns). The rest is rlaunch's code.

gpu_s: wall seconds from starting the setup on both GPU nodes to both ending (SkyPilot waits for every
node's setup), under strace. gpu_bytes: bytes read from the model's files by the GPU nodes' setup
processes (strace -f -y of read/pread/readv calls, every process of both nodes, with --seccomp-bpf so only
those calls stop a process; without strace, null),
not SHA256SUMS and its stamp/record (a few KB). cpu_s: the CPU step's seconds (first launch), the
launcher's metadata check (second launch: the step skipped) or the step's, when it ran.

The model is a generated one of RLAUNCH_BENCH_INPUTS_MB (random bytes, which hash like real weights).

Goal: a prepared run (second, recovery) of the new design takes at most 2 s and reads 0 model
bytes on the GPU side.

Usage: tests/bench/inputs.py     (after `make setup`; as root, with iproute2's ip: network namespaces)
Env:
  RLAUNCH_BENCH_INPUTS_MB  model size in MiB, >= 1 (default 1024; smoke 1)
  RLAUNCH_BENCH_SMOKE      1: the smallest model, then the JSON's keys and types checked
  RLAUNCH_BENCH_OUT        result file (default build/bench/inputs.json)
  RLAUNCH_BENCH_STRICT     1: exit 1 when the goal is missed (default 0)
Exit: 0 done, 1 the goal missed (strict) or the JSON lacks a key or type (smoke), 2 bad input or no
  root/ip, 3 a step failed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import die, env_int, loadavg, log  # noqa: E402 - tests/bench/, just put on the path
from schema import NUM, OPT, check  # noqa: E402

PROG = "inputs bench"
COMMIT = "46b0e7c46b0e7c46b0e7c46b0e7c46b0e7c46b0e"
PRESET = "verl-ppo-gsm8k-0.5b"
SHARDS = 4
GOAL_S = 2.0
STEP_DEADLINE_S = 1800  # one node's setup or CPU step: a 1 GB download and hash with margin
DESIGN = {"gpu_s": NUM, "gpu_bytes": OPT}
SCHEMA = {"model_bytes": int, "bytes_by": str, "met": bool, "loadavg": list,
          "cases": {case: {"today": DESIGN, "new": {**DESIGN, "cpu_s": NUM}}
                    for case in ("first", "second", "recovery")}}
NOT_WEIGHTS = ("SHA256SUMS", "SHA256SUMS.stamp", "SHA256SUMS.objects")
READ = re.compile(r"\b(?:read|pread64|readv|preadv2?)\(\d+<([^>]*)>.*\)\s+=\s+(\d+)$")
TODAY_SCRIPT = "setup-today.sh"

# SkyPilot's own builders, in a child process with its own HOME (importing sky writes ~/.sky; 4-5 s):
# each item a GPU node's setup (as CloudVmRayBackend._setup) or a node's run (as its task codegen).
BUILD_PY = """
import json, sys
from sky.backends.task_codegen import UNSET_RAY_ENV_VARS, TaskCodeGen
from sky.skylet import log_lib
items = json.loads(open(sys.argv[1]).read())
prefix = " && ".join(f"unset {var}" for var in UNSET_RAY_ENV_VARS)
out = []
for item in items:
    body = item["body"]
    if item["kind"] == "run":
        body = TaskCodeGen.build_task_bash_script(body, env_prefix=prefix)
    out.append(log_lib.make_task_bash_script(body, env_vars=item["env"]))
print(json.dumps({"unset": prefix, "scripts": out}))
"""


def make_model(hub_root: Path, mib: int) -> int:
    """The generated model on the fake hub: config files and SHARDS safetensors of random bytes."""
    top = hub_root / "models" / "acme" / "bench-lm" / COMMIT
    top.mkdir(parents=True)
    (top / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    (top / "tokenizer_config.json").write_text("{}")
    shard, chunk = mib * 2**20 // SHARDS, 2**24
    for i in range(SHARDS):
        with (top / f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors").open("wb") as f:
            left = shard
            while left:
                f.write(os.urandom(min(chunk, left)))
                left -= min(chunk, left)
    return sum(p.stat().st_size for p in top.iterdir())


def today_line(mdir: str, fetch: str) -> str:
    """setup.sh's line before issue 46 (the GPU task's setup): sha256sum over every file, else a download."""
    q = shlex.quote(mdir)
    return (f"if ! (cd {q} 2>/dev/null && sha256sum --check --quiet --strict SHA256SUMS); then "
            f'"${{RLAUNCH_PYTHON:-python3}}" -m rlaunch.job.data {fetch} --out={q}; '
            f"else echo 'inputs: {mdir} matches its SHA256SUMS: kept'; fi")


def _exit_by(proc: subprocess.Popen, deadline: float) -> int | None:
    """The process's exit status, or None when it is still running at the deadline (monotonic)."""
    try:
        return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


class Bench:
    """The namespace nodes, the rendered run, and the measurements; close() removes every namespace
    and process it started (also after Ctrl-C, SIGTERM or a failed step)."""

    def __init__(self, work: Path):
        import kuberay_harness as kh

        self.work, self.kh = work, kh
        self.strace = shutil.which("strace")
        self.net = kh.Network()  # addresses known now, nothing created before up()
        self.procs: list[subprocess.Popen] = []
        self.hub = self.op = None

    def up(self, hub_root: Path) -> None:
        from fakehub import FakeHub

        self.net.up()
        self.op = self.kh._InNetns(self.net.operator_ns)  # the harness's own namespace: the hub's socket lives there
        self.hub = self.op.call(lambda: FakeHub(hub_root, host=self.net.operator_ip).__enter__())

    def close(self) -> None:
        try:
            self.net.kill(list(self.net.namespaces), tuple(self.procs), grace_s=2.0)
        finally:
            if self.hub is not None:
                self.hub.__exit__(None, None, None)
            if self.op is not None:
                self.op.close()
            self.net.down()

    # ------------------------------------------------------------ the run, rendered by rlaunch

    def render(self) -> None:
        from rlaunch.backends.skypilot import backend as sp
        from rlaunch.config import inputs
        from rlaunch.config import load as config
        from rlaunch.plan import artifacts
        from rlaunch.plan.render import render_template
        import dirbucket
        import yaml

        self.storage = self.work / "bucket"
        self.spec = config.load(PRESET, {"INFRA": "gcp", "RUN_ID": "bench-inputs"},
                                f"model.path=acme/bench-lm@{COMMIT} storage.mount={self.storage}")
        files = artifacts.finish(self.spec, sp.BACKEND.render(self.spec))
        self.items = inputs.of(self.spec)
        self.model_dir = next(item.dir for item in self.items if item.what == "model")
        lines = [today_line(item.dir, " ".join(item.fetch)) for item in self.items]
        files[TODAY_SCRIPT] = render_template("common/setup.sh.j2", spec=self.spec, lines=lines,
                                              runner="Today's design (before issue 46): the GPU task's rank 0 "
                                                     "hashes every file, else downloads.")
        self.artifacts = self.work / "artifacts"  # the file mount RLAUNCH_ARTIFACTS
        for rel, text in files.items():
            (self.artifacts / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.artifacts / rel).write_text(text)
        self.task = yaml.safe_load(files["task.yaml"])
        self.cpu_task = yaml.safe_load(files[sp.INPUTS_TASK])
        self.setups = {"new": self.task["setup"], "today": self.task["setup"].replace(sp.CHECK_SCRIPT, TODAY_SCRIPT)}
        # The bucket's stand-in: gcloud on the CPU node, the storage client on the launcher.
        self.dirs = dirbucket.mapping(self.task["file_mounts"])
        (self.work / "dirbucket.json").write_text(json.dumps(self.dirs))
        dirbucket.install_gcloud(self.work / "bin")
        self.bucket_client = dirbucket.Client(self.dirs)
        self.home = self.work / "home"
        self.home.mkdir()
        (self.home / "sky_workdir").symlink_to(ROOT)  # SkyPilot cds to ~/sky_workdir; RLAUNCH_HOME is $PWD
        log(PROG, f"rendered {PRESET} for INFRA=gcp: {', '.join(sorted(files))}; model {self.model_dir}")

    # ------------------------------------------------------------ nodes and SkyPilot's scripts

    def node_env(self, task: dict, ips: list[str], rank: int, setup: bool) -> dict[str, str]:
        """A node's env as SkyPilot sets it for setup or run, with this machine in for the cloud VM."""
        sky = ({"SKYPILOT_SETUP_NODE_IPS": "\n".join(ips), "SKYPILOT_SETUP_NODE_RANK": str(rank),
                "SKYPILOT_SETUP_NUM_GPUS_PER_NODE": "0"} if setup else
               {"SKYPILOT_NODE_IPS": "\n".join(ips), "SKYPILOT_NODE_RANK": str(rank),
                "SKYPILOT_NUM_NODES": str(len(ips)), "SKYPILOT_NUM_GPUS_PER_NODE": "0",
                "SKYPILOT_TASK_ID": f"sky-2026-12-06-00-00-00-000000_{task['name']}_1",
                "SKYPILOT_INTERNAL_JOB_ID": "1"})
        return {**task["envs"], **sky,
                "SKYPILOT_CLUSTER_INFO": json.dumps({"cluster_name": task["name"], "cloud": "GCP",
                                                     "region": "us-central1", "zone": None}),
                "SKYPILOT_USER": "bench",
                "RLAUNCH_ARTIFACTS": str(self.artifacts), "RLAUNCH_PYTHON": sys.executable}

    def start_build(self, plan: list[tuple[str, str, dict, list[str]]]) -> subprocess.Popen:
        """Every script of the benchmark, by SkyPilot's builders in one child (import sky: seconds, so it
        runs while the model is generated); plan items are (key, kind, task, namespaces)."""
        items, self.keys = [], []
        for key, kind, task, names in plan:
            ips = [self.net.pod_ip() for _ in names]
            body = self.setups[key.split("-")[0]] if kind == "setup" else task["run"]
            for rank, ns in enumerate(names):
                items.append({"kind": kind, "body": body, "env": self.node_env(task, ips, rank, kind == "setup")})
                self.keys.append((key, ns, ips[rank]))
        sky_home = self.work / "sky-home"
        sky_home.mkdir()
        (self.work / "scripts.json").write_text(json.dumps(items))
        proc = subprocess.Popen([sys.executable, "-c", BUILD_PY, str(self.work / "scripts.json")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                env={"HOME": str(sky_home), "PATH": "/usr/bin:/bin"})
        self.procs.append(proc)
        return proc

    def finish_build(self, proc: subprocess.Popen) -> None:
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            die(PROG, "SkyPilot's script builders passed 180 s", 3)
        if proc.returncode:
            die(PROG, f"SkyPilot's script builders failed ({proc.returncode}): {err[-2000:]}", 3)
        built = json.loads(out.strip().splitlines()[-1])
        self.unset = built["unset"]
        self.scripts: dict[str, list[tuple[str, str, Path]]] = {}
        for (key, ns, ip), text in zip(self.keys, built["scripts"]):
            path = self.work / "scripts" / f"{key}-{ns}.sh"
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            self.scripts.setdefault(key, []).append((ns, ip, path))
        log(PROG, f"{len(self.keys)} node scripts built by SkyPilot's builders")

    def run_nodes(self, key: str, setup: bool) -> tuple[float, int | None]:
        """The key's scripts on fresh namespaces, all at once: seconds until every node is done, and
        for a GPU task's setup the model bytes its processes read (strace; a CPU step runs untraced:
        its bytes are not the question). The namespaces are removed after."""
        traced = self.strace if setup else None
        nodes = self.scripts[key]
        for ns, ip, _ in nodes:
            self.net.add_namespace(ns, ip)
            (self.work / "nodes" / ns / "tmp").mkdir(parents=True, exist_ok=True)
        # The process env: what SkyPilot's script does not set, this machine in for the VM's (the hub on
        # the bridge, each node's own disk for the Hub's cache and temporary files, the bucket stand-in).
        env = {"PATH": f"{self.work / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(self.home),
               "LANG": "C.UTF-8", "DIRBUCKET_MAP": str(self.work / "dirbucket.json"), "HF_ENDPOINT": self.hub.url,
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        procs, logs, traces = [], [], []
        started = time.monotonic()
        for ns, _, script in nodes:
            # SkyPilot: setup as `<unset>; /bin/bash -i FILE 2>&1` (CloudVmRayBackend._setup); run as bash FILE.
            command = f"/bin/bash -i {shlex.quote(str(script))}" if setup else f"/bin/bash {shlex.quote(str(script))}"
            argv = ["ip", "netns", "exec", ns, "/bin/bash", "-c", f"{self.unset}; {command}" if setup else command]
            trace = script.with_suffix(".trace")
            if traced:
                # --seccomp-bpf: only the traced calls stop the process, so Python's start-up is not slowed.
                argv = [traced, "-f", "--seccomp-bpf", "-qq", "-y", "-e", "trace=read,pread64,readv,preadv,preadv2",
                        "-e", "signal=none", "-o", str(trace), *argv]
            log_path = script.with_suffix(".log")
            local = self.work / "nodes" / ns
            with log_path.open("w") as out:
                procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              env={**env, "HF_HOME": str(local / "hf"), "TMPDIR": str(local / "tmp")}))
            self.procs.append(procs[-1])
            logs.append(log_path)
            traces.append(trace)
        codes = [_exit_by(proc, started + STEP_DEADLINE_S) for proc in procs]
        seconds = round(time.monotonic() - started, 3)
        self.net.remove_namespaces([ns for ns, _, _ in nodes], tuple(procs))
        if any(code != 0 for code in codes):
            tails = "\n".join(f"--- {p.name} (exit {c}):\n{p.read_text(errors='replace')[-1500:]}"
                              for p, c in zip(logs, codes))
            die(PROG, f"{key}: a node's script failed or passed {STEP_DEADLINE_S} s\n{tails}", 3)
        return seconds, self.model_bytes(traces) if traced else None

    def model_bytes(self, traces: list[Path]) -> int:
        total = 0
        for trace in traces:
            for text in trace.read_text(errors="replace").splitlines():
                m = READ.search(text)
                # The model's files; SHA256SUMS and its stamp and record are what a check by metadata reads.
                if m and m.group(1).startswith(self.model_dir + "/") and Path(m.group(1)).name not in NOT_WEIGHTS:
                    total += int(m.group(2))
            trace.unlink()
        return total

    def launcher_check(self) -> tuple[float, int | None, str]:
        """`make launch`'s decision before the CPU step: the backend's own _inputs_prepared, listing the
        bucket with the stand-in client in place of google-cloud-storage's."""
        from rlaunch.backends.skypilot import backend as sp
        from rlaunch.job import objects

        real = objects._client
        objects._client = lambda *_args, **_kwargs: self.bucket_client  # whatever the store and limit
        try:
            started = time.monotonic()
            matched, why = sp.BACKEND._inputs_prepared(self.spec)
            return round(time.monotonic() - started, 3), matched, why
        finally:
            objects._client = real

    def empty_bucket(self) -> None:
        for child in self.storage.iterdir():
            shutil.rmtree(child)


def plan(bench: Bench) -> list[tuple[str, str, dict, list[str]]]:
    """Every launch's nodes: two fresh GPU nodes per launch and design, a fresh CPU node per CPU step."""
    names = {f"{d}-{c}": [f"{bench.net.tag}-{d[0]}{c[0]}g{rank}" for rank in range(2)]
             for d in ("today", "new") for c in ("first", "second", "recovery")}
    return ([(key, "setup", bench.task, ns) for key, ns in names.items()] +
            [("cpu-first", "run", bench.cpu_task, [f"{bench.net.tag}-cf"]),
             ("cpu-second", "run", bench.cpu_task, [f"{bench.net.tag}-cs"])])


def measure(bench: Bench) -> dict:
    cases: dict[str, dict] = {"first": {}, "second": {}, "recovery": {}}
    for case in cases:  # today: the GPU task's setup on every launch and every recovery
        s, b = bench.run_nodes(f"today-{case}", setup=True)
        cases[case]["today"] = {"gpu_s": s, "gpu_bytes": b}
        log(PROG, f"today {case}: GPU setup {s} s, {b} model bytes")
    bench.empty_bucket()  # the new design's first launch starts from an empty bucket too
    cpu_s, _ = bench.run_nodes("cpu-first", setup=False)  # first launch: the CPU step downloads and stamps
    s, b = bench.run_nodes("new-first", setup=True)
    cases["first"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": cpu_s}
    log(PROG, f"new first: CPU step {cpu_s} s, GPU setup {s} s, {b} model bytes")
    cpu_s, matched, why = bench.launcher_check()  # second launch: make launch's metadata check
    if matched is None:
        log(PROG, f"new second: the launcher runs the CPU step: {why}")
        step_s, _ = bench.run_nodes("cpu-second", setup=False)
        cpu_s = round(cpu_s + step_s, 3)
    else:
        log(PROG, f"new second: the launcher's check matched {matched} objects in {cpu_s} s: CPU step skipped")
    s, b = bench.run_nodes("new-second", setup=True)
    cases["second"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": cpu_s, "cpu_step_skipped": matched is not None}
    s, b = bench.run_nodes("new-recovery", setup=True)  # recovery: the GPU task's setup again, no CPU step
    cases["recovery"]["new"] = {"gpu_s": s, "gpu_bytes": b, "cpu_s": 0.0}
    return cases


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    if not b:
        return "inf" if a else "1x"
    return f"{a / b:.0f}x" if a / b >= 10 else f"{a / b:.1f}x"


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through Bench.close(): no namespace or process left behind


def main() -> int:
    smoke = os.environ.get("RLAUNCH_BENCH_SMOKE") == "1"
    mib = env_int(PROG, "RLAUNCH_BENCH_INPUTS_MB", 1 if smoke else 1024, 1)
    if os.geteuid() != 0 or not shutil.which("ip"):
        die(PROG, "needs root and iproute2's ip: the nodes are network namespaces", 2)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    # The inputs bucket is named after SkyPilot's user hash: a fixed one, not this machine's (whose
    # absence would cost an `import sky` to compute).
    os.environ.setdefault("SKYPILOT_USER_ID", "rlaunch-bench")

    (ROOT / "build" / "bench").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="inputs-", dir=ROOT / "build" / "bench") as tmp:
        work = Path(tmp)
        bench = Bench(work)
        try:
            bench.render()
            builder = bench.start_build(plan(bench))
            from fakehub import gsm8k_repo
            from rlaunch.config import pins

            size = make_model(work / "hub", mib)
            pin = pins.load_versions()["datasets"]["gsm8k"]
            gsm8k_repo(work / "hub", pin["hf_id"], pin["revision"])
            log(PROG, f"model of {size / 1e9:.2f} GB on the fake hub; strace: {shutil.which('strace') or 'none'}")
            bench.up(work / "hub")
            bench.finish_build(builder)
            cases = measure(bench)
        finally:
            bench.close()
    prepared = [cases[c]["new"] for c in ("second", "recovery")]
    met = all(d["gpu_s"] <= GOAL_S and d["gpu_bytes"] in (0, None) for d in prepared)
    bytes_by = "strace: read calls on the model's files, every process of both GPU nodes' setup"
    result = {"model_bytes": size, "bytes_by": bytes_by if shutil.which("strace") else "none", "met": met,
              "goal": f"new design, prepared run: gpu_s <= {GOAL_S}, gpu_bytes == 0",
              "nodes": "SkyPilot's rendered setup (GPU task, 2 namespace nodes) and CPU step run (1 namespace "
                       "node), scripts built by SkyPilot's builders",
              "loadavg": loadavg(), "cases": cases}
    out = Path(os.environ.get("RLAUNCH_BENCH_OUT") or ROOT / "build" / "bench" / "inputs.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for case, d in cases.items():
        today, new = d["today"], d["new"]
        print(f"inputs bench: {case:<8} GPU side today {today['gpu_s']:.2f} s / {today['gpu_bytes']} B, "
              f"new {new['gpu_s']:.2f} s / {new['gpu_bytes']} B (CPU side {new['cpu_s']:.2f} s): "
              f"{ratio(today['gpu_s'], new['gpu_s'])} the seconds, "
              f"{ratio(today['gpu_bytes'], new['gpu_bytes'])} the bytes")
    print(f"inputs bench: goal {'met' if met else 'MISSED'} ({result['goal']}) -> {out}")
    if smoke and check(out, SCHEMA, PROG):
        return 1
    return 1 if not met and os.environ.get("RLAUNCH_BENCH_STRICT") == "1" else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        die(PROG, "interrupted: its namespaces and processes are gone", 130)

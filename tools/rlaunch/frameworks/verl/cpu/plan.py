"""What `make plan REHEARSE=1` says about a verl rehearsal: every rewrite with why, what is not rehearsed,
and the reward check (rlaunch.frameworks.verl.cpu.reward_probe), run in the rehearsal's own venv
seconds before any cluster is formed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rlaunch import ROOT
from rlaunch.config.rehearse import Rewrite
from rlaunch.errors import CheckError, MissingPrerequisite
from rlaunch.validate import early
from rlaunch.config import code, topology
from rlaunch.validate import loaders
from rlaunch.frameworks.verl.cpu import rewrites as cpu
from rlaunch.config.datarows import cache_dir  # a probe's passing answers are kept there too

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

# What a CPU rehearsal of verl cannot show (README, docs/VERL-ON-CPU.md).
NOT_REHEARSED = ("GPU kernels, GPU memory (OOM), FSDP1, flash-attn and padding removal, vLLM's sleep mode "
                 "and CUDA-IPC weight sync, bf16 numerics, throughput, the model's own tokenizer")
VENV = "verlcpu"  # .venv-verlcpu (scripts/setup-verlcpu, configs/locks/verlcpu.txt)
# What runs in verl's and vLLM's processes through their extension points (no installed file edited).
HOOKS = ("verl_hooks (VERL_USE_EXTERNAL_MODULES): a 'cpu' platform, device and engine for verl, gloo, "
         "Tensor.pin_memory as a no-op without an accelerator, VLLM_CPU_KVCACHE_SPACE=1 (GiB)",
         "vllm_hooks (vLLM's general plugin): the oneDNN linear off, so the rollout takes weight updates")
PROBE_TIMEOUT_S = 300  # importing verl takes ~10 s on 2 idle cores, minutes on a loaded machine


def rewrites(spec: Spec, overrides: list[str]) -> list[Rewrite]:
    """The config's rewrites (spec.derived.rehearsal), then verl's own on the launch's overrides."""
    return [Rewrite(**r) for r in spec.derived.rehearsal] + cpu.apply(spec, overrides)[1]


def lines(spec: Spec, overrides: list[str]) -> list[str]:
    """The plan's rehearsal section: each rewrite, the env and Python it runs with, what it cannot show."""
    out = [r.line() for r in rewrites(spec, overrides)]
    out += [f"env {k}={v}" for k, v in cpu.ENV.items()]
    out += [f"hooks: {line}" for line in HOOKS]
    out.append(f"python: {venv_python().parent.parent.name} (make setup-verlcpu), on every node and "
               "for the entrypoint")
    out.append(f"not rehearsed: {NOT_REHEARSED}")
    return out


def venv_python() -> Path:
    return loaders.venv_python(VENV)


def venv_stamp() -> str:
    """The rehearsal venv's identity: its lock's digest and python (scripts/setup-verlcpu's stamp); ""
    without one."""
    return loaders.venv_stamp(VENV, f".rlaunch-{VENV}")


def probe_key(argv: list[str], spec: Spec, files: list[Path], stamp: str | None = None) -> str:
    """A probe's answer's inputs: its arguments, CODE's hash (a reward in CODE may import its neighbours),
    the venv's stamp (this one's, or another framework's venv's: its framework at another pin reads and
    scores otherwise) and each file's path and bytes; "" without a stamp: then nothing is read or kept."""
    stamp = venv_stamp() if stamp is None else stamp
    if not stamp:
        return ""
    digest = hashlib.sha256(json.dumps([argv[1:], spec.pins.code.get("hash", ""), stamp]).encode())
    for path in files:
        digest.update(str(path).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"-")
    return digest.hexdigest()[:32]


def kept(key: str) -> dict[str, Any] | None:
    """The passing answer kept under key; None when there is none (or no key)."""
    try:
        found: dict[str, Any] = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if key else None


def keep(key: str, result: dict[str, Any]) -> None:
    """Keep a passing answer; atomic, so a concurrent plan reads all of it or nothing."""
    if not key or not result.get("ok"):
        return
    cached = cache_dir() / f"{key}.json"
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(result), encoding="utf-8")
        tmp.replace(cached)
    except OSError:
        pass  # a read-only build/: probed again next time


def require_venv() -> None:
    if not venv_python().exists():
        raise MissingPrerequisite(f"the rehearsal's environment {venv_python().parent.parent.name}",
                                  "make setup-verlcpu (verl, vLLM-CPU and torch for CPU: 3.7 GB, about a minute)")


KWARGS = "reward.custom_reward_function.reward_kwargs."


def reward_function(spec: Spec) -> tuple[str, str, dict[str, Any]]:
    """(path, name, reward_kwargs) of the custom reward function verl's main_ppo will load; path ""
    for its default."""
    eff = topology.parse_overrides(spec.framework.overrides)
    path = eff.get("reward.custom_reward_function.path", "")
    name = eff.get("reward.custom_reward_function.name", "compute_score")
    kwargs = {k[len(KWARGS):]: yaml.safe_load(v) for k, v in eff.items() if k.startswith(KWARGS)}
    path = "" if path in ("", "null", "None") else path.strip("'\"")
    packed = code.of(spec) if path and not path.startswith(("/", "~")) else None
    if packed is not None:  # relative to CODE: the nodes get it staged; the check reads it where it is
        path = str(packed.root / path)
    return path, name.strip("'\""), kwargs


def run_probe(argv: list[str], what: str) -> dict[str, Any]:
    """One probe in the rehearsal's venv, offline: the JSON object it prints last."""
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
           "VERL_LOGGING_LEVEL": "ERROR"}
    try:
        done = early.run(argv, timeout=PROBE_TIMEOUT_S, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise CheckError(what, f"the {what} check did not answer in {PROBE_TIMEOUT_S} s "
                         f"({' '.join(argv[2:])})") from None
    last = (done.stdout.strip().splitlines() or [""])[-1]
    try:
        result: dict[str, Any] = json.loads(last)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckError(what, f"the {what} check exited {done.returncode}: {tail}") from None
    return result


def check(spec: Spec) -> list[str]:
    """The reward check's line for the plan; CheckError (exit 2, nothing launched) when it fails."""
    require_venv()
    path, name, kwargs = reward_function(spec)
    argv = [str(venv_python()), "-m", "rlaunch.frameworks.verl.cpu.reward_probe",
            f"--dataset={spec.data.dataset}", f"--data-source={spec.pins.dataset['hf_id']}"]
    if path:
        argv += [f"--path={path}", f"--name={name}", f"--kwargs={json.dumps(kwargs)}"]
    # The probe's answer depends on rlaunch's own row making too (rehearsal.tiny, job.data, prepare):
    # every rlaunch source is in the key, so an edit anywhere probes again.
    key = probe_key(argv, spec, [Path(path)] * bool(path) + sorted((ROOT / "tools" / "rlaunch").rglob("*.py")))
    result = kept(key) or run_probe(argv, "reward")
    if not result["ok"]:
        raise CheckError("reward", f"{result['function']} {result['error']}")
    keep(key, result)
    scores = result["scores"]
    return [f"reward: {result['function']} answered {len(scores)} calls on the rehearsal's rows "
            f"(mean {sum(scores) / len(scores):.2f}: right answers {scores[0::2]}, wrong {scores[1::2]})"]

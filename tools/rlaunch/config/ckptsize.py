"""How much shared storage a run's checkpoints take: one checkpoint's size from the model's facts and
what its framework saves (frameworks/<name>/__init__.py `saves`), times the checkpoints it keeps.

  one checkpoint  trained parameters x (weights_bytes + optimizer_states x optimizer_bytes), summed
                  over the ranks (each rank writes its shard); PPO's critic, a network of the same
                  size, once more where the framework saves it
  kept            the framework's keep (or the override that sets it), else every save the run makes:
                  train.steps / train.save_freq, and the one at the end; a run of epochs without
                  train.steps: at least the one at the end (the plan says so)
  need            kept x one checkpoint + once_bytes x parameters (an export written once: TRL's
                  final weights, AReaL's recover checkpoint)

Read by preflight's storage-space check (the run refused before its first step when the storage
cannot hold them), AIStudio's setup.sh (the same need, checked where the storage is mounted) and
the stall watch (a save's write time at WRITE_BYTES_PER_S per node is part of its timeout around a
save). Facts come from the model the run loads (rlaunch.config.modelfacts), without the network
when `offline` (on the cluster: the model's directory on the shared storage, or its pin).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlaunch.config import cmdfacts, modelfacts, topology
from rlaunch.registry import frameworks

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

GB = 10**9
# The slowest shared storage a save should still be allowed to take its time on: 100 MB/s per node
# writing its shards (a FUSE-mounted bucket, a busy NFS server; local NVMe and Lustre are 10-50x).
WRITE_BYTES_PER_S = 100e6


@dataclass(frozen=True)
class Estimate:
    params: int           # trained parameters (the actor's)
    per_checkpoint: int   # bytes of one checkpoint, every rank's shard together
    kept: int             # checkpoints on the storage at once, at most
    kept_how: str
    once: int             # bytes written once besides them
    how: str              # what one holds
    facts: str            # where the parameter count came from

    @property
    def need(self) -> int:
        return self.kept * self.per_checkpoint + self.once

    def line(self) -> str:
        once = f" + {gb(self.once)} once" if self.once else ""
        return (f"checkpoints: {gb(self.per_checkpoint)} each ({self.params / 1e9:.2f} B params; {self.how}) x "
                f"{self.kept} kept ({self.kept_how}){once} = {gb(self.need)} on the shared storage")

    def write_s(self, nodes: int) -> float:
        """Seconds one save may take at WRITE_BYTES_PER_S on each of `nodes` nodes."""
        return self.per_checkpoint / (max(nodes, 1) * WRITE_BYTES_PER_S)


def gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB" if nbytes >= GB / 10 else f"{nbytes / 2**20:.1f} MiB"


def schedule(spec: Spec) -> tuple[int, int, tuple[str, str], bool]:
    """(steps, save_freq, the keys that say them, whether they are CMD's config's) of the run: rlaunch's train.*, or with CMD= of AReaL
    or RLinf the user's config's own keys (the adapter's OWNED map names them: AReaL total_train_steps
    and saver.freq_steps, RLinf runner.max_steps and runner.save_interval; unset or < 1: 0 steps, no
    step interval)."""
    train = spec.train
    if not (spec.code.command and spec.framework.name in cmdfacts.MODEL_KEYS):
        return train.steps, train.save_freq, ("train.steps", "train.save_freq"), False
    given = cmdfacts.values(spec)
    theirs = {o.key: k for k, o in frameworks.get(spec.framework.name).owned.items()}
    keys = (theirs["train.steps"], theirs["train.save_freq"])
    steps, freq = (int(raw) if raw.lstrip("-").isdigit() and int(raw) > 0 else 0
                   for raw in (given.get(key, "") for key in keys))
    return steps, freq or -1, keys, True


def kept(spec: Spec, keep: int, keep_key: str) -> tuple[int, str]:
    """How many checkpoints the run has on its storage at once, and why."""
    if keep_key:
        value = topology.parse_overrides(spec.framework.overrides).get(keep_key)
        if value not in (None, "", "null", "None") and str(value).lstrip("-").isdigit() and int(value) > 0:
            keep = int(value)
            keep_key = f"{keep_key}={keep}"
    steps, freq, (steps_key, freq_key), own = schedule(spec)
    saves = 1
    if steps > 0 and freq > 0:
        saves = steps // freq + (1 if steps % freq else 0)  # every save_freq steps, and the last step's
        made = f"{steps} steps / save_freq {freq}" + (f" (CMD's config: {steps_key}, {freq_key})" if own else "")
    elif freq > 0:
        made = (f"at least 1: a run of epochs, save_freq {freq} "
                f"({f'{steps_key}=N in CMD' if own else f'SET {steps_key}=N'} counts them)")
    elif own:
        made = f"at least 1: CMD's config gives no {freq_key} (saves by epoch or time are not counted)"
    else:
        made = "save_freq -1: only at the end"
    if keep and keep < saves:
        return keep, f"the framework keeps {keep}" + (f" ({keep_key})" if "=" in keep_key else "")
    return saves, made


def estimate(spec: Spec, params: int, facts: str) -> Estimate | None:
    """The run's checkpoints for a model of `params` parameters; None: its framework declares no saves."""
    saves = frameworks.descriptor(spec.framework.name).saves
    if saves is None:
        return None
    eff = topology.parse_overrides(spec.framework.overrides)
    weights = saves.weights_bytes
    if saves.weights_key and str(eff.get(saves.weights_key, "")).lower() in ("bf16", "bfloat16", "fp16", "float16"):
        weights = 2
    per_param = weights + saves.optimizer_states * saves.optimizer_bytes
    networks = 2 if saves.critic and spec.algo.adv_estimator == "gae" else 1
    count, why = kept(spec, saves.keep, saves.keep_key)
    how = saves.how + (", and the critic's" if networks == 2 else "") + f": {per_param} B/param"
    return Estimate(params, params * per_param * networks, count, why, params * saves.once_bytes, how, facts)


def of(spec: Spec, offline: bool = False) -> Estimate | str:
    """The run's estimate, or why there is none. offline: from what this machine holds (the model's
    own directory, paths.model, on the cluster; its pin; the facts cache), never a hub."""
    if frameworks.descriptor(spec.framework.name).saves is None:
        return f"{spec.framework.name} declares no checkpoint contents"
    facts: modelfacts.Facts | str = "not read"
    model_dir = spec.paths.model or ""
    try:
        if offline and model_dir.startswith("/"):
            facts = modelfacts.local(model_dir.rstrip("/"))
        if isinstance(facts, str):
            facts = modelfacts.local(*modelfacts.which(spec)) if offline else modelfacts.of(spec)
    except ImportError as err:  # a job step whose image lacks what reading the pins needs (yaml)
        return f"the model's facts are not readable here ({err})"
    if isinstance(facts, str):
        return f"the model's facts are not known ({facts})"
    found = estimate(spec, facts.params, facts.source)
    return found if found is not None else "no estimate"


def shortfall(est: Estimate, free: int, held: int, where: str) -> str:
    """'' when `free` bytes (plus `held`, this run's checkpoints already there) hold them; else the
    refusal: the sizes and the fixes."""
    if free + held >= est.need:
        return ""
    have = f"{gb(free)} free" + (f" (+ {gb(held)} of this run's checkpoints already there)" if held else "")
    fixes = ["a larger volume (storage.mount / WORK_ROOT on one with room)"]
    if est.kept > 1:
        fixes.insert(0, "fewer checkpoints: a larger train.save_freq (each save is "
                        f"{gb(est.per_checkpoint)}) or the framework's keep limit")
    return (f"{where} has {have}; the run's checkpoints need {gb(est.need)}: {est.line()}; "
            f"to fit: {'; or '.join(fixes)}")


def plan_line(spec: Spec) -> str:
    """The plan's line: the estimate (preflight refuses a storage that cannot hold it), or why none."""
    found = of(spec)
    if isinstance(found, str):
        return f"checkpoints: not estimated, so preflight does not check their space ({found})"
    return f"{found.line()}; preflight refuses a storage with less free"

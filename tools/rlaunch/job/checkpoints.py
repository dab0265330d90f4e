"""A run's checkpoints on the shared storage: the latest complete one, per framework, and the last
step the run logged. What a restarted run resumes from, and how many steps it lost.

Each framework resumes by itself (verl `trainer.resume_mode=auto`, AReaL `recover.mode=auto`, RLinf
`runner.resume_dir=auto`, the rehearsal from `checkpoint/checkpoint-N`); this module reads the same
files to say what that will be, with postflight's own completeness checks:
  trl    <run_dir>/checkpoint/checkpoint-N: trainer_state.json, model.safetensors (whole), optimizer
         and scheduler, one rng_state per rank (HF Trainer's layout)
  verl   <ckpt_dir>/latest_checkpointed_iteration.txt -> global_step_N (verl writes the tracker last)
  areal  {fileroot}/checkpoints/<user>/<experiment>/<trial>/recover_info/step_info.json (0-based)
  rlinf  the highest <ckpt_dir>/global_step_N with a whole DCP checkpoint and data/data.pt
RLinf's `auto` takes the highest global_step_N whatever its state, so `quarantine` renames the newer,
incomplete ones (incomplete.global_step_N) before a restart: the run resumes from the last whole one.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.job import layouts
from rlaunch.job.files import safetensors_problem

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

TRL_DIR = "checkpoint"  # HF Trainer's output_dir in the run directory (final/ is beside the steps)
TRL_STEP = re.compile(r"checkpoint-(\d+)")
RLINF_STEP = re.compile(r"global_step_(\d+)")
VERL_LATEST = "latest_checkpointed_iteration.txt"  # verl's tracker of its last whole global_step_N
QUARANTINE = "incomplete."  # prefix: no framework's resume scan picks these up again


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def trl_problems(path: Path, world: int) -> list[str]:
    """What an HF Trainer checkpoint directory lacks to be resumed from (empty: complete)."""
    path = Path(path)
    problems = []
    state = _json(path / "trainer_state.json")
    match = TRL_STEP.fullmatch(path.name)
    if state is None:
        problems.append("trainer_state.json missing or not JSON")
    elif match and state.get("global_step") != int(match.group(1)):
        problems.append(f"trainer_state.json says step {state.get('global_step')}")
    weights = path / "model.safetensors"
    problem = safetensors_problem(weights) if weights.is_file() else "model.safetensors missing"
    if problem:
        problems.append(problem)
    for name in ("config.json", "optimizer.pt", "scheduler.pt"):
        if not _nonempty(path / name):
            problems.append(f"{name} missing or empty")
    rng = ["rng_state.pth"] if world <= 1 else [f"rng_state_{r}.pth" for r in range(world)]
    problems += [f"{name} missing or empty" for name in rng if not _nonempty(path / name)]
    return problems


def _trl(spec: Spec, run_dir: Path) -> tuple[Checkpoint | None, list[str]]:
    return trl_latest(run_dir, spec.cluster.nodes)


def trl_latest(run_dir: Path, world: int) -> tuple[Checkpoint | None, list[str]]:
    """The newest complete TRL checkpoint-N of a run of `world` ranks, and why newer ones were skipped."""
    found = sorted(((int(m.group(1)), p) for p in (run_dir / TRL_DIR).glob("checkpoint-*")
                    if (m := TRL_STEP.fullmatch(p.name)) and p.is_dir()), reverse=True)
    skipped: list[str] = []
    for step, path in found:
        problems = trl_problems(path, world)
        if not problems:
            return Checkpoint(step, str(path)), skipped
        skipped.append(f"{path}: {'; '.join(problems)}")
    return None, skipped


def _verl(spec: Spec, run_dir: Path) -> tuple[Checkpoint | None, list[str]]:
    ckpt_dir = Path(layouts.defaults(spec, run_dir)["ckpt_dir"])
    tracker = ckpt_dir / VERL_LATEST
    text = tracker.read_text().strip() if tracker.is_file() else ""
    if not text.isdigit():
        return None, [f"{tracker}: {'not a step number' if text else 'absent'}"]
    step_dir = ckpt_dir / f"global_step_{int(text)}"
    return Checkpoint(int(text), str(step_dir)), []


def _areal(spec: Spec, run_dir: Path) -> tuple[Checkpoint | None, list[str]]:
    run = spec.run
    found = sorted(Path(run_dir).glob(f"checkpoints/*/{run.name}/{run.id}/recover_info/step_info.json"))
    for info in reversed(found):
        step = (_json(info) or {}).get("global_step")
        if isinstance(step, int) and step >= 0:
            # AReaL counts steps from 0 and resumes at the next one: step_info's N is step N+1 done.
            return Checkpoint(step + 1, str(info.parent)), []
    return None, [] if not found else [f"{found[-1]}: no global_step >= 0"]


def _rlinf_dirs(spec: Spec, run_dir: Path) -> list[tuple[int, Path]]:
    ckpt_dir = Path(layouts.defaults(spec, run_dir)["ckpt_dir"])
    return sorted(((int(m.group(1)), p) for p in ckpt_dir.glob("global_step_*")
                   if (m := RLINF_STEP.fullmatch(p.name)) and p.is_dir()), reverse=True)


def rlinf_problems(step_dir: Path) -> list[str]:
    dcp = Path(step_dir) / "actor" / "dcp_checkpoint"
    problems = []
    if not _nonempty(dcp / ".metadata"):
        problems.append("actor/dcp_checkpoint/.metadata missing or empty")
    if not any(_nonempty(p) for p in dcp.glob("*.distcp")):
        problems.append("no actor/dcp_checkpoint/*.distcp shard")
    if not _nonempty(Path(step_dir) / "data" / "data.pt"):
        problems.append("data/data.pt missing or empty")
    return problems


def _rlinf(spec: Spec, run_dir: Path) -> tuple[Checkpoint | None, list[str]]:
    skipped: list[str] = []
    for step, path in _rlinf_dirs(spec, run_dir):
        problems = rlinf_problems(path)
        if not problems:
            return Checkpoint(step, str(path)), skipped
        skipped.append(f"{path}: {'; '.join(problems)}")
    return None, skipped


FINDERS = {"trl": _trl, "verl": _verl, "areal": _areal, "rlinf": _rlinf}


def latest(spec: Spec, run_dir: Path) -> tuple[Checkpoint | None, list[str]]:
    """The checkpoint a restart of this run resumes from (None: it starts at step 0), and the newer
    checkpoint directories passed over, each with why."""
    return FINDERS[spec.framework.name](spec, Path(run_dir))


def quarantine(spec: Spec, run_dir: Path) -> list[str]:
    """Rename RLinf checkpoints newer than the latest complete one, which its `resume_dir=auto`
    would otherwise pick; returns what was renamed. The other frameworks skip incomplete ones
    themselves (verl's tracker, AReaL's recover info, the rehearsal's own check)."""
    if spec.framework.name != "rlinf":
        return []
    good, _ = _rlinf(spec, Path(run_dir))
    moved = []
    for step, path in _rlinf_dirs(spec, Path(run_dir)):
        if good is not None and step <= good.step:
            break
        target = path.with_name(QUARANTINE + path.name)
        path.rename(target)
        moved.append(f"{path} -> {target.name}")
    return moved


def last_logged_step(spec: Spec, run_dir: Path) -> int | None:
    """The last step the run's metrics record (trl, verl) or its log says was done (AReaL, 1-based);
    None where it is not cheap to tell (RLinf keeps step metrics in TensorBoard only)."""
    name, run_dir = spec.framework.name, Path(run_dir)
    if name in ("trl", "verl"):
        path = Path(layouts.defaults(spec, run_dir)["metrics"])
        steps = []
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    step = json.loads(line).get("step")
                except (ValueError, AttributeError):
                    continue
                if isinstance(step, int):
                    steps.append(step)
        return max(steps, default=None)
    if name == "areal":
        run = spec.run
        steps = [int(m) for log in Path(run_dir).glob(f"logs/*/{run.name}/{run.id}/main.log")
                 for m in re.findall(r"Train step (\d+)/\d+ done", log.read_text(errors="replace"))]
        return max(steps, default=None)
    return None

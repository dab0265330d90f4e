"""`make runs`: every rlaunch run the reachable infrastructures know, one line each.

Each infrastructure is asked once (its backend's `runs`): the local host (network namespaces and the
clusters' host dirs), SkyPilot's API server (clusters and managed jobs on every cloud it reaches),
the current kube context (RayJobs by rlaunch's label), and AIStudio's shared storage (WORK_ROOT).
One that cannot be asked is named on the closing line; it is not an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from rlaunch.backends.base import Place, Run
from rlaunch.errors import MissingPrerequisite
from rlaunch.registry import backends


@dataclass
class Collected:
    runs: list[Run] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)        # "family (what was asked)"
    unreachable: list[str] = field(default_factory=list)  # "family (what is missing)"
    notes: list[str] = field(default_factory=list)


def family(infra: str) -> str:
    """The backend package that launches INFRA=infra: each is asked once."""
    return backends.infra(infra).backend


def collect(infra: str, place_for: Callable[[str], Place]) -> Collected:
    """Ask each infrastructure (or only INFRA's) once; place_for(infra) says where it is."""
    out = Collected()
    # Each family asked as its first INFRA= value, whose config says where to ask.
    families = backends.families()
    for name in [family(infra)] if infra else list(families):
        asked_as = infra or families[name]
        backend = backends.get(asked_as)
        try:
            answer = backend.runs(place_for(asked_as))
        except MissingPrerequisite as err:
            out.unreachable.append(f"{name} (missing {err.what})")
            continue
        runs = list(answer.runs)
        if infra and infra != "sky" and name == "skypilot":
            runs = [r for r in runs if r.infra == infra]  # INFRA=gcp: SkyPilot's runs on GCP
        out.runs += runs
        out.asked.append(f"{name} ({answer.asked})")
        if answer.note:
            out.notes.append(answer.note)
    return out


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def report(found: Collected, now: float | None = None) -> str:
    now = time.time() if now is None else now
    rows = [("RUN ID", "INFRA", "STATE", "NODES", "AGE", "WHERE")]
    for run in sorted(found.runs, key=lambda r: (-(r.created or 0), r.infra, r.run_id)):
        rows.append((run.run_id, run.infra, run.state, run.shape(),
                     age(now - run.created if run.created else None), run.where))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    if len(rows) == 1:
        lines = ["no rlaunch runs"]
    lines += found.notes
    if found.asked:
        lines.append("asked: " + "; ".join(found.asked))
    if found.unreachable:
        lines.append("not reachable: " + "; ".join(found.unreachable))
    return "\n".join(lines)

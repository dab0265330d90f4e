"""framework.overrides against rlaunch's own keys (issue 29): an override that sets what rlaunch owns
or checks is mapped onto rlaunch's key, so every check (batch arithmetic, topology, the memory bound,
spot checkpoints) sees the value that runs, or refused naming the key to use. Each framework's table
is its adapter's `owned` (frameworks/<name>/adapter.py); config.load applies it before validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import yaml

from rlaunch.config import dotted
from rlaunch.errors import ConfigError


@dataclass(frozen=True)
class Owned:
    key: str                                  # rlaunch's key
    refuse: str = ""                          # why the override is refused ("": mapped onto key)
    convert: Callable[[Any], Any] | None = None  # the override's value -> rlaunch's (None: as is)
    keep: bool = False                        # the override still reaches the framework (it says more)
    fixed: str = ""                           # the one value rlaunch renders: an equal override is
                                              # accepted (dropped: rendered once), any other refused
    problem: Callable[[Any], str] | None = None  # why a value is refused though rlaunch's key would
                                                 # take it (its framework's rule; "": not refused)
    passes: Callable[[Any, dict[str, Any]], bool] | None = None  # (value, config): a value only the
    # framework's entry reads (the override reaches it as given, rlaunch's key keeps its own)
    own: bool = False                         # rlaunch's own (run directory, resume): in CMD, the user's
                                              # script says it for its own machine; rlaunch's replaces it


def value(raw: str) -> Any:
    """A Hydra/OmegaConf command-line value as YAML reads it (True, 8, [a, b], 1e-6 as a number)."""
    try:
        out = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return raw
    if isinstance(out, str):
        try:
            return float(out) if any(c in out.lower() for c in ".e") else out
        except ValueError:
            return out
    return out


def absorb(cfg: dict[str, Any], sources: dict[str, str], table: dict[str, Owned], explicit: set[str],
           from_cmd: frozenset[str] = frozenset()) -> None:
    """Map or refuse each override of `cfg` that `table` names, in place. `explicit`: the sources
    that are the user's own word on a key (knobs, SET): an override saying otherwise is refused.
    `from_cmd`: the overrides CMD gave, where an `own` key is rlaunch's (the plan says so: replaced)."""
    if not isinstance(cfg.get("framework", {}).get("overrides"), list):
        return  # not a list: validation says so
    kept, where = [], sources.get("framework.overrides", "")
    for item in cfg["framework"]["overrides"]:
        key, _, raw = str(item).partition("=")
        name = key.lstrip("+~")
        owned = table.get(name)
        if owned is None:
            kept.append(item)
            continue
        label = f"framework.overrides[{name}]"
        if owned.own and item in from_cmd:
            continue  # rendered as rlaunch's (the adapter's plan line names what CMD said)
        if owned.fixed:
            if not key.startswith("~") and str(value(raw)) == owned.fixed:
                continue  # what rlaunch renders anyway
            raise ConfigError(label, raw, f"rlaunch's own, always {owned.fixed} ({owned.refuse}): remove this "
                              f"override (rlaunch renders {name}={owned.fixed})", where)
        if owned.refuse:
            raise ConfigError(label, raw, f"rlaunch's own: set {owned.key} instead ({owned.refuse})", where)
        if "${" in raw:
            raise ConfigError(label, raw, f"a value, not an interpolation: rlaunch checks it as {owned.key}", where)
        if owned.passes is not None and owned.passes(value(raw), cfg):
            kept.append(item)
            continue
        problem = owned.problem(value(raw)) if owned.problem else ""
        if problem:
            raise ConfigError(label, raw, problem, where)
        new = owned.convert(value(raw)) if owned.convert else value(raw)
        old, source = dotted.get(cfg, owned.key, None), sources.get(owned.key, "")
        if source in explicit and old != new:
            raise ConfigError(label, raw, f"{owned.key}={old!r} (from {source}) says otherwise: set one of "
                              f"them (rlaunch's key is {owned.key})", where)
        dotted.put(cfg, owned.key, new)
        sources[owned.key] = label
        if owned.keep:
            kept.append(item)
    cfg["framework"]["overrides"] = kept

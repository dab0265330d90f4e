"""`make plan DATA=...` for verl: the user's rows checked here, before any GPU (issue 44).

Finds the rows where this machine can read them (a DATA= of this machine, a shared path this machine
sees, or a hub dataset's train/test files, fetched into build/datacheck/), then runs
rlaunch.frameworks.verl.cpu.data_probe in the rehearsal's venv (verl at its pin) once: columns, every
data_source's reward on every row in a process pool, prompt lengths with the model's tokenizer. Its
lines go into the plan's checks; a failed check is one ConfigError on data.source (exit 2, nothing
written). What cannot be checked here is a WARNING line naming it, never a refusal.

A passing result is kept under build/datacheck/<key>.json (RLAUNCH_DATACHECK_CACHE: elsewhere), the key a sha256 over the rows' files,
the reward's file, name and kwargs, CODE's hash, the tokenizer's files, the limits, the probe's own source
and the venv's stamp (.venv-verlcpu/.rlaunch-verlcpu: its lock's digest): the same rows, reward and model
are not probed twice, and nothing is trusted across a rebuilt venv.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch.config import hub, topology
from rlaunch.config.datarows import base_here, rows_here
from rlaunch.errors import ConfigError
from rlaunch.frameworks.verl.cpu import plan as cpu_plan

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

PROBE = Path(__file__).with_name("data_probe.py")
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                   "chat_template.jinja")
ROW_LIMIT = 2000


def lines(spec: Spec, overrides: list[str]) -> list[str]:
    """The plan's data check lines ([] without data.source); ConfigError when a check fails."""
    source = spec.pins.source
    if not source:
        return []
    found = rows_here(spec)
    if isinstance(found, str):
        return [f"WARNING data: rows not checked here: {found}"]
    if not cpu_plan.venv_python().exists():
        return [f"WARNING data: rows not checked: {cpu_plan.venv_python().parent.parent.name} is missing "
                "(make setup-verlcpu: verl at its pin reads and scores them)"]
    train, test = found
    path, name, kwargs = cpu_plan.reward_function(spec)
    eff = topology.parse_overrides(overrides)
    tokenizer = tokenizer_dir(spec)
    argv = [str(cpu_plan.venv_python()), "-m", "rlaunch.frameworks.verl.cpu.data_probe",
            f"--train={','.join(map(str, train))}", f"--test={','.join(map(str, test))}",
            f"--batch={spec.train.batch_size}", f"--max-prompt={spec.data.max_prompt_length}",
            f"--truncation={eff.get('data.truncation', 'error')}",
            f"--filter={int(eff.get('data.filter_overlong_prompts', 'True').lower() in ('true', '1'))}",
            f"--limit={ROW_LIMIT}"]
    if path:
        argv += [f"--path={path}", f"--name={name}", f"--kwargs={json.dumps(kwargs)}"]
        if not Path(path).is_file():
            argv.append("--no-reward")
    if tokenizer:
        argv.append(f"--tokenizer={tokenizer}")
    extra = [Path(path)] if path and Path(path).is_file() else []
    extra += [Path(tokenizer, n) for n in TOKENIZER_FILES if tokenizer and Path(tokenizer, n).is_file()]
    key = cpu_plan.probe_key(argv, spec, [PROBE, *train, *test, *extra])
    hit = cpu_plan.kept(key)
    result = hit or cpu_plan.run_probe(argv, "data")
    if not result["ok"]:
        if spec.data.prepare:  # the rows are the conversion's: it is what to fix
            raise ConfigError("data.prepare", spec.data.prepare, f"a conversion whose output verl reads (checked "
                              f"in {source['prepare_checked']}): {result['error']}")
        raise ConfigError("data.source", spec.data.source, result["error"])
    cpu_plan.keep(key, result)
    note = " (cached: these rows, reward and tokenizer passed before)" if hit else ""
    out = [f"data: {line}" for line in result["lines"]]
    if out and note:
        out[0] += note
    return out + [f"WARNING data: {w}" for w in result["warnings"]]


def base_or_lines(spec: Spec) -> Path | list[str]:
    """base_here for another framework's check: the directory, or its plan lines when there is none ([]
    without data.source, a WARNING naming why not)."""
    if not spec.pins.source:
        return []
    base = base_here(spec)
    return [f"WARNING data: rows not checked here: {base}"] if isinstance(base, str) else base


def probe_lines(spec: Spec, argv: list[str], files: list[Path], stamp: str, framework: str) -> list[str]:
    """Another framework's row probe (argv) run once per content, its answer as plan lines; ConfigError naming
    data.prepare (its output is what to fix) or data.source when a check fails."""
    key = cpu_plan.probe_key(argv, spec, files, stamp)
    hit = cpu_plan.kept(key)
    result = hit or cpu_plan.run_probe(argv, "data")
    if not result["ok"]:
        name, value = ("data.prepare", spec.data.prepare) if spec.data.prepare else ("data.source", spec.data.source)
        raise ConfigError(name, value, f"rows {framework} reads and scores: {result['error']}")
    cpu_plan.keep(key, result)
    out = [f"data: {line}" for line in result["lines"]]
    if out and hit:
        out[0] += " (cached: these rows and reward passed before)"
    return out + [f"WARNING data: {w}" for w in result["warnings"]]


def tokenizer_dir(spec: Spec) -> str:
    """The model's tokenizer on this machine: its directory (model.path, the pinned one on a local
    storage), else the Hugging Face cache's snapshot at its pinned revision; "" when neither has it.
    Nothing is downloaded for it."""
    if (Path(spec.paths.model) / "tokenizer_config.json").is_file():
        return spec.paths.model
    pin = spec.pins.model
    if not pin.get("hf_id") or hub.of(pin) != hub.DEFAULT:
        return ""
    from huggingface_hub import try_to_load_from_cache  # lazy: plan only

    found = try_to_load_from_cache(pin["hf_id"], "tokenizer_config.json", revision=pin.get("revision") or None,
                                   cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    return str(Path(found).parent) if isinstance(found, str) else ""

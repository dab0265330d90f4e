"""DATA='s rows checked the way AReaL 1.0.4 reads and scores them, at plan time (issue 44).

  rows      as areal/dataset/gsm8k.py's get_gsm8k_rl_dataset reads them (the loader AReaL picks for a path
            naming gsm8k): datasets.load_dataset(path, name="main", split=...), a `question` on every row
            (it becomes the user message), every other column kept: the rollout batch of training rows;
  reward    called as areal/workflow/rlvr.py calls it, reward_fn(prompt, completions, prompt_ids,
            completion_ids, **row) with the row's columns as keywords (its `messages` included), in a
            process pool (AsyncRewardWrapper's), with the ground truth boxed and with an empty completion:
            a finite number, each call within AReaL's 15 s (AReaL scores a slower one 0 without a word),
            on every row (up to --limit, an even sample beyond); a raise names the function, file:line
            and the row. A reward that does not import in this environment is a warning naming why.

Runs in .venv-areal (AReaL at its pin, `datasets`, math-verify), else in the launcher's venv; the reward is
imported by its dotted path (AReaL's examples/math/gsm8k_rl.py passes areal.reward.gsm8k.gsm8k_reward_fn).

Usage: python -m rlaunch.frameworks.areal.data_probe --path=DIR [--splits=train,test] [--batch=N]
           [--reward=areal.reward.gsm8k.gsm8k_reward_fn] [--limit=2000] [--call-timeout-s=15]
Prints one JSON object: {"ok": true, "lines": [...], "warnings": [...]} or {"ok": false, "error": ...}.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

from rlaunch import cmdline
from rlaunch.validate import rowpool
from rlaunch.validate.rowpool import Refused

REWARD = "areal.reward.gsm8k.gsm8k_reward_fn"  # AReaL 1.0.4 examples/math/gsm8k_rl.py
INSTRUCTION = "\nPlease put your final answer within \\boxed{}."  # areal/dataset/gsm8k.py
TIMEOUT_S = 15.0  # areal/api/reward_api.py AsyncRewardWrapper(timeout_seconds=15)


def load_split(path: str, split: str, cache: str) -> list[dict[str, Any]]:
    """One split's rows as AReaL's get_gsm8k_rl_dataset hands them to the workflow (its max_length filter
    aside); datasets' cache in `cache`, not the user's home."""
    from datasets import load_dataset

    try:
        dataset = load_dataset(path=path, name="main", split=split, cache_dir=cache)
    except Exception as err:  # noqa: BLE001 - whatever datasets says is what AReaL would stop on
        said = str(err).splitlines()[0][:200] if str(err) else ""
        raise Refused(f"AReaL's gsm8k loader cannot read split '{split}' of {path}: load_dataset(path, name='main', "
                      f"split='{split}') raised {type(err).__name__}: {said}") from None
    rows = []
    for i, row in enumerate(dataset):
        if not isinstance(row.get("question"), str):
            raise Refused(f"split '{split}' row {i} has no string 'question' (columns: {', '.join(sorted(row))}): "
                          "AReaL's gsm8k loader makes the user message of it")
        rest = {k: v for k, v in row.items() if k != "question"}
        rows.append({**rest, "messages": [{"role": "user", "content": row["question"] + INSTRUCTION}]})
    return rows


def truth(row: dict[str, Any]) -> str:
    """The answer a right completion boxes: GSM8K's number after ####, else the answer as it is."""
    answer = str(row.get("answer", ""))
    found = re.search(r"####\s*(-?[0-9.,]+)", answer)
    return found.group(1).replace(",", "") if found else answer


def where(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


def _call(fn: Callable[..., Any], limit_s: float, index: int, row: dict[str, Any]) -> tuple[float, float] | str:
    """In a pool worker: the reward as rlvr.py calls it, with the boxed truth and an empty completion."""
    prompt = row["messages"][0]["content"]
    got = []
    for completion in (f"The answer is \\boxed{{{truth(row)}}}.", ""):
        started = time.monotonic()
        try:
            value = fn(prompt, completion, [], [], **row)
        except BaseException as err:  # noqa: BLE001 - the point: the reward raised
            return f"raised {type(err).__name__}: {str(err)[:160]} at {where(err)}"
        took = time.monotonic() - started
        if took > limit_s:
            return f"took {took:.1f} s on one call: AReaL waits {limit_s:g} s, then scores it 0 without an error"
        score = rowpool.number(value)
        if score is None:
            return f"returned {value!r:.80}: AReaL needs a finite number"
        got.append(score)
    return got[0], got[1]


def rewards(dotted: str, rows: list[dict[str, Any]], limit: int, limit_s: float) -> tuple[list[str], list[str]]:
    module, _, name = dotted.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), name)
    except Exception as err:  # noqa: BLE001 - not importable here: said, not refused
        return [], [f"reward {dotted} not called on the rows: it does not import here ({type(err).__name__}: "
                    f"{str(err)[:100]})"]
    return rowpool.scored(partial(_call, fn, limit_s), rows, f"{dotted} (each call within {limit_s:g} s)", limit,
                          limit_s, "boxed answer/empty completion")


def probe(path: str, splits: list[str], batch: int = 1, reward: str = REWARD, limit: int = 2000,
          call_timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    lines: list[str] = []
    warnings: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="rlaunch-areal-rows-") as cache:
            got = {split: load_split(path, split, cache) for split in splits}
        train = got[splits[0]]
        counts = ", ".join(f"{len(rows)} {split}" for split, rows in got.items())
        lines.append(f"rows: {counts} (AReaL's gsm8k loader, config main): 'question' on every row")
        if len(train) < batch:
            raise Refused(f"{len(train)} train rows, fewer than one batch (train_dataset.batch_size={batch}): "
                          f"set train.batch_size <= {len(train)} or bring more rows")
        more_lines, more_warnings = rewards(reward, train, limit, call_timeout_s)
        lines += more_lines
        warnings += more_warnings
    except Refused as err:
        return {"ok": False, "error": str(err), "lines": lines}
    return {"ok": True, "lines": lines, "warnings": warnings}


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.areal.data_probe")
    parser.add_argument("--path", required=True, help="the dataset's directory here")
    parser.add_argument("--splits", default="train,test")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reward", default=REWARD)
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--call-timeout-s", type=float, default=TIMEOUT_S)
    args = parser.parse_args(argv)
    result = probe(args.path, [s for s in args.splits.split(",") if s], args.batch, args.reward, args.limit,
                   args.call_timeout_s)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

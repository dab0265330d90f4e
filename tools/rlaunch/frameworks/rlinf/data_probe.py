"""DATA='s rows checked the way RLinf reads and scores them, at plan time (issue 44). Runs in .venv-rlinf
(RLinf at its pin), one process for every check, as rlinf/data/datasets/reasoning/dataset.py reads them:

  files     .json or .jsonl only (RLinf logs "Unsupported ..., skip" for any other and trains without it);
            a .jsonl line that is not JSON (a blank one too) stops its loader ("Load data error");
  keys      data.prompt_key and data.answer_key on every row; the prompt a string (a list of {role,
            content} with data.apply_chat_template);
  rows      enough training rows for one rollout batch (data.rollout_batch_size);
  reward    reward.reward_type's class from RLinf's registry, built from the reward section, its
            get_reward([response], [answers]) called on every row (up to --limit, an even sample beyond)
            in a process pool, with the first answer boxed as the response and with an empty one: a
            finite number each; a raise names the class, file:line and the row. A reward whose module
            does not import here is a warning naming why.

Usage: python -m rlaunch.frameworks.rlinf.data_probe --files=F[,F] --prompt-key=K --answer-key=K
           [--chat=0] [--batch=N] [--reward-type=math] [--reward=JSON] [--limit=2000]
Prints one JSON object: {"ok": true, "lines": [...], "warnings": [...]} or {"ok": false, "error": ...}.
"""

from __future__ import annotations

import json
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.validate import rowpool
from rlaunch.validate.rowpool import Refused

SUFFIXES = (".json", ".jsonl")
CALL_TIMEOUT_S = 30.0


def where(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def read(path: Path) -> list[Any]:
    """One file's rows as RLinf's MathDataset._load_data reads it."""
    if path.suffix not in SUFFIXES:
        raise Refused(f"{path.name}: RLinf reads .json and .jsonl files only (by suffix); it skips this one "
                      "without stopping (\"Unsupported ..., skip\"), so its rows would never train")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            content = json.loads(text)
        except ValueError as err:
            raise Refused(f"{path.name}: not JSON ({err}); RLinf stops with 'Load data error'") from None
        return content if isinstance(content, list) else [content]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            rows.append(json.loads(line.strip()))
        except ValueError:
            raise Refused(f"{path.name} line {number}: not a JSON row ({line[:60]!r}); RLinf reads every line "
                          "and stops with 'Load data error'") from None
    return rows


def check_keys(name: str, rows: list[Any], prompt_key: str, answer_key: str, chat: bool) -> None:
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise Refused(f"{name} row {i} is {type(row).__name__}, not an object of keys")
        for key, what in ((prompt_key, "data.prompt_key"), (answer_key, "data.answer_key")):
            if key not in row:
                raise Refused(f"{name} row {i} has no '{key}' ({what}; its keys: {', '.join(sorted(row))}): set "
                              f"framework.overrides {what}=<its key>, or convert the rows (PREPARE=)")
        prompt, answer = row[prompt_key], row[answer_key]
        if chat and not (isinstance(prompt, list) and all(isinstance(m, dict) and "content" in m for m in prompt)):
            raise Refused(f"{name} row {i}: '{prompt_key}' is {type(prompt).__name__}, and data.apply_chat_template "
                          "needs a list of {role, content}")
        if not chat and not isinstance(prompt, str):
            raise Refused(f"{name} row {i}: '{prompt_key}' is {type(prompt).__name__}; RLinf tokenizes it as a "
                          "string (or set data.apply_chat_template=True for a list of {role, content})")


def _answers(answer: Any) -> Any:
    return [answer] if isinstance(answer, str) else answer  # as MathDataset.__getitem__ hands it on


def _call(reward: Any, index: int, answers: Any) -> tuple[float, float] | str:
    """In a pool worker: get_reward on one response at a time, the first answer boxed and an empty one."""
    got = []
    first = answers[0] if isinstance(answers, list) and answers else answers
    for response in (f"The answer is \\boxed{{{first}}}.", ""):
        try:
            value = reward.get_reward([response], [answers])
        except BaseException as err:  # noqa: BLE001 - the point: the reward raised
            return f"raised {type(err).__name__}: {str(err)[:160]} at {where(err)}"
        score = rowpool.number(value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value)
        if score is None:
            return f"returned {value!r:.80} for one response: RLinf needs one finite number per response"
        got.append(score)
    return got[0], got[1]


def rewards(reward_type: str, config: dict[str, Any], answers: list[Any], limit: int) -> tuple[list[str], list[str]]:
    try:
        from omegaconf import OmegaConf

        from rlinf.algorithms.rewards import get_rule_based_reward_class
    except Exception as err:  # noqa: BLE001 - whatever its imports raise here: said, not refused
        return [], [f"reward {reward_type} not called on the rows: RLinf's rewards do not import in this environment "
                    f"({type(err).__name__}: {str(err)[:100]})"]
    try:
        cls = get_rule_based_reward_class(reward_type)
    except AssertionError:
        raise Refused(f"reward.reward_type={reward_type} is not in RLinf's reward registry") from None
    return rowpool.scored(partial(_call, cls(OmegaConf.create(config))), answers, f"{cls.__name__} ({reward_type})",
                          limit, CALL_TIMEOUT_S, "boxed answer/empty response")


def probe(files: list[str], prompt_key: str, answer_key: str, chat: bool = False, batch: int = 1,
          reward_type: str = "math", reward: dict[str, Any] | None = None, limit: int = 2000) -> dict[str, Any]:
    lines: list[str] = []
    warnings: list[str] = []
    try:
        rows: list[Any] = []
        for f in files:
            got = read(Path(f))
            check_keys(Path(f).name, got, prompt_key, answer_key, chat)
            rows += got
        lines.append(f"rows: {len(rows)} in {', '.join(Path(f).name for f in files)}: '{prompt_key}' and "
                     f"'{answer_key}' on every row")
        if len(rows) < batch:
            raise Refused(f"{len(rows)} rows, fewer than one rollout batch (data.rollout_batch_size={batch}): "
                          f"set train.batch_size <= {len(rows)} or bring more rows")
        got_lines, got_warnings = rewards(reward_type, reward or {},
                                          [_answers(r[answer_key]) for r in rows], limit)
        lines += got_lines
        warnings += got_warnings
    except Refused as err:
        return {"ok": False, "error": str(err), "lines": lines}
    return {"ok": True, "lines": lines, "warnings": warnings}


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.rlinf.data_probe")
    parser.add_argument("--files", required=True, help="comma-separated files (train, then validation)")
    parser.add_argument("--prompt-key", default="prompt")
    parser.add_argument("--answer-key", default="solutions")
    parser.add_argument("--chat", type=int, default=0, help="data.apply_chat_template")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reward-type", default="math")
    parser.add_argument("--reward", default="{}", help="the config's reward section, as JSON")
    parser.add_argument("--limit", type=int, default=2000)
    args = parser.parse_args(argv)
    result = probe([f for f in args.files.split(",") if f], args.prompt_key, args.answer_key, bool(args.chat),
                   args.batch, args.reward_type, json.loads(args.reward), args.limit)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

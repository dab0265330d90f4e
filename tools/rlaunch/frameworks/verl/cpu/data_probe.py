"""DATA='s rows checked the way verl will read and score them, at plan time (issue 44). Runs in the
rehearsal's venv (.venv-verlcpu: verl at its pin, pyarrow, transformers), one process for every check:

  rows      the files read by suffix as verl reads them (.parquet, .json, .jsonl): rows per split, and
            enough training rows for one batch (train.batch_size);
  columns   prompt (a list of {role, content}), data_source, reward_model.ground_truth, on every row;
  sources   each distinct data_source reaches a reward: the user's (reward.custom_reward_function,
            loaded by verl's load_extern_object) or verl's default_compute_score;
  reward    called on every row (up to --limit; an even sample of that many beyond), in a process pool
            as verl's reward manager runs it (the function is pickled into it), with the ground truth
            as the answer and with an empty one: a finite number or a dict with a finite 'score',
            each call within --call-timeout-s; a raise names the function, file:line and the row; one
            that cannot be pickled is a warning (verl's reward managers call it in a thread), its calls
            made in this process;
  lengths   the prompts through the model's tokenizer's chat template against data.max_prompt_length,
            with verl's data.filter_overlong_prompts and data.truncation.

Usage: python -m rlaunch.frameworks.verl.cpu.data_probe --train=F[,F] [--test=F[,F]] --batch=N
           [--path=P --name=N --kwargs=JSON] [--tokenizer=DIR] [--max-prompt=N] [--truncation=error]
           [--filter=1] [--limit=2000]
Prints one JSON object: {"ok": true, "lines": [...], "warnings": [...]} or {"ok": false, "error": ...}.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import pickle
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.validate import rowpool

SUFFIXES = (".parquet", ".json", ".jsonl")
ANSWER = "The answer is \\boxed{{{0}}}. #### {0}"  # both verl's GSM8K and MATH extractors find it
WORKERS = 2
CHUNKS = 8
LENGTH_LIMIT = 20000  # prompts measured; an even sample of that many beyond


def where(err: BaseException, path: str) -> str:
    """file:line of the deepest frame in the user's file (else the deepest frame), and that line."""
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if path and f.filename == path] or frames
    if not mine:
        return ""
    frame = mine[-1]
    code = f": {frame.line.strip()}" if frame.line else ""
    return f"{frame.filename}:{frame.lineno} in {frame.name}{code}"


class Refused(Exception):
    """One check failed: its one line."""


# ---------------------------------------------------------------- rows


def read(path: Path) -> list[dict[str, Any]]:
    """The rows of one file, by its suffix as verl's RLHFDataset picks its reader."""
    if not path.name.endswith(SUFFIXES):
        raise Refused(f"{path.name}: verl reads {', '.join(SUFFIXES)} files only (by suffix)")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            return list(pq.read_table(path).to_pylist())
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json" and text.lstrip().startswith("["):
            return list(json.loads(text))
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except Exception as err:  # noqa: BLE001 - whatever the reader says, named with the file
        raise Refused(f"{path.name}: unreadable as {path.suffix[1:]} ({type(err).__name__}: "
                      f"{str(err).splitlines()[0][:160] if str(err) else ''})") from None


def check_columns(name: str, rows: list[dict[str, Any]]) -> None:
    """verl's columns on every row: the first that lacks one, or has it of another type, is named."""
    for i, row in enumerate(rows):
        for column in ("prompt", "data_source", "reward_model"):
            if column not in row:
                raise Refused(f"{name} has no column '{column}' (row {i}; columns: {', '.join(sorted(row))}): "
                              "verl needs prompt (a list of {role, content}), data_source and "
                              "reward_model.ground_truth")
        prompt = row["prompt"]
        if not (isinstance(prompt, list) and prompt and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in prompt)):
            raise Refused(f"{name} row {i}: prompt is {type(prompt).__name__} {str(prompt)[:60]!r}; verl "
                          "applies the chat template to a list of {role, content} messages")
        if not isinstance(row["data_source"], str):
            raise Refused(f"{name} row {i}: data_source is {type(row['data_source']).__name__}, not a string")
        reward = row["reward_model"]
        if not isinstance(reward, dict) or "ground_truth" not in reward:
            raise Refused(f"{name} row {i}: reward_model has no ground_truth ({str(reward)[:60]!r})")


# ---------------------------------------------------------------- reward


def load(path: str, name: str) -> tuple[Callable[..., Any], str]:
    """The reward verl's main_ppo calls, and how to name it."""
    if not path:
        from verl.utils.reward_score import default_compute_score

        return default_compute_score, "verl's default_compute_score"
    from verl.utils.import_utils import load_module

    module_name = f"rlaunch_reward_{abs(hash(path))}"
    try:
        # Registered by name, so a plain function pickles by reference into the pool, as verl's own.
        module = load_module(path, module_name=module_name)
        sys.modules[module_name] = module
        fn = getattr(module, name)
    except BaseException as err:  # noqa: BLE001 - whatever the user's module raises at import
        cause = err.__cause__ or err
        raise Refused(f"reward {name} ({path}): loading it raised {type(cause).__name__}: {cause} "
                      f"at {where(cause, path)}") from None
    return fn, f"{name} ({path})"


def _score(value: Any) -> float | str:
    """The number verl takes from a reward's return, or why there is none."""
    got = value.get("score") if isinstance(value, dict) else value
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"returned {value!r:.80}: verl needs a number (or a dict with a numeric 'score')"
    if not math.isfinite(got):
        return f"returned {got}: not a finite number"
    return float(got)


def _chunk(fn: Callable[..., Any], kwargs: dict[str, Any], path: str, rows: list[tuple[int, dict[str, Any]]],
           limit_s: float) -> list[tuple[int, float, float] | tuple[int, str]]:
    """In a pool worker: each row with the right and the empty answer; the first failure ends it."""
    out: list[tuple[int, float, float] | tuple[int, str]] = []
    for index, row in rows:
        truth = row["reward_model"]["ground_truth"]
        got = []
        for answer in (ANSWER.format(truth), ""):
            started = time.monotonic()
            try:
                value = fn(data_source=row["data_source"], solution_str=answer, ground_truth=truth,
                           extra_info=row.get("extra_info"), **kwargs)
            except BaseException as err:  # noqa: BLE001 - the point: the user's code raised
                if isinstance(err, NotImplementedError) and not path:
                    return [(index, f"data_source {row['data_source']!r} reaches no reward: verl's "
                             "default_compute_score raises NotImplementedError for it; set "
                             "reward.custom_reward_function.path/name (framework.overrides)")]
                return [(index, f"raised {type(err).__name__}: {str(err)[:160]} at {where(err, path)}")]
            took = time.monotonic() - started
            if took > limit_s:
                return [(index, f"took {took:.1f} s on one call (limit {limit_s:g} s)")]
            score = _score(value)
            if isinstance(score, str):
                return [(index, f"{score} (answer {answer[:40]!r})")]
            got.append(score)
        out.append((index, got[0], got[1]))
    return out


def _pooled(fn: Callable[..., Any], label: str, kwargs: dict[str, Any], path: str,
            picked: list[tuple[int, dict[str, Any]]], limit_s: float) -> list[tuple[int, float, float] | tuple[int, str]]:
    """The calls in a process pool: in parallel, each chunk within its time."""
    size = max(1, math.ceil(len(picked) / CHUNKS))
    chunks = [picked[i:i + size] for i in range(0, len(picked), size)]
    done: list[tuple[int, float, float] | tuple[int, str]] = []
    # fork: the worker has the user's module already, registered by name (load()).
    with cf.ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(_chunk, fn, kwargs, path, chunk, limit_s) for chunk in chunks]
        try:
            for future, chunk in zip(futures, chunks):
                done += future.result(timeout=limit_s * 2 * len(chunk) + 30)
        except cf.TimeoutError:
            rowpool.stop(pool)
            raise Refused(f"reward {label} did not answer rows {chunk[0][0]}-{chunk[-1][0]} in time "
                          f"({limit_s:g} s a call)") from None
        except cf.process.BrokenProcessPool as err:
            raise Refused(f"reward {label}: its pool worker died ({err})") from None
    return done


def rewards(fn: Callable[..., Any], label: str, path: str, kwargs: dict[str, Any],
            rows: list[dict[str, Any]], limit: int, limit_s: float) -> tuple[list[str], list[str]]:
    """(lines, warnings) of the reward on the rows (all up to limit; an even sample beyond)."""
    picked = list(enumerate(rows))
    if len(picked) > limit:
        step = len(picked) / limit
        picked = [picked[int(i * step)] for i in range(limit)]
    warnings = []
    try:
        pickle.dumps((fn, kwargs))
    except Exception as err:  # noqa: BLE001 - pickle raises several kinds
        # verl 0.9.1's reward managers (naive, dapo, gdpo, rate_limited, remote) call it in a thread of a
        # reward worker that loads it itself, so it runs there: a warning, and the calls made here in turn.
        # A pool that pickles it (the legacy `prime` manager, verl#3150) would fail.
        warnings.append(f"reward {label} cannot be pickled ({type(err).__name__}: {str(err)[:120]}): verl "
                        f"{version('verl')}'s reward managers call it in a thread, so it runs; a process-pool manager "
                        "(prime, verl#3150) would fail: a module-level function of plain data works with both")
        done = _chunk(fn, kwargs, path, picked, limit_s)
        where = "in this process (it cannot go to a pool)"
    else:
        done = _pooled(fn, label, kwargs, path, picked, limit_s)
        where = f"in a {WORKERS}-process pool"
    for item in done:
        if len(item) == 2:
            raise Refused(f"reward {label} on row {item[0]} {item[1]}")
    right = [float(item[1]) for item in done]
    empty = [float(item[2]) for item in done if len(item) == 3]
    sample = "" if len(rows) <= limit else f" (an even sample of {limit} of {len(rows)} rows)"
    lines = [f"reward: {label} on {len(done)} rows x 2 answers{sample} {where}: ground truth "
             f"mean {statistics.fmean(right):.3f} spread {statistics.pstdev(right):.3f}, empty answer mean "
             f"{statistics.fmean(empty):.3f}"]
    if len(set(right + empty)) == 1:
        warnings.append(f"reward {label} gives every row and answer the same score {right[0]:g}: no signal to learn "
                        "from (is it the reward you meant?)")
    return lines, warnings


# ---------------------------------------------------------------- prompt lengths


def lengths(tokenizer_dir: str, rows: list[dict[str, Any]], max_len: int, truncation: str,
            filtering: bool) -> tuple[list[str], list[str]]:
    if not tokenizer_dir:
        return [], ["prompt lengths not checked: the model's tokenizer is not on this machine (model.path, "
                    "or the Hugging Face cache at its revision); verl measures them at load"]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    if not getattr(tok, "chat_template", None):
        raise Refused(f"the tokenizer in {tokenizer_dir} has no chat template, and verl applies one to every "
                      "prompt (a list of {role, content}); use an instruct model's tokenizer or set "
                      "data.custom_chat_template")
    sample = "" if len(rows) <= LENGTH_LIMIT else f" (an even sample of {LENGTH_LIMIT} of {len(rows)} rows)"
    picked = [int(i * len(rows) / LENGTH_LIMIT) for i in range(LENGTH_LIMIT)] if sample else range(len(rows))
    # As verl's RLHFDataset measures them: the rendered text, then its tokens.
    sizes = {i: len(tok.encode(tok.apply_chat_template(rows[i]["prompt"], add_generation_prompt=True,
                                                       tokenize=False), add_special_tokens=False)) for i in picked}
    over = [i for i, n in sizes.items() if n > max_len]
    ordered = sorted(sizes.values())
    line = (f"prompt length (chat template): p50 {ordered[len(ordered) // 2]}, p99 "
            f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}, max {ordered[-1]} tokens vs "
            f"data.max_prompt_length={max_len}{sample}")
    if not over:
        return [line + ": all fit"], []
    if filtering:
        return [line + f": {len(over)} rows over it are dropped (data.filter_overlong_prompts)"], []
    if truncation == "error":
        raise Refused(f"train row {over[0]} has a {sizes[over[0]]}-token prompt over data.max_prompt_length="
                      f"{max_len} with data.truncation=error ({len(over)} rows over): raise the limit, or set "
                      "data.truncation=left/right")
    return [line + f": {len(over)} rows cut ({truncation})"], []


# ---------------------------------------------------------------- all


def probe(train: list[str], test: list[str], batch: int, path: str = "", name: str = "compute_score",
          kwargs: dict[str, Any] | None = None, tokenizer: str = "", max_prompt: int = 512,
          truncation: str = "error", filtering: bool = True, limit: int = 2000,
          call_timeout_s: float = 10.0, reward: bool = True) -> dict[str, Any]:
    path = os.path.abspath(path) if path else ""
    lines: list[str] = []
    warnings: list[str] = []
    try:
        split_rows: dict[str, list[dict[str, Any]]] = {}
        for split, files in (("train", train), ("test", test)):
            split_rows[split] = []
            for f in files:
                rows = read(Path(f))
                check_columns(Path(f).name, rows)
                split_rows[split] += rows
        rows = split_rows["train"]
        lines.append(f"rows: {len(rows)} train, {len(split_rows['test'])} test ({', '.join(Path(f).name for f in train)}"
                     "): prompt, data_source, reward_model.ground_truth on every row")
        if len(rows) < batch:
            raise Refused(f"{len(rows)} train rows, fewer than one batch (train.batch_size={batch}): verl would "
                          f"run no step; set train.batch_size <= {len(rows)} or bring more rows")
        sources = sorted({str(r["data_source"]) for r in rows})
        listed = f"{len(sources)} ({', '.join(sources[:5])}{' ...' if len(sources) > 5 else ''})"
        if reward:
            fn, label = load(path, name)
            lines.append(f"data_source: {listed} -> {label}")
            got, warned = rewards(fn, label, path, kwargs or {}, rows, limit, call_timeout_s)
            lines += got
            warnings += warned
        else:
            warnings.append(f"reward not called on the rows: its file {path} is not on this machine "
                            f"(data_source: {listed})")
        got, warned = lengths(tokenizer, rows, max_prompt, truncation, filtering)
        lines += got
        warnings += warned
    except Refused as err:
        return {"ok": False, "error": str(err), "lines": lines}
    return {"ok": True, "lines": lines, "warnings": warnings}


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.verl.cpu.data_probe")
    parser.add_argument("--train", required=True, help="comma-separated files")
    parser.add_argument("--test", default="")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--path", default="")
    parser.add_argument("--name", default="compute_score")  # verl's default name
    parser.add_argument("--kwargs", default="{}", help="reward.custom_reward_function.reward_kwargs, as JSON")
    parser.add_argument("--tokenizer", default="")
    parser.add_argument("--max-prompt", type=int, default=512)
    parser.add_argument("--truncation", default="error")
    parser.add_argument("--filter", type=int, default=1)
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--call-timeout-s", type=float, default=10.0)
    parser.add_argument("--no-reward", action="store_true", help="the reward's file is not here: skip it")
    args = parser.parse_args(argv)
    result = probe([f for f in args.train.split(",") if f], [f for f in args.test.split(",") if f], args.batch,
                   args.path, args.name, json.loads(args.kwargs), args.tokenizer, args.max_prompt,
                   args.truncation, bool(args.filter), args.limit, args.call_timeout_s, not args.no_reward)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

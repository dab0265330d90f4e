"""The rehearsal's reward check, seconds before any cluster: the reward function verl will call,
loaded as verl loads it (its own `load_extern_object` for reward.custom_reward_function, else its
`default_compute_score` for the data's data_source), called on the rehearsal's rows, each with the
right answer and with a wrong one, as verl calls it.

A function that raises, returns no number, or cannot be loaded stops the rehearsal here, naming the
function and the line of its file where it failed.

Usage: python -m rlaunch.frameworks.verl.cpu.reward_probe --dataset=math --data-source=ID [--path=P --name=N]
Prints one JSON object: {"ok": true, "function": ..., "scores": [...]} or {"ok": false, "error": ...}.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from rlaunch import cmdline
from rlaunch.frameworks.verl.cpu import prepare
from rlaunch.frameworks.verl.cpu.data_probe import where


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """As verl's reward loop calls it: keyword arguments, awaited when it is a coroutine function."""
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(fn(**kwargs))
    return fn(**kwargs)


def probe(dataset: str, data_source: str, path: str = "", name: str = "",
          reward_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    path = os.path.abspath(path) if path else ""
    if path:
        label = f"{name} ({path})"
        try:
            from verl.utils.import_utils import load_extern_object

            fn = load_extern_object(module_path=path, object_name=name)
        except BaseException as err:  # noqa: BLE001 - whatever the user's module raises at import
            cause = err.__cause__ or err
            return {"ok": False, "function": label, "error": f"loading it raised {type(cause).__name__}: "
                    f"{cause} at {where(cause, path)}"}
    else:
        from verl.utils.reward_score import default_compute_score

        fn = default_compute_score

        label = f"verl's default_compute_score for data_source {data_source}"
    scores = []
    for row in prepare.rows(dataset, data_source, "train", 4):
        truth = row["reward_model"]["ground_truth"]
        for solution in (f"The answer is \\boxed{{{truth}}}. #### {truth}", "no answer"):
            try:
                score = _call(fn, {"data_source": row["data_source"], "solution_str": solution,
                                   "ground_truth": truth, "extra_info": row["extra_info"], **(reward_kwargs or {})})
            except BaseException as err:  # noqa: BLE001 - the point: the user's code raised
                return {"ok": False, "function": label,
                        "error": f"raised {type(err).__name__}: {err} at {where(err, path)}"}
            value = score.get("score") if isinstance(score, dict) else score
            if not isinstance(value, (int, float)):  # bool is an int: verl takes it as 0/1
                return {"ok": False, "function": label,
                        "error": f"returned {score!r}: verl needs a number (or a dict with 'score')"}
            scores.append(float(value))
    return {"ok": True, "function": label, "scores": scores}


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.verl.cpu.reward_probe")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--data-source", required=True)
    parser.add_argument("--path", default="")
    parser.add_argument("--name", default="compute_score")  # verl's default name
    parser.add_argument("--kwargs", default="{}", help="reward.custom_reward_function.reward_kwargs, as JSON")
    args = parser.parse_args(argv)
    result = probe(args.dataset, args.data_source, args.path, args.name, json.loads(args.kwargs))
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

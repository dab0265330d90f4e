"""REHEARSE=1's inputs on the shared storage: the tiny model, and rows of the tiny task written in
the dataset's own format, then converted to verl's layout by the code that converts the real dataset
(rlaunch.job.data.to_row), with the real dataset's data_source. So verl picks the same reward for
them as for the real rows, and the data pipeline is the real one; only the questions are tiny.
With DATA= (issue 44) the rows are the user's instead: the first TRAIN_ROWS of its train files and
TEST_ROWS of its test files, checked for verl's columns as the plan's data probe checks them, and
written again on every run (the directory is named by the DATA value; its content may move).

Usage (the rehearsal's job.sh runs it; idempotent: what is there is kept):
    python -m rlaunch.frameworks.verl.cpu.prepare --model=DIR --data=DIR --dataset=math --data-source=HF_ID
        [--train-from=FILE,... --test-from=FILE,...]
"""

from __future__ import annotations

import os
import random
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlaunch import cmdline
from rlaunch.config import datasource
from rlaunch.frameworks.verl.cpu import data_probe, model
from rlaunch.job.data import to_row
from rlaunch.rehearsal import tiny

if TYPE_CHECKING:
    from rlaunch.config.spec import Spec

TRAIN_ROWS, TEST_ROWS = 32, 8


def example(dataset: str, question: str, digit: str) -> dict[str, Any]:
    """One row as the dataset itself has it (its Hub columns), answering with the digit."""
    if dataset == "gsm8k":
        return {"question": question, "answer": f"The digit asked for is {digit}.\n#### {digit}"}
    if dataset == "math":
        return {"problem": question, "solution": f"The digit asked for is $\\boxed{{{digit}}}$."}
    raise ValueError(f"no rehearsal rows for dataset {dataset!r}: one of gsm8k, math")


def rows(dataset: str, data_source: str, split: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pairs = tiny.train_pairs() if split == "train" else tiny.eval_pairs(n)
    out = []
    for i in range(n):
        verb, digit = rng.choice(pairs) if split == "train" else pairs[i]
        out.append(to_row(dataset, data_source, split, i, example(dataset, tiny.user_text(verb, digit), digit)))
    return out


def write_data(out: Path, dataset: str, data_source: str) -> list[Path]:
    """train.parquet and test.parquet (the names the verl adapter reads), each whole or absent."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, n in (("train", TRAIN_ROWS), ("test", TEST_ROWS)):
        path = out / f"{split}.parquet"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            pd.DataFrame(rows(dataset, data_source, split, n)).to_parquet(tmp)
            os.replace(tmp, path)
        paths.append(path)
    return paths


def write_user_data(out: Path, train: list[Path], test: list[Path]) -> list[Path]:
    """train.parquet and test.parquet of the user's first rows (each file whole or absent, replaced on
    every run); data_probe.Refused naming the file and row when verl could not read them."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, files, n in (("train", train, TRAIN_ROWS), ("test", test, TEST_ROWS)):
        rows: list[dict[str, Any]] = []
        for f in files:
            rows += data_probe.read(f)[:n - len(rows)]
            if len(rows) >= n:
                break
        data_probe.check_columns(f"{split} rows from {', '.join(f.name for f in files)}", rows)
        path = out / f"{split}.parquet"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def line(spec: Spec) -> str:
    """The shell line job.sh runs (python3: the rehearsal's venv, first on the job's PATH); with DATA,
    the user's files as every node reads them (rlaunch.config.datasource.files)."""
    argv = ["python3", "-m", "rlaunch.frameworks.verl.cpu.prepare", f"--model={spec.model.path}",
            f"--data={spec.data.path}", f"--dataset={spec.data.dataset}",
            f"--data-source={spec.pins.dataset['hf_id']}"]
    if spec.pins.source:
        argv += [f"--{split}-from={','.join(datasource.files(spec.pins.source, split))}" for split in ("train", "test")]
    return shlex.join(argv)


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser("python -m rlaunch.frameworks.verl.cpu.prepare")
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--data-source", required=True)
    parser.add_argument("--train-from", default="", help="DATA's train files: their first rows, not the tiny task's")
    parser.add_argument("--test-from", default="")
    args = parser.parse_args(argv)
    model.write_tiny_model(args.model)
    if args.train_from:
        try:
            files = write_user_data(Path(args.data), [Path(f) for f in args.train_from.split(",")],
                                    [Path(f) for f in (args.test_from or args.train_from).split(",")])
        except data_probe.Refused as err:
            print(f"prepare: DATA's rows: {err}", file=sys.stderr)
            return 2
        print(f"rehearsal inputs: model {args.model}, the first rows of DATA ({args.train_from}) "
              f"{', '.join(str(f) for f in files)}")
        return 0
    files = write_data(Path(args.data), args.dataset, args.data_source)
    print(f"rehearsal inputs: model {args.model}, {args.dataset} rows ({args.data_source}) "
          f"{', '.join(str(f) for f in files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

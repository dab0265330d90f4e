"""The rehearsal's task (rehearsal.tiny's "copy the digit") in verl's data layout and reward API."""

from __future__ import annotations

import os
import random

DATA_SOURCE = "rlaunch/copy-digit"


def write_parquet(out_dir: str, train_rows: int = 32, val_rows: int = 8, seed: int = 0) -> tuple[str, str]:
    """train.parquet and val.parquet in verl's layout: data_source, prompt (chat list), ability,
    reward_model{style, ground_truth}, extra_info (FIELD-NOTES, "verl data")."""
    import pandas as pd

    from rlaunch.rehearsal import tiny

    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for split, n, pairs in (("train", train_rows, tiny.train_pairs()), ("val", val_rows, tiny.eval_pairs(val_rows))):
        rows = []
        for i in range(n):
            verb, digit = rng.choice(pairs) if split == "train" else pairs[i]
            rows.append({"data_source": DATA_SOURCE,
                         "prompt": [{"role": "user", "content": tiny.user_text(verb, digit)}],
                         "ability": "copy", "reward_model": {"style": "rule", "ground_truth": digit},
                         "extra_info": {"split": split, "index": i}})
        path = os.path.join(out_dir, f"{split}.parquet")
        pd.DataFrame(rows).to_parquet(path)
        paths.append(path)
    return paths[0], paths[1]


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """verl's custom reward API: 1.0 when the response's first word is the digit asked for."""
    words = solution_str.split()
    return 1.0 if words and words[0] == ground_truth else 0.0

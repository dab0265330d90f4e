"""Greedy scoring of a rehearsal checkpoint on held-out prompts.

Usage: python -m rlaunch.rehearsal.evaluate CHECKPOINT_DIR [--n 10] [--out eval.json]

Loads the model and tokenizer from an HF-format directory (as saved by the trainer), decodes each
held-out "copy the digit" prompt greedily and counts answers whose first token is the digit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rlaunch import cmdline
from rlaunch.rehearsal import tiny

PROG = "rlaunch.rehearsal.evaluate"


def score_checkpoint(path: str, n: int, max_new_tokens: int = 6) -> dict[str, Any]:
    """{"greedy_correct", "greedy_total", "examples": [{"prompt", "completion", "correct"}]}."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per load is noise in a job log
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    examples = []
    for verb, digit in tiny.eval_pairs(n):
        prompt = tiny.render_prompt(tokenizer, verb, digit)
        inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                # Stop ids come from the checkpoint's generation_config.json, as in training.
            )
        completion_ids = out[0, inputs["input_ids"].shape[1]:].tolist()
        examples.append({
            "prompt": prompt,
            "completion": tokenizer.decode(completion_ids, skip_special_tokens=True),
            "correct": tiny.is_correct(completion_ids, digit),
        })
    return {
        "greedy_correct": sum(e["correct"] for e in examples),
        "greedy_total": len(examples),
        "examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = cmdline.parser(PROG, __doc__)
    parser.add_argument("checkpoint", help="HF-format model directory")
    parser.add_argument("--n", type=int, default=10, help="held-out prompts to score (default 10)")
    parser.add_argument("--out", help="write the result JSON here instead of stdout")
    args = parser.parse_args(argv)
    if args.n < 1:
        print(f"{PROG}: --n={args.n}: must be >= 1", file=sys.stderr)
        return 2
    if not (Path(args.checkpoint) / "config.json").is_file():
        print(f"{PROG}: {args.checkpoint}: not an HF model directory (no config.json)", file=sys.stderr)
        return 2
    text = json.dumps(score_checkpoint(args.checkpoint, args.n), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

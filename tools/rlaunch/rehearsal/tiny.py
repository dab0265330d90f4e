"""The rehearsal's whole world, built offline at run time: a 22-token tokenizer, a ~80k-parameter
Qwen2 with random weights, a "copy the digit" prompt set and its reward.

The task: the user says e.g. "repeat the digit 7"; the answer is correct when the first generated
token is that digit. A random policy scores ~1/22; a tiny model learns it in a few hundred GRPO steps
on CPU. Some (verb, digit) pairs never appear in training and are kept for the greedy evaluation,
so a perfect score needs the policy to have learned to copy, not to memorise prompts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
USER, ASSISTANT = "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = [PAD, UNK, EOS, USER, ASSISTANT]
DIGITS = [str(d) for d in range(10)]
VERBS = ["copy", "repeat", "say", "echo"]
WORDS = [*VERBS, "the", "digit", "please"]
# Order fixes the token ids; reward and evaluation rely on them, so never reorder.
VOCAB = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *DIGITS, *WORDS])}

# Plain Jinja over the two roles the vocabulary knows; anything else is an error, not <unk>s.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<|user|> ' + message['content'] + ' ' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|> ' + message['content'] + ' <eos> ' }}"
    "{% else %}{{ raise_exception('only user and assistant roles are supported') }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

# Model shape from the measured recipe (FIELD-NOTES): 2 layers, hidden 64, learns in ~300 CPU steps.
MODEL_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32,
}


# The answer is one digit, so a digit ends the completion, like a stop sequence (TRL and generate()
# both read the list from generation_config). Measured: with only <eos> as a stop, the up to 5
# tokens after the answer share its advantage as pure noise; 300-step runs ended at 0.2-0.8 mean
# reward, with prompts stuck for good on a wrong digit. With digits as stops, 9 of 9 runs
# (4 single-process, 5 on 2 Ray nodes, 64 completions per step) passed 0.95 by about step 120.
STOP_IDS = [VOCAB[EOS], *(VOCAB[d] for d in DIGITS)]


def build_tokenizer() -> Any:
    """A transformers fast tokenizer over VOCAB, with pad/eos/unk set and a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=dict(VOCAB), unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=EOS,
        additional_special_tokens=[USER, ASSISTANT],
        padding_side="left",  # generation appends on the right
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(seed: int) -> Any:
    """A randomly initialised Qwen2 causal LM; the same seed gives the same weights."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(VOCAB),
        pad_token_id=VOCAB[PAD],
        bos_token_id=None,
        eos_token_id=VOCAB[EOS],
        tie_word_embeddings=True,
        **MODEL_SHAPE,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = VOCAB[PAD]
    model.generation_config.eos_token_id = STOP_IDS
    return model


def user_text(verb: str, digit: str) -> str:
    return f"{verb} the digit {digit}"


def render_prompt(tokenizer: Any, verb: str, digit: str) -> str:
    """The chat-templated prompt text, ending with the assistant tag the model continues from."""
    messages = [{"role": "user", "content": user_text(verb, digit)}]
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def is_held_out(verb: str, digit: str) -> bool:
    # Exactly one verb per digit is held out: 10 unseen pairs, every verb and digit still trained.
    return (VERBS.index(verb) + int(digit)) % len(VERBS) == 0


def train_pairs() -> list[tuple[str, str]]:
    return [(v, d) for d in DIGITS for v in VERBS if not is_held_out(v, d)]


def eval_pairs(n: int) -> list[tuple[str, str]]:
    """n held-out pairs in digit order, cycling when n exceeds the 10 that exist."""
    held = [(v, d) for d in DIGITS for v in VERBS if is_held_out(v, d)]
    return [held[i % len(held)] for i in range(n)]


def build_dataset(tokenizer: Any, size: int, seed: int, rows: list[dict[str, Any]] | None = None) -> Any:
    """A datasets.Dataset with `prompt` (templated text) and `answer` (the digit), drawn from the
    training pairs only, or from the user's rows (DATA=, read by read_rows). GRPOTrainer passes the
    `answer` column to the reward function."""
    from datasets import Dataset

    rng = random.Random(seed)
    if rows:
        drawn = [rng.choice(rows) for _ in range(size)]
        return Dataset.from_list([{"prompt": tokenizer.apply_chat_template(_messages(r["prompt"]), tokenize=False,
                                                                           add_generation_prompt=True),
                                   "answer": str(r["answer"])} for r in drawn])
    pairs = train_pairs()
    out = []
    for _ in range(size):
        verb, digit = rng.choice(pairs)
        out.append({"prompt": render_prompt(tokenizer, verb, digit), "answer": digit})
    return Dataset.from_list(out)


# ---------------------------------------------------------------- the user's rows (DATA=)

ROW_FORMAT = ('rows with "prompt" (the user\'s text, e.g. "copy the digit 7", or chat messages '
              '[{"role": "user", "content": ...}]) and "answer" (a digit 0-9), in words of the rehearsal\'s '
              f"vocabulary ({' '.join(WORDS)} and the digits)")


def _messages(prompt: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def row_problem(row: Any) -> str:
    """Why the tiny model cannot train on one row ("" when it can): the columns, the roles, and
    every word inside the 22-token vocabulary (the tokenizer would turn any other into <unk>)."""
    if not isinstance(row, dict) or "prompt" not in row or "answer" not in row:
        return f"no {'prompt' if not isinstance(row, dict) or 'prompt' not in row else 'answer'} column"
    if str(row["answer"]) not in DIGITS:
        return f"answer {row['answer']!r} is not a digit 0-9"
    prompt = row["prompt"]
    if not isinstance(prompt, (str, list)) or not prompt:
        return f"prompt {prompt!r} is neither text nor a list of chat messages"
    for message in _messages(prompt):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant") \
                or not isinstance(message.get("content"), str):
            return f"prompt message {message!r} is not {{'role': 'user' or 'assistant', 'content': text}}"
        unknown = [w for w in message["content"].split() if w not in VOCAB or w in SPECIAL_TOKENS]
        if unknown:
            return f"prompt word {unknown[0]!r} is not in the rehearsal's vocabulary"
    return ""


def read_rows(paths: list[str]) -> list[dict[str, Any]]:
    """Every row of the user's .jsonl, .json (a list of rows) and .parquet files, in order; ValueError
    naming the file, the row and what is wrong for the first row the tiny model cannot train on."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        if path.endswith(".parquet"):
            # Only for parquet: the launcher's plan reads jsonl without it.
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            found = pq.read_table(path).to_pylist()
        elif path.endswith(".json"):
            with open(path, encoding="utf-8") as fh:
                found = json.load(fh)
            if not isinstance(found, list):
                raise ValueError(f"{path}: a JSON list of rows, not {type(found).__name__}")
        else:
            with open(path, encoding="utf-8") as fh:
                found = [json.loads(line) for line in fh if line.strip()]
        for i, row in enumerate(found):
            problem = row_problem(row)
            if problem:
                raise ValueError(f"{path} row {i}: {problem}; the TRL rehearsal trains on {ROW_FORMAT}")
        rows += found
    if not rows:
        raise ValueError(f"{', '.join(paths)}: no rows")
    return rows


def is_correct(completion_ids: Iterable[int], answer: str) -> bool:
    """Correct iff the first generated token is the answer digit. Token ids, not decoded text:
    decoding drops special tokens, which would let "<|user|> 7" pass."""
    ids = list(completion_ids)
    return bool(ids) and int(ids[0]) == VOCAB[answer]


def copy_reward(completions: object, completion_ids: Iterable[Iterable[int]], answer: Iterable[str],
                **_kwargs: object) -> list[float]:
    """GRPO reward: 1.0 for the right digit first, else 0.0. No partial credit for a wrong digit:
    in the measured recipe that created a local optimum at ~0.32 (any digit beat no digit)."""
    return [1.0 if is_correct(ids, a) else 0.0 for ids, a in zip(completion_ids, answer, strict=True)]

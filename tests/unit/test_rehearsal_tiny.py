"""The rehearsal's tiny world: tokenizer, task split, dataset, reward, model, greedy scoring."""

from __future__ import annotations

import pytest

from rlaunch.rehearsal import evaluate, tiny


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.build_tokenizer()


def test_tokenizer_is_fast_with_22_tokens_and_specials(tokenizer):
    from transformers import PreTrainedTokenizerFast

    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert len(tokenizer) == len(tiny.VOCAB) == 22
    assert tokenizer.pad_token_id == tiny.VOCAB[tiny.PAD]
    assert tokenizer.eos_token_id == tiny.VOCAB[tiny.EOS]
    assert tokenizer.padding_side == "left"


def test_prompt_round_trips_through_the_chat_template(tokenizer):
    prompt = tiny.render_prompt(tokenizer, "repeat", "7")
    assert prompt == "<|user|> repeat the digit 7 <|assistant|>"
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert tiny.VOCAB[tiny.UNK] not in ids
    assert ids[0] == tiny.VOCAB[tiny.USER] and ids[-1] == tiny.VOCAB[tiny.ASSISTANT]
    assert tokenizer.decode(ids) == prompt
    assert tokenizer.decode(ids, skip_special_tokens=True) == "repeat the digit 7"


def test_chat_template_renders_answers_and_rejects_unknown_roles(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "copy the digit 3"}, {"role": "assistant", "content": "3"}],
        tokenize=False)
    assert text.split() == ["<|user|>", "copy", "the", "digit", "3", "<|assistant|>", "3", "<eos>"]
    with pytest.raises(Exception, match="only user and assistant"):
        tokenizer.apply_chat_template([{"role": "system", "content": "x"}], tokenize=False)


def test_unknown_words_map_to_unk(tokenizer):
    ids = tokenizer("copy the number 7", add_special_tokens=False)["input_ids"]
    assert ids[2] == tiny.VOCAB[tiny.UNK]


@pytest.mark.parametrize(("completion", "answer", "reward"), [
    (["7"], "7", 1.0),
    (["7", tiny.EOS], "7", 1.0),
    (["3"], "7", 0.0),  # a wrong digit earns nothing: partial credit made a local optimum
    (["3", "7"], "7", 0.0),  # the answer must come first
    (["copy", "7"], "7", 0.0),
    ([tiny.USER, "7"], "7", 0.0),  # a special token decodes to "" but still counts as wrong
    ([tiny.EOS], "7", 0.0),
    ([], "7", 0.0),
])
def test_reward_is_all_or_nothing_on_the_first_token(completion, answer, reward):
    ids = [tiny.VOCAB[t] for t in completion]
    assert tiny.copy_reward(completions=["..."], completion_ids=[ids], answer=[answer]) == [reward]


def test_reward_scores_a_batch_elementwise():
    ids = [[tiny.VOCAB["1"]], [tiny.VOCAB["2"]], [tiny.VOCAB["3"]]]
    assert tiny.copy_reward(completions=["1", "2", "3"], completion_ids=ids,
                            answer=["1", "9", "3"], trainer_state=None) == [1.0, 0.0, 1.0]


def test_held_out_pairs_are_unseen_yet_every_word_is_trained():
    train = set(tiny.train_pairs())
    held = set(tiny.eval_pairs(10))
    assert len(held) == 10 and not train & held
    assert {d for _, d in held} == set(tiny.DIGITS)
    assert {v for v, _ in train} == set(tiny.VERBS) and {d for _, d in train} == set(tiny.DIGITS)
    assert len(train) + len(held) == len(tiny.VERBS) * len(tiny.DIGITS)
    assert tiny.eval_pairs(12)[10:] == tiny.eval_pairs(2)


def test_dataset_shape_split_and_seed(tokenizer):
    ds = tiny.build_dataset(tokenizer, 64, seed=3)
    assert ds.num_rows == 64 and set(ds.column_names) == {"prompt", "answer"}
    train_prompts = {tiny.render_prompt(tokenizer, v, d): d for v, d in tiny.train_pairs()}
    for row in ds:
        assert train_prompts[row["prompt"]] == row["answer"]
    assert ds["prompt"] == tiny.build_dataset(tokenizer, 64, seed=3)["prompt"]
    assert ds["prompt"] != tiny.build_dataset(tokenizer, 64, seed=4)["prompt"]


def test_model_is_tiny_seeded_and_stops_at_an_answer(tokenizer):
    import torch

    model = tiny.build_model(seed=0)
    assert sum(p.numel() for p in model.parameters()) < 100_000
    assert model.config.vocab_size == len(tokenizer)
    stops = {tiny.VOCAB[tiny.EOS], *(tiny.VOCAB[d] for d in tiny.DIGITS)}
    assert set(model.generation_config.eos_token_id) == stops
    same, other = tiny.build_model(seed=0), tiny.build_model(seed=1)
    w = model.model.embed_tokens.weight
    assert torch.equal(w, same.model.embed_tokens.weight)
    assert not torch.equal(w, other.model.embed_tokens.weight)


def test_score_checkpoint_reads_a_saved_model(tokenizer, tmp_path):
    model = tiny.build_model(seed=0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    result = evaluate.score_checkpoint(str(tmp_path), 3)
    assert result["greedy_total"] == 3 and len(result["examples"]) == 3
    assert result["greedy_correct"] == sum(e["correct"] for e in result["examples"])
    assert result["examples"][0]["prompt"] == tiny.render_prompt(tokenizer, *tiny.eval_pairs(1)[0])
    assert all(isinstance(e["completion"], str) for e in result["examples"])


def test_score_checkpoint_counts_only_first_token_hits(tokenizer, tmp_path, monkeypatch):
    """Scoring is the subject, not learning: generate() is replaced by a copier that gets the
    even digits right and answers "0" otherwise."""
    import torch
    from transformers import AutoModelForCausalLM

    tiny.build_model(seed=0).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    real = AutoModelForCausalLM.from_pretrained

    def half_right(input_ids, **_):
        digit = input_ids[0, -2]  # "... 7 <|assistant|>"
        if int(tokenizer.decode([int(digit)])) % 2:
            digit = torch.tensor(tiny.VOCAB["0"])
        return torch.cat([input_ids, digit.view(1, 1)], dim=1)

    def load(path, **kw):
        model = real(path, **kw)
        model.generate = half_right
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", load)
    result = evaluate.score_checkpoint(str(tmp_path), 10)
    assert result["greedy_correct"] == 5
    assert [e["correct"] for e in result["examples"]] == [int(d) % 2 == 0 for _, d in tiny.eval_pairs(10)]
    assert result["examples"][1]["completion"] == "0"

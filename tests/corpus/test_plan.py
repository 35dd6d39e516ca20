"""The plan tokenizes each passage once and the batches are built from its ids: every planned
batch's inputs equal those padded from a fresh `loaded.encode` of its passages (same ids,
special tokens, sentence-pair segments and truncation at the token limit), for an encoder and a
causal decoder; the batches come longest first, each within the byte budget; and a work folder
planned before the ids were kept is planned again."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.corpus import plan as planning
from models.corpus.batch_pass import encoded_text, padded_inputs
from models.corpus.plan import (PLAN_FILE, TOKENS_FILE, Plan, batch_sizes, make_plan,
                                planned_batches)
from models.corpus.reading import describe
from tests.corpus.support import PASSAGES

LIMIT = 12  # shorter than the longest passages: some are cut
PAIRS = {1: "He came back later.", 4: "It was a long day for everyone, the dog included.",
         9: "Then sun."}


def write_pairs(folder) -> object:
    path = folder / "pairs.jsonl"
    path.write_text("\n".join(json.dumps({"text": text, "text_pair": PAIRS.get(index)})
                              for index, text in enumerate(PASSAGES)) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("runner", ["encoder_runner", "decoder_runner"])
def test_planned_batches_equal_a_fresh_tokenization(request, tmp_path, runner):
    loaded = request.getfixturevalue(runner)
    plan = make_plan(loaded, describe(write_pairs(tmp_path)), tmp_path, batch_size=4,
                     max_tokens=LIMIT)
    assert plan.token_limit == LIMIT and plan.truncated > 0
    batches = list(planned_batches(tmp_path))
    assert sorted(p for batch in batches for p in batch.passages) == list(range(len(PASSAGES)))
    padded = paired = 0
    for batch in batches:
        fresh = [loaded.encode(text, pair, LIMIT)[0] for text, pair in zip(batch.texts,
                                                                           batch.pairs)]
        planned = [encoded_text(loaded, tokens) for tokens in batch.tokens]
        for mine, theirs in zip(planned, fresh, strict=True):
            assert mine.tokens == theirs.tokens
            assert mine.special_positions == theirs.special_positions
            assert mine.segment_ids == theirs.segment_ids
            assert mine.dropped_tokens == theirs.dropped_tokens
            paired += any(mine.segment_ids)
        ours, reference = padded_inputs(loaded, planned), padded_inputs(loaded, fresh)
        assert ours.keys() == reference.keys()
        for name, value in reference.items():
            if isinstance(value, torch.Tensor):
                assert ours[name].dtype == value.dtype, name
                assert torch.equal(ours[name], value), name
            else:
                assert ours[name] is value, name
        padded += bool((reference["attention_mask"] == 0).any())
    assert padded > 0 and paired > 0  # the comparison covered padding and sentence pairs


def test_a_plan_without_its_token_ids_is_planned_again(tmp_path, encoder_runner):
    corpus = describe(write_pairs(tmp_path))
    plan = make_plan(encoder_runner, corpus, tmp_path, batch_size=4)
    assert Plan.load(tmp_path) == plan
    (tmp_path / TOKENS_FILE).unlink()  # as an older version left its work folder
    assert (tmp_path / PLAN_FILE).is_file() and Plan.load(tmp_path) is None


@pytest.mark.parametrize("runner", ["encoder_runner", "decoder_runner"])
def test_encoding_many_texts_at_once_equals_encoding_each(request, runner):
    """The plan's one tokenizer call for many passages gives each the EncodedText of its own
    `loaded.encode`, tensors and truncation included."""
    loaded = request.getfixturevalue(runner)
    pairs = [PAIRS.get(index) for index in range(len(PASSAGES))]
    pairs[2] = "   "  # no pair
    many = loaded.encode_many(list(PASSAGES), pairs, LIMIT)
    assert sum(item.dropped_tokens > 0 for item in many) > 0
    for text, pair, mine in zip(PASSAGES, pairs, many, strict=True):
        theirs = loaded.encode(text, pair, LIMIT)[0]
        for name in ("tokens", "segment_ids", "special_positions", "dropped_tokens"):
            assert getattr(mine, name) == getattr(theirs, name), name
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            ours, reference = getattr(mine, name), getattr(theirs, name)
            assert (ours is None) == (reference is None), name
            if reference is not None:
                assert ours.dtype == reference.dtype and torch.equal(ours, reference), name


def test_the_batches_come_longest_first(tmp_path, encoder_runner):
    make_plan(encoder_runner, describe(write_pairs(tmp_path)), tmp_path, batch_size=3)
    widths = [max(len(tokens.input_ids) for tokens in batch.tokens)
              for batch in planned_batches(tmp_path)]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) > 2, widths


@pytest.mark.parametrize("longest_first", [True, False])
def test_each_batch_is_the_most_passages_the_byte_budget_holds_in_either_order(
        monkeypatch, longest_first):
    heads, most, budget = 12, 32, 3 * 12 * 64 * 64 * 4  # three maps of 64 tokens
    monkeypatch.setattr(planning, "CORPUS_BATCH_BYTES", budget)
    lengths = np.sort(np.random.default_rng(0).integers(8, 120, 300))
    lengths = lengths[::-1] if longest_first else lengths

    def fits(batch) -> bool:  # the batch's maps, padded to its longest passage
        return len(batch) <= most and len(batch) * heads * int(max(batch)) ** 2 * 4 <= budget

    start = 0
    for size in batch_sizes(lengths, most, heads):
        assert size == 1 or fits(lengths[start:start + size]), (start, size)
        if start + size < len(lengths):  # one passage more would not fit
            assert not fits(lengths[start:start + size + 1]), (start, size)
        start += size
    assert start == len(lengths)

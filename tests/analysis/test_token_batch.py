"""TokenBatch: what a reducer knows of a batch's tokens, from a record, a tokenized text or
several batches padded on the right."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.token_batch import PADDING_CODE, TokenBatch, is_punctuation
from models.analysis.token_options import merge_word_pieces
from models.hooks.record import AttentionRecord
from models.loading.tokenize import encode


def test_a_records_batch_has_its_own_tokens_and_specials():
    tokens = ("[CLS]", "play", "##ing", ",", "play", "[SEP]")
    weights = np.full((1, 1, 6, 6), 1 / 6)
    record = AttentionRecord(tokens=tokens, weights=weights, source="hand",
                             special_positions=(0, 5), masks=("causal",))
    batch = TokenBatch.of_record(record)
    assert batch.real.tolist() == [[True] * 6] and batch.causal and not batch.rectangular
    assert batch.special.tolist() == [[True, False, False, False, False, True]]
    assert batch.punctuation.tolist() == [[False, False, False, True, False, False]]
    assert batch.codes[0, 1] == batch.codes[0, 4] and len(set(batch.codes[0].tolist())) == 5
    merged = TokenBatch.of_record(merge_word_pieces(record))  # a view's own tokens
    assert merged.real.shape == (1, 5) and np.flatnonzero(merged.special[0]).tolist() == [0, 4]


def test_a_tokenized_text_gives_the_same_batch_as_its_record(encoder_runner):
    trace = encoder_runner.run("Time flies, like an arrow.", "Fruit flies!")
    encoded = encode(encoder_runner.tokenizer, "Time flies, like an arrow.", "Fruit flies!", 512)
    from_text = TokenBatch.of_encoded(encoded, causal=False)
    from_record = TokenBatch.of_record(trace.record)
    for name in ("real", "special", "punctuation", "codes"):
        np.testing.assert_array_equal(getattr(from_text, name), getattr(from_record, name))
    assert np.flatnonzero(from_text.special[0]).tolist() == list(encoded.special_positions)
    assert from_text.punctuation[0].sum() == 3  # ",", "." and "!"


def test_padding_goes_on_the_right_and_is_never_special():
    short = TokenBatch.of_tokens(("[CLS]", "a", "[SEP]"), (0, 2))
    long = TokenBatch.of_tokens(("[CLS]", "a", "b", ".", "[SEP]"), (0, 4))
    batch = TokenBatch.padded([short, long])
    assert batch.real.tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert batch.lengths.tolist() == [3, 5] and batch.codes[0, 3:].tolist() == [PADDING_CODE] * 2
    assert batch.item(0).keys == 3 and batch.item(0).special_positions.tolist() == [0, 2]
    maps = np.zeros((2, 4, 5, 5), np.float32)
    assert batch.cut(maps, 0).shape == (4, 3, 3)
    with pytest.raises(ValueError, match="on the right"):
        TokenBatch(real=[[False, True]], special=[[False, False]],
                   punctuation=[[False, False]], codes=[[0, 1]])
    with pytest.raises(ValueError, match="padded position"):
        TokenBatch(real=[[True, False]], special=[[False, True]],
                   punctuation=[[False, False]], codes=[[0, 1]])
    with pytest.raises(ValueError, match="maps shaped"):
        batch.check(np.zeros((2, 4, 5, 4), np.float32))
    with pytest.raises(ValueError):
        TokenBatch.padded([short, TokenBatch.of_tokens(("a",), causal=True)])


def test_a_cross_attention_records_keys_are_its_source_tokens():
    weights = np.full((1, 2, 3, 4), 0.25)
    record = AttentionRecord(tokens=("<s>", "la", "voiture"), key_tokens=("the", "car", ".", "!"),
                             weights=weights, source="hand", special_positions=(0,))
    batch = TokenBatch.of_record(record)
    assert batch.rectangular and batch.query_lengths.tolist() == [3]
    assert batch.lengths.tolist() == [4] and not batch.special.any()
    assert batch.punctuation.tolist() == [[False, False, True, True]]
    batch.check(weights.astype(np.float32))


@pytest.mark.parametrize("token, expected", [
    (".", True), (",", True), ("##'", True), ("Ġ!", True), ("▁?", True),
    ("a", False), ("Ġ", False), ("3.5", False), ("[SEP]", False),
])
def test_punctuation_tokens(token, expected):
    assert is_punctuation(token) is expected

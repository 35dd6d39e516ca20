"""The Detectors reducer against each detector's definition, one cell at a time, on inputs alone
and padded into one batch; the sentences it gives when an input has nothing to measure; the
equal-token pairs it reads instead of a (Q, K) mask; real records."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis import detectors
from models.analysis.detectors import DETECTORS_BY_NAME, SENTENCE_DETECTORS, Detectors
from models.analysis.reducer import reduce_record
from models.analysis.token_batch import token_codes
from models.hooks.record import AttentionRecord
from tests.analysis import references
from tests.analysis.batches import feed_batch, items

ATOL = 1e-5
REPEATS = "the cat saw the dog , and the dog saw the cat near the old mill ."
PAIR = "a cat , a dog ."
MESSAGES = {"too short": (detectors.TOO_SHORT_PREVIOUS, detectors.TOO_SHORT_FIRST),
            "no separator": (detectors.NO_SEPARATOR,),
            "no repeats": (detectors.NO_DUPLICATES, detectors.NO_INDUCTION)}


def assert_like_reference(result, index: int, item) -> None:
    expected = references.detector_scores(item)
    for name in result.scores:
        if isinstance(expected[name], str):
            assert result.reasons[name][index] in MESSAGES[expected[name]], name
            assert np.isnan(result.scores[name][index]).all()
            with pytest.raises(detectors.NotMeasurable):
                result.of(name, index)
        else:
            assert result.reasons[name][index] is None, name
            np.testing.assert_allclose(result.of(name, index), expected[name], rtol=0, atol=ATOL,
                                       err_msg=f"item {index}, {name}")


@pytest.mark.parametrize("causal", [False, True])
def test_detectors_are_their_definitions_alone_and_in_a_padded_batch(causal):
    batch = items(causal, seed=10)
    together = feed_batch(Detectors(), batch)
    for index, item in enumerate(batch):
        (alone,) = reduce_record(item.record, Detectors())
        assert_like_reference(alone, 0, item)
        assert_like_reference(together, index, item)
        for name in alone.scores:
            np.testing.assert_allclose(together.scores[name][index], alone.scores[name][0],
                                       rtol=0, atol=ATOL)
    measured = [name for name in together.scores
                if all(reason is None for reason in together.reasons[name])]
    assert set(measured) >= {"previous-token", "first-token sink", "[SEP] sink"}


def test_the_record_functions_are_the_reducer_over_the_records_layers():
    item = items(seed=20)[0]
    expected = references.detector_scores(item)
    for name, detector in DETECTORS_BY_NAME.items():
        if isinstance(expected[name], str):
            with pytest.raises(detectors.NotMeasurable):
                detector.score(item.record)
        else:
            np.testing.assert_allclose(detector.score(item.record), expected[name], atol=ATOL)
    np.testing.assert_allclose(detectors.previous_token_scores(item.record),
                               expected["previous-token"], atol=ATOL)


def test_inputs_the_detectors_cannot_measure_give_their_messages(encoder_runner):
    single = AttentionRecord(tokens=("a",), weights=np.ones((2, 3, 1, 1)), source="hand")
    (result,) = reduce_record(single, Detectors(SENTENCE_DETECTORS))
    assert result.by_name() == {
        "previous-token": detectors.TOO_SHORT_PREVIOUS, "duplicate-token": detectors.NO_DUPLICATES,
        "first-token sink": detectors.TOO_SHORT_FIRST, "[SEP] sink": detectors.NO_SEPARATOR}
    plain = encoder_runner.run("Birds sing loudly .").record  # no token occurs twice
    with pytest.raises(detectors.NotMeasurable, match="No token occurs twice"):
        detectors.duplicate_token_scores(plain)
    assert detectors.first_token_scores(plain).shape == (plain.num_layers, plain.num_heads)
    with pytest.raises(ValueError, match="unknown detectors"):
        Detectors(("nonsense",))


def test_equal_token_pairs_are_every_earlier_copy_of_a_token():
    tokens = ("[CLS]", "a", "b", "a", "[CLS]", "a", "c", "b", "b", "[SEP]")
    special = np.isin(np.arange(10), (0, 4, 9))
    queries, keys = detectors.equal_token_pairs(token_codes(tokens), special)
    expected = {(i, j) for i in range(10) for j in range(i)
                if tokens[i] == tokens[j] and not special[i] and not special[j]}
    assert set(zip(queries.tolist(), keys.tolist())) == expected and len(queries) == len(expected)
    assert len(expected) == 3 + 3  # three a's, three b's; the special [CLS] twice never counts
    runs = 1 + np.count_nonzero(queries[1:] != queries[:-1])
    assert runs == len(set(queries.tolist()))  # each query's pairs side by side


def test_duplicate_scores_read_many_pairs_in_chunks(monkeypatch):
    rng = np.random.default_rng(3)
    tokens = tuple(rng.choice(["x", "y", "z", "w"], size=40))
    weights = rng.random((2, 3, 40, 40)) ** 3
    weights[0, 1, 7] = 0.0  # a row a mask emptied: left out
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
    item = references.Item(tokens, (0, 39), weights.astype(np.float32), causal=False)
    expected = references.detector_scores(item)
    monkeypatch.setattr(detectors, "PAIR_CHUNK", 7)  # many chunks, each of whole queries
    for name in ("duplicate-token", "induction"):
        np.testing.assert_allclose(DETECTORS_BY_NAME[name].score(item.record), expected[name],
                                   rtol=0, atol=ATOL)


@pytest.fixture(scope="module")
def encoder_record(encoder_runner) -> AttentionRecord:
    """MiniLM on a sentence pair: [CLS] … [SEP] … [SEP], repeated words."""
    record = encoder_runner.run(REPEATS, PAIR).record
    assert record.tokens[0] == "[CLS]" and len(record.special_positions) == 3
    return record


@pytest.fixture(scope="module")
def decoder_record(decoder_runner) -> AttentionRecord:
    """SmolLM2 (causal, no special tokens) on the same words."""
    record = decoder_runner.run(REPEATS).record
    assert record.masks == ("causal",) and not record.special_positions
    return record


def test_real_records_score_like_their_definitions(encoder_record, decoder_record):
    assert set(SENTENCE_DETECTORS) == {
        "previous-token", "duplicate-token", "first-token sink", "[SEP] sink"}
    for record, layers in ((encoder_record, (0, 5)), (decoder_record, (0, 17, 29))):
        item = references.Item(record.tokens, record.special_positions,
                               record.weights[list(layers)], "causal" in record.masks)
        expected = references.detector_scores(item)
        (result,) = reduce_record(record, Detectors())
        for name, scores in expected.items():
            if isinstance(scores, str):
                assert name == "[SEP] sink" and record is decoder_record
                assert result.reasons[name] == (detectors.NO_SEPARATOR,)
            else:
                np.testing.assert_allclose(result.of(name)[list(layers)], scores, rtol=0,
                                           atol=ATOL, err_msg=name)
    assert detectors.previous_token_scores(decoder_record).max() > 0.5  # a real previous-token head

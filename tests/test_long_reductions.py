"""Per-layer reductions for long inputs, each against the full-record function it replaces:
sentence detectors (models.analysis.detectors), head roles and their ranking (viz.compare) and the
streamed rollout (viz.long_rollout), on real encoder ([CLS] … [SEP]) and decoder records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.analysis import detectors
from models.hooks.record import AttentionRecord
from models.hooks.streaming import stream
from viz import long_rollout
from viz.compare import (ROLES, compare_heads, compare_role_tables, jensen_shannon_bits,
                         layer_roles, role_distribution)
from viz.long_rollout import RolloutStream, long_rollout_figures, multiply_into
from viz.overview import max_pool
from viz.rollout import attention_rollout, head_average
from viz.statistics import head_statistics

REPEATS = "the cat saw the dog , and the dog saw the cat near the old mill ."
PAIR = "a cat , a dog ."
NO_REPEATS = "Birds sing loudly ."


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


def reference_scores(record: AttentionRecord) -> dict[str, np.ndarray | str]:
    """name -> (L, H) scores of the full-record detector, or its NotMeasurable message."""
    expected = {}
    for name in detectors.SENTENCE_DETECTORS:
        try:
            expected[name] = detectors.DETECTORS_BY_NAME[name].score(record)
        except detectors.NotMeasurable as error:
            expected[name] = str(error)
    return expected


def assert_same_scores(record: AttentionRecord, measurable: set[str]) -> None:
    expected = reference_scores(record)
    assert {name for name, value in expected.items() if not isinstance(value, str)} == measurable
    for layer, maps in enumerate(record.layers):
        scores = detectors.layer_sentence_scores(maps, record.tokens, record.special_positions)
        assert list(scores) == list(detectors.SENTENCE_DETECTORS)
        for name, value in scores.items():
            if isinstance(expected[name], str):
                assert value == expected[name], name
            else:
                assert value.shape == (record.num_heads,) and value.dtype == np.float64
                np.testing.assert_allclose(value, expected[name][layer], rtol=0, atol=1e-6,
                                           err_msg=f"{name}, layer {layer}")


def test_sentence_detectors_by_layer_equal_the_full_record_detectors(encoder_record,
                                                                     decoder_record):
    assert set(detectors.SENTENCE_DETECTORS) == {
        "previous-token", "duplicate-token", "first-token sink", "[SEP] sink"}
    assert_same_scores(encoder_record, set(detectors.SENTENCE_DETECTORS))
    # a decoder has no [SEP]: the stream gives the same message the page shows
    assert_same_scores(decoder_record, set(detectors.SENTENCE_DETECTORS) - {"[SEP] sink"})
    scores = detectors.previous_token_scores(decoder_record)
    assert scores.max() > 0.5  # a real previous-token head, not a vacuous comparison


def test_inputs_the_detectors_cannot_measure_give_their_messages(encoder_runner):
    plain = encoder_runner.run(NO_REPEATS).record  # no token occurs twice
    assert_same_scores(plain, {"previous-token", "first-token sink", "[SEP] sink"})
    single = AttentionRecord(tokens=("a",), weights=np.ones((2, 3, 1, 1)), source="hand")
    assert_same_scores(single, set())  # too short, no [SEP], nothing repeated
    assert detectors.layer_sentence_scores(single.layer(0), single.tokens, ())[
        "previous-token"] == detectors.TOO_SHORT_PREVIOUS


def test_equal_token_pairs_are_the_cells_of_same_token():
    tokens = ("[CLS]", "a", "b", "a", "[CLS]", "a", "c", "b", "b", "[SEP]")
    special = (0, 4, 9)
    record = AttentionRecord(tokens=tokens, weights=np.full((1, 1, 10, 10), 0.1),
                             source="hand", special_positions=special)
    queries, keys = detectors.equal_token_pairs(tokens, special)
    expected = {tuple(pair) for pair in np.argwhere(detectors._same_token(record))}
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
    record = AttentionRecord(tokens=tokens, weights=weights, source="hand", masks=("padding",),
                             special_positions=(0, 39))
    assert_same_scores(record, set(detectors.SENTENCE_DETECTORS))  # with the emptied row
    expected = detectors.duplicate_token_scores(record)
    monkeypatch.setattr(detectors, "PAIR_CHUNK", 7)  # many chunks, each of whole queries
    for layer in range(2):
        scores = detectors.layer_sentence_scores(record.layer(layer), tokens, (0, 39))
        np.testing.assert_allclose(scores["duplicate-token"], expected[layer], rtol=0, atol=1e-6)


def roles_by_layer(record: AttentionRecord) -> np.ndarray:
    return np.stack([layer_roles(maps, record.special_positions) for maps in record.layers])


def test_layer_roles_equal_the_role_distribution(encoder_record, decoder_record):
    for record in (encoder_record, decoder_record):
        expected = role_distribution(record)
        roles = roles_by_layer(record)
        assert roles.shape == (record.num_layers, record.num_heads, len(ROLES))
        np.testing.assert_allclose(roles, expected, rtol=0, atol=1e-6)
    assert expected[..., ROLES.index("later")].max() == 0.0  # causal: nothing later
    assert role_distribution(encoder_record)[..., ROLES.index("other special")].max() > 0.1


def test_layer_roles_follow_the_special_precedence_and_live_rows():
    rng = np.random.default_rng(5)
    weights = rng.random((2, 3, 9, 9)) ** 2
    weights[1, 2, 4] = 0.0  # emptied rows are left out
    weights[0, 0, :3] = 0.0
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
    for special in [(), (0,), (3, 4), (5, 0, 5, 8), (8,)]:
        record = AttentionRecord(tokens=tuple("abcdefghi"), weights=weights, source="hand",
                                 masks=("padding",), special_positions=special)
        np.testing.assert_allclose(roles_by_layer(record), role_distribution(record), rtol=0,
                                   atol=1e-6, err_msg=str(special))


def test_role_tables_rank_like_compare_heads(encoder_runner, encoder_record):
    other = encoder_runner.run(NO_REPEATS).record
    assert other.num_tokens != encoder_record.num_tokens
    labels = [head_statistics(record)["label"] for record in (encoder_record, other)]
    table = compare_role_tables(roles_by_layer(encoder_record), roles_by_layer(other), *labels)
    expected = compare_heads(encoder_record, other)
    assert list(table.columns) == ["rank", "layer", "head", "difference", "role_jsd",
                                   "label_first", "label_second"]
    pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=0, atol=1e-6)
    assert table["difference"].is_monotonic_decreasing and table["difference"].iloc[0] > 0.01
    # the lengths match: compare_heads still ranks by the position-aligned difference
    same = compare_heads(encoder_record, encoder_record)
    assert "aligned_jsd" in same and np.allclose(same["difference"], same["aligned_jsd"])
    with pytest.raises(ValueError):
        compare_role_tables(roles_by_layer(encoder_record)[1:], roles_by_layer(other), *labels)
    with pytest.raises(ValueError, match="head labels"):
        compare_role_tables(roles_by_layer(encoder_record), roles_by_layer(other),
                            labels[0][1:], labels[1])
    jsd = jensen_shannon_bits(role_distribution(encoder_record), role_distribution(other))
    assert table.set_index(["layer", "head"]).loc[(0, 0), "role_jsd"] == pytest.approx(jsd[0, 0])


def rolled_stream(record: AttentionRecord, cells: int) -> RolloutStream:
    rollout = RolloutStream(record.num_tokens, cells)
    for maps in record.layers:
        rollout.add(maps)
    return rollout


@pytest.mark.parametrize("cells", [7, long_rollout.POOLED_CELLS])
def test_streamed_rollout_equals_attention_rollout(encoder_record, decoder_record, cells):
    for record in (encoder_record, decoder_record):
        rollout = rolled_stream(record, cells)
        expected = attention_rollout(record)  # (L, Q, K) float64
        np.testing.assert_allclose(rollout.final, expected[-1], rtol=0, atol=1e-5)
        side = min(cells, record.num_tokens)
        assert rollout.raw_pooled.shape == rollout.rolled_pooled.shape == (
            record.num_layers, side, side)
        assert rollout.raw_pooled.dtype == rollout.final.dtype == np.float32
        np.testing.assert_allclose(rollout.raw_pooled, max_pool(head_average(record), cells),
                                   rtol=0, atol=1e-6)
        np.testing.assert_allclose(rollout.rolled_pooled, max_pool(expected, cells), rtol=0,
                                   atol=1e-5)
        assert rollout.nbytes == 2 * record.num_layers * side * side * 4
        assert not rollout.final.flags.writeable


def test_a_row_emptied_by_a_mask_rolls_out_as_the_identity():
    rng = np.random.default_rng(2)
    weights = np.tril(rng.random((3, 2, 6, 6)))
    weights[:, :, 4] = 0.0  # every head of every layer: row 4 emptied
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
    record = AttentionRecord(tokens=tuple("abcdef"), weights=weights, source="hand",
                             masks=("causal", "padding"))
    rollout = rolled_stream(record, 4)
    np.testing.assert_allclose(rollout.final, attention_rollout(record)[-1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(rollout.final[4], np.eye(6)[4], rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        rollout.add(np.ones((2, 5, 5), np.float32) / 5)


@pytest.mark.parametrize("lower", [True, False])
def test_products_by_blocks_equal_one_matrix_product(monkeypatch, lower):
    monkeypatch.setattr(long_rollout, "SMALLEST_SPLIT", 4)  # recurse down to 4 x 4 blocks
    rng = np.random.default_rng(4)
    step, product = (rng.random((37, 37), dtype=np.float32) for _ in range(2))
    if lower:
        step, product = np.tril(step), np.tril(product)
    expected = step.astype(np.float64) @ product
    multiply_into(step, product)
    np.testing.assert_allclose(product, expected, rtol=1e-5, atol=0)
    if lower:
        assert not np.triu(product, 1).any()


def test_streamed_decoder_layers_reduce_like_its_full_record(decoder_runner, decoder_record):
    rollout = RolloutStream(decoder_record.num_tokens, 8)

    def reduce(layer, maps):
        rollout.add(maps)
        return (detectors.layer_sentence_scores(maps, decoder_record.tokens, ()),
                layer_roles(maps, ()))

    streamed = stream(decoder_runner, REPEATS, None, reduce)
    assert streamed.tokens == decoder_record.tokens
    roles = np.stack([summary[1] for summary in streamed.summaries])
    np.testing.assert_allclose(roles, role_distribution(decoder_record), rtol=0, atol=1e-5)
    first = np.stack([summary[0]["first-token sink"] for summary in streamed.summaries])
    np.testing.assert_allclose(first, detectors.first_token_scores(decoder_record), atol=1e-5)
    np.testing.assert_allclose(rollout.final, attention_rollout(decoder_record)[-1], atol=1e-5)


def test_long_rollout_figures_draw_the_pooled_maps():
    count, cells = 40, 8
    tokens = ("<s>",) + tuple(f"w{i}" for i in range(1, count))
    rng = np.random.default_rng(6)
    raw, rolled = rng.random((cells, cells)), rng.random((cells, cells))
    left, right = long_rollout_figures(raw, rolled, count, 3, tokens)
    np.testing.assert_array_equal(np.asarray(left.data[0].z), raw)
    np.testing.assert_array_equal(np.asarray(right.data[0].z), rolled)
    assert left.layout.title.text.startswith("Raw attention · layer 3")
    assert right.layout.title.text.startswith("Rollout · layers 0 to 3")
    assert all("max-pooled" in figure.layout.title.text for figure in (left, right))
    hover = np.asarray(left.data[0].customdata)
    assert hover.shape == (cells, cells, 2)
    assert hover[0, 1, 0] == "0–4 (&lt;s&gt; … w4)" and hover[0, 1, 1] == "5–9 (w5 … w9)"
    assert left.layout.height == long_rollout.LONG_ROLLOUT_HEIGHT_PX
    exact, _ = long_rollout_figures(raw, rolled, cells, 0, tokens[:cells])
    assert "max-pooled" not in exact.layout.title.text
    assert np.asarray(exact.data[0].customdata)[2, 3, 1] == "3 (w3)"
    with pytest.raises(ValueError):
        long_rollout_figures(raw, rolled, count, 0, tokens[:5])

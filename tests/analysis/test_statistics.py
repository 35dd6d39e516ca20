"""The Statistics reducer against its definitions, one cell at a time, on inputs alone and padded
into one batch; labels by their rule; cross-attention maps; the order layers come in."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.reducer import reduce_record
from models.analysis.statistics import NUMERIC_COLUMNS, Statistics, head_statistics
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord
from tests.analysis import references
from tests.analysis.batches import LENGTHS, feed_batch, items

ATOL = 1e-5


def assert_like_reference(result, index: int, item) -> None:
    expected = references.statistics(item)
    for name in NUMERIC_COLUMNS:
        np.testing.assert_allclose(result.columns[name][index], expected[name], rtol=0,
                                   atol=ATOL, err_msg=f"item {index}, {name}")
    bits = references.even_spread_bits(item.count, item.causal)
    assert result.broad_bits[index] == pytest.approx(bits)
    labels = result.labels[index]
    for layer, head in np.ndindex(labels.shape):
        values = {name: expected[name][layer, head] for name in NUMERIC_COLUMNS}
        assert labels[layer, head] == references.label(values, bits), (index, layer, head)


@pytest.mark.parametrize("causal", [False, True])
def test_statistics_are_their_definitions_alone_and_in_a_padded_batch(causal):
    batch = items(causal)
    alone = [reduce_record(item.record, Statistics())[0] for item in batch]
    together = feed_batch(Statistics(), batch)
    assert together.num_items == len(LENGTHS)
    for index, item in enumerate(batch):
        assert_like_reference(alone[index], 0, item)
        assert_like_reference(together, index, item)
        for name in NUMERIC_COLUMNS:
            np.testing.assert_allclose(together.columns[name][index], alone[index].columns[name][0],
                                       rtol=0, atol=ATOL)
        assert (together.labels[index] == alone[index].labels[0]).all()
    assert len({label for result in alone for label in result.labels.ravel()}) > 1


def test_the_table_has_a_row_per_head_in_the_pages_order():
    item = items()[0]
    table = head_statistics(item.record)
    assert list(table.columns) == ["layer", "head", "label", *NUMERIC_COLUMNS]
    assert len(table) == 3 * 4 and table["layer"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    expected = references.statistics(item)
    np.testing.assert_allclose(table["previous"], expected["previous"].ravel(), atol=ATOL)


def test_a_cross_attention_map_keeps_only_what_applies():
    rng = np.random.default_rng(4)
    weights = rng.random((2, 3, 4, 6)) ** 2
    weights /= weights.sum(-1, keepdims=True)
    keys = ("the", "red", ",", "car", ".", "!")
    record = AttentionRecord(tokens=("<s>", "la", "voiture", "rouge"), key_tokens=keys,
                             weights=weights, source="hand", special_positions=(0,))
    (result,) = reduce_record(record, Statistics())
    for layer, head in np.ndindex(2, 3):
        w = weights[layer, head]
        entropy = np.mean([-sum(x * np.log2(x) for x in row) for row in w])
        assert result.columns["entropy_bits"][0, layer, head] == pytest.approx(entropy, abs=ATOL)
        assert result.columns["first"][0, layer, head] == pytest.approx(w[:, 0].mean(), abs=ATOL)
        assert result.columns["punctuation"][0, layer, head] == pytest.approx(
            np.mean([row[2] + row[4] + row[5] for row in w]), abs=ATOL)
    for name in ("mean_distance", "cls", "sep", "self", "previous", "next"):
        assert np.isnan(result.columns[name]).all()
    assert result.broad_bits[0] == pytest.approx(np.log2(6))


def test_a_batchs_layers_come_in_order_from_layer_0():
    item = items()[1]
    tokens = TokenBatch.of_record(item.record)
    maps = item.weights[:, None]  # (L, 1, H, n, n)
    reducer = Statistics()
    with pytest.raises(ValueError, match="in order"):
        reducer.add(1, maps[1], tokens)
    reducer.add(0, maps[0], tokens)
    with pytest.raises(ValueError, match="in order"):
        reducer.add(2, maps[2], tokens)
    reducer.add(1, maps[1], tokens)
    reducer.add(0, maps[0], tokens)  # a second batch, one layer in: the inputs differ
    with pytest.raises(ValueError, match="different numbers of layers"):
        reducer.result()

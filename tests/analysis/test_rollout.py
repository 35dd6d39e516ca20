"""The Rollout reducer against the product taken one cell at a time, exact and max-pooled, on
inputs alone and padded into one batch; by triangular blocks for causal maps; on real records."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis import rollout as rollout_module
from models.analysis.reducer import reduce_record
from models.analysis.rollout import (Rollout, attention_rollout, head_average, multiply_into,
                                     record_rollout)
from models.hooks.record import AttentionRecord
from tests.analysis import references
from tests.analysis.batches import LENGTHS, feed_batch, items

ATOL = 1e-5


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cells", [4, 128])
def test_rollout_is_its_definition_alone_and_in_a_padded_batch(causal, cells):
    batch = items(causal, seed=40)
    together = feed_batch(Rollout(cells, keep_layers=True), batch)
    assert together.num_tokens == LENGTHS
    for index, item in enumerate(batch):
        averages, rolled = references.rollout(item)
        (alone,) = reduce_record(item.record, Rollout(cells, keep_layers=True))
        for result, at in ((alone, 0), (together, index)):
            np.testing.assert_allclose(result.raw[at], averages, rtol=0, atol=ATOL)
            np.testing.assert_allclose(result.rolled[at], rolled, rtol=0, atol=ATOL)
            side = min(cells, item.count)
            assert result.raw_pooled[at].shape == result.rolled_pooled[at].shape == (3, side, side)
            assert result.raw_pooled[at].dtype == result.rolled[at].dtype == np.float32
            for layer in range(3):
                np.testing.assert_allclose(result.raw_pooled[at][layer],
                                           references.max_pooled(averages[layer], cells), atol=ATOL)
                np.testing.assert_allclose(result.rolled_pooled[at][layer],
                                           references.max_pooled(rolled[layer], cells), atol=ATOL)
                pooled = result.pooled(layer, at)
                assert pooled.rolled.num_queries == item.count
                np.testing.assert_array_equal(pooled.raw.values, result.raw_pooled[at][layer])
        if causal:
            assert not np.triu(together.rolled[index][-1], 1).any()


def test_the_record_functions_keep_every_layer_in_float64():
    item = items(seed=41)[1]
    averages, rolled = references.rollout(item)
    assert head_average(item.record).dtype == attention_rollout(item.record).dtype == np.float64
    np.testing.assert_allclose(head_average(item.record), averages, atol=1e-12)
    np.testing.assert_allclose(attention_rollout(item.record), rolled, atol=1e-12)
    np.testing.assert_allclose(attention_rollout(item.record).sum(-1), 1.0, atol=1e-12)
    exact = record_rollout(item.record).exact(1)
    np.testing.assert_array_equal(exact.rolled, attention_rollout(item.record)[1])
    with pytest.raises(ValueError, match="not kept"):
        reduce_record(item.record, Rollout())[0].exact(0)


def test_a_streamed_rollout_keeps_only_pooled_maps():
    item = items(seed=42)[0]
    (result,) = reduce_record(item.record, Rollout(cells=4))
    assert result.raw is None and result.rolled is None
    assert result.nbytes == 2 * 3 * 4 * 4 * 4  # (L, c, c) float32, twice


def test_a_row_emptied_by_a_mask_rolls_out_as_the_identity():
    rng = np.random.default_rng(2)
    weights = np.tril(rng.random((3, 2, 6, 6)))
    weights[:, :, 4] = 0.0  # every head of every layer: row 4 emptied
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
    record = AttentionRecord(tokens=tuple("abcdef"), weights=weights, source="hand",
                             masks=("causal", "padding"))
    (result,) = reduce_record(record, Rollout(4, keep_layers=True))
    item = references.Item(record.tokens, (), weights.astype(np.float32), True)
    np.testing.assert_allclose(result.rolled[0][-1], references.rollout(item)[1][-1], atol=1e-5)
    np.testing.assert_allclose(result.rolled[0][-1][4], np.eye(6)[4], rtol=0, atol=1e-5)


@pytest.mark.parametrize("lower", [True, False])
def test_products_by_blocks_equal_one_matrix_product(monkeypatch, lower):
    monkeypatch.setattr(rollout_module, "SMALLEST_SPLIT", 4)  # recurse down to 4 x 4 blocks
    rng = np.random.default_rng(4)
    step, product = (rng.random((37, 37), dtype=np.float32) for _ in range(2))
    if lower:
        step, product = np.tril(step), np.tril(product)
    expected = step.astype(np.float64) @ product
    told = product.copy()
    multiply_into(step, product)
    np.testing.assert_allclose(product, expected, rtol=1e-5, atol=0)
    if lower:
        assert not np.triu(product, 1).any()
        multiply_into(step, told, triangular=True)  # told: the upper blocks are not read
        np.testing.assert_allclose(told, expected, rtol=1e-5, atol=0)
        assert not np.triu(told, 1).any()


def test_a_real_decoders_rollout_by_blocks_is_its_definition(decoder_runner, monkeypatch):
    monkeypatch.setattr(rollout_module, "SMALLEST_SPLIT", 4)  # the triangular blocks are used
    record = decoder_runner.run("the cat saw the dog, and the dog saw the cat again.").record
    (result,) = reduce_record(record, Rollout(8, keep_layers=True))
    item = references.Item(record.tokens, (), record.weights[:4], True)
    averages, rolled = references.rollout(item)
    np.testing.assert_allclose(result.rolled[0][:4], rolled, rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.raw[0][:4], averages, rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.rolled[0][-1], attention_rollout(record)[-1], atol=ATOL)
    assert not np.triu(result.rolled[0][-1], 1).any()

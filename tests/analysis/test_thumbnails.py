"""Thumbnails and pooling: the largest value of every block, found one cell at a time; inputs
alone and padded into one batch; rectangular maps; each map's colour top."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.pooling import block_starts, max_pool, pool, tile_tops
from models.analysis.reducer import reduce_record
from models.analysis.thumbnails import Thumbnails, thumbnails
from models.hooks.record import AttentionRecord
from tests.analysis import references
from tests.analysis.batches import LENGTHS, feed_batch, items


@pytest.mark.parametrize("cells", [3, 64])
def test_thumbnails_are_block_maxima_alone_and_in_a_padded_batch(cells):
    batch = items(seed=50)
    together = feed_batch(Thumbnails(cells), batch)
    assert len(together) == len(LENGTHS)
    for index, item in enumerate(batch):
        (alone,) = reduce_record(item.record, Thumbnails(cells))
        side = min(cells, item.count)
        for result in (alone[0], together[index]):
            assert result.values.shape == (3, 4, side, side)
            assert result.num_queries == result.num_keys == item.count
            for layer, head in np.ndindex(3, 4):
                np.testing.assert_array_equal(
                    result.values[layer, head],
                    references.max_pooled(item.weights[layer, head], cells).astype(np.float32))
            assert result.query_starts.tolist() == [block[0] for block in
                                                    references.blocks(item.count, cells)]
            assert not np.shares_memory(result.values, item.weights)


def test_a_rectangular_maps_queries_and_keys_are_pooled_on_their_own():
    rng = np.random.default_rng(1)
    weights = rng.random((2, 1, 100, 3))
    weights /= weights.sum(-1, keepdims=True)
    record = AttentionRecord(tokens=tuple(f"q{i}" for i in range(100)), key_tokens=("a", "b", "c"),
                             weights=weights, source="hand")
    pooled = thumbnails(record, 64)
    assert pooled.values.shape == (2, 1, 64, 3) and pooled.is_pooled
    np.testing.assert_allclose(pooled.values[1, 0], references.max_pooled(weights[1, 0], 64),
                               atol=1e-7)
    assert pooled.key_starts.tolist() == [0, 1, 2]


def test_a_thin_diagonal_stays_visible_and_short_maps_are_not_resampled():
    eye = np.eye(512, dtype=np.float32)[None]
    pooled = max_pool(eye, 64)
    assert pooled.shape == (1, 64, 64)
    np.testing.assert_array_equal(np.diag(pooled[0]), 1.0)
    small = np.random.default_rng(0).random((2, 5, 5))
    np.testing.assert_array_equal(max_pool(small, 64), small)
    assert block_starts(5, 64).tolist() == [0, 1, 2, 3, 4]


def test_each_maps_top_is_a_high_percentile_of_its_nonzero_blocks():
    count = 1024
    weights = np.tril(np.ones((count, count), np.float32)) / np.arange(1, count + 1)[:, None]
    pooled = pool(weights, 256)
    values = pooled.values[pooled.values > 0]
    assert float(pooled.tops) == pytest.approx(np.percentile(values, 99))
    assert 1 / count < float(pooled.tops) < 0.1  # not set by the first rows' weight of 1
    stacked = np.stack([np.zeros((4, 4)), np.full((4, 4), 3.0)])
    assert tile_tops(stacked).tolist() == [1.0, 1.0]  # empty: 1; above 1: capped

"""Norm-based shares on [CLS] and [SEP] against their definition, one cell at a time, on inputs
alone and padded into one batch, and on a real encoder's value norms."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.norm_shares import NORM_COLUMNS, NormShares, with_norm_columns
from models.analysis.reducer import reduce_record
from models.analysis.statistics import head_statistics
from tests.analysis import references
from tests.analysis.batches import feed_batch, items

ATOL = 1e-5


def test_norm_shares_are_their_definition_alone_and_in_a_padded_batch():
    batch = items(seed=60)
    rng = np.random.default_rng(61)
    norms = [rng.random((3, 4, item.count)).astype(np.float32) + 0.1 for item in batch]
    together = feed_batch(NormShares(), batch, norms)
    for index, item in enumerate(batch):
        expected = references.norm_shares(item, norms[index])
        (alone,) = reduce_record(item.record, NormShares(), norms=norms[index])
        for name in NORM_COLUMNS:
            np.testing.assert_allclose(alone.columns[name][0], expected[name], rtol=0, atol=ATOL)
            np.testing.assert_allclose(together.columns[name][index], expected[name], rtol=0,
                                       atol=ATOL)
    with pytest.raises(ValueError, match="value norms"):
        reduce_record(batch[0].record, NormShares())


def test_a_records_norm_maps_give_the_same_columns(encoder_runner):
    trace = encoder_runner.run("Time flies like an arrow.")
    record, norms = trace.record, trace.value_norms  # (L, H, K)
    table = head_statistics(record)
    extended = with_norm_columns(table, record, record.weights * norms[:, :, None, :])
    (shares,) = reduce_record(record, NormShares(), norms=norms)
    item = references.Item(record.tokens, record.special_positions, record.weights[:2], False)
    expected = references.norm_shares(item, norms[:2])
    for name in NORM_COLUMNS:
        np.testing.assert_allclose(extended[name], shares.columns[name][0].ravel(), atol=ATOL)
        np.testing.assert_allclose(shares.columns[name][0][:2], expected[name], atol=ATOL)
    assert (extended["norm_cls"] < extended["cls"]).mean() > 0.9  # [CLS] weighs, moves little
    with pytest.raises(ValueError, match="do not fit"):
        with_norm_columns(table, record, record.weights[:1])

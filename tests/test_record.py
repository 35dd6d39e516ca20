"""The record validates itself."""

import numpy as np
import pytest

from models.record import AttentionRecord


def uniform(layers=2, heads=3, tokens=4):
    return np.full((layers, heads, tokens, tokens), 1.0 / tokens, dtype=np.float32)


def test_valid_record_exposes_sizes_and_is_read_only():
    record = AttentionRecord(tokens=("a", "b", "c", "d"), weights=uniform(), source="test")
    assert (record.num_layers, record.num_heads, record.num_tokens) == (2, 3, 4)
    assert record.segment_ids == (0, 0, 0, 0)
    assert not record.is_pair
    with pytest.raises(ValueError):
        record.weights[0, 0, 0, 0] = 1.0


@pytest.mark.parametrize("weights, tokens, message", [
    (np.ones((3, 3, 3)) / 3, ("a", "b", "c"), "4-D"),
    (uniform(tokens=4)[..., :3], ("a", "b", "c", "d"), "square"),
    (uniform(), ("a", "b", "c"), "3 tokens"),
    (uniform() * 2, ("a", "b", "c", "d"), "sums to 2"),
    (np.where(uniform() > 0, np.nan, 0), ("a", "b", "c", "d"), "NaN"),
])
def test_invalid_records_raise(weights, tokens, message):
    with pytest.raises(ValueError, match=message):
        AttentionRecord(tokens=tokens, weights=weights, source="test")


def test_masked_record_may_hold_empty_rows_but_unmasked_may_not():
    weights = uniform()
    weights[:, :, 1] = 0.0
    with pytest.raises(ValueError, match="sums to 0"):
        AttentionRecord(tokens=tuple("abcd"), weights=weights, source="test")
    record = AttentionRecord(tokens=tuple("abcd"), weights=weights, source="t", masks=("span",))
    assert record.masks == ("span",)


def test_unknown_mask_and_bad_segments_raise():
    with pytest.raises(ValueError, match="unknown masks"):
        AttentionRecord(tokens=tuple("abcd"), weights=uniform(), source="t", masks=("magic",))
    with pytest.raises(ValueError, match="segment ids"):
        AttentionRecord(tokens=tuple("abcd"), weights=uniform(), source="t", segment_ids=(0, 1))

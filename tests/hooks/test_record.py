"""The record validates itself."""

import numpy as np
import pytest

from models.hooks.record import AttentionRecord


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


def softmax_layers(layers=3, heads=2, tokens=5, seed=0):
    scores = np.random.default_rng(seed).normal(size=(layers, heads, tokens, tokens))
    weights = np.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_a_record_built_from_layers_keeps_them_uncopied_until_every_layer_is_asked_for():
    weights = softmax_layers()
    layers = [weights[index].copy() for index in range(len(weights))]
    record = AttentionRecord(tuple("abcde"), source="t", layers=layers)
    assert all(np.shares_memory(kept, given) for kept, given in zip(record.layers, layers))
    assert "_stacked" not in record.__dict__
    assert record.nbytes == weights.nbytes
    np.testing.assert_array_equal(record.head(2, 1), weights[2, 1])
    stacked = record.weights  # the first view that needs (L, H, Q, K) stacks them once
    np.testing.assert_array_equal(stacked, weights)
    assert record.weights is stacked
    assert all(np.shares_memory(layer, stacked) for layer in record.layers)
    assert record.nbytes == weights.nbytes  # the layers are views of the stack: the same bytes
    with pytest.raises(ValueError):
        record.layers[0][0, 0, 0] = 1.0


def test_a_record_from_layers_is_validated_layer_by_layer():
    weights = softmax_layers()
    weights[2, 1, 3] *= 2
    with pytest.raises(ValueError, match=r"layer 2, head 1, query 3\) sums to 2"):
        AttentionRecord(tuple("abcde"), source="t", layers=list(weights))
    with pytest.raises(ValueError, match="4-D"):
        AttentionRecord(tuple("abcde"), source="t", layers=[weights[0], weights[1][:, :4, :4]])
    with pytest.raises(ValueError, match="needs its weights"):
        AttentionRecord(tuple("abcde"), source="t")


def test_replacing_the_weights_of_a_record_built_from_layers_uses_the_new_weights():
    from dataclasses import replace

    record = AttentionRecord(tuple("abcde"), source="t", layers=list(softmax_layers()))
    row = replace(record, tokens=("c",), key_tokens=record.tokens,
                  weights=record.weights[:, :, 2:3], segment_ids=())
    assert (row.num_layers, row.num_tokens, row.num_keys) == (3, 1, 5)
    np.testing.assert_array_equal(row.head(1, 0)[0], record.head(1, 0)[2])
    assert replace(record, source="u").layers == record.layers

"""The Roles reducer against the role of every key, one cell at a time, on inputs alone and
padded into one batch, and on real encoder and decoder records."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.reducer import reduce_record
from models.analysis.roles import ROLES, Roles, role_distribution
from models.hooks.record import AttentionRecord
from tests.analysis import references
from tests.analysis.batches import feed_batch, items

ATOL = 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_roles_are_their_definition_alone_and_in_a_padded_batch(causal):
    assert ROLES == references.ROLE_NAMES
    batch = items(causal, seed=30)
    together = feed_batch(Roles(), batch)
    assert together.shares.shape == (3, 3, 4, len(ROLES))
    for index, item in enumerate(batch):
        expected = references.roles(item)
        np.testing.assert_allclose(role_distribution(item.record), expected, rtol=0, atol=ATOL)
        np.testing.assert_allclose(together.of(index), expected, rtol=0, atol=ATOL)
        if causal:
            assert together.of(index)[..., ROLES.index("later")].max() == 0.0


@pytest.mark.parametrize("special", [(), (0,), (3, 4), (0, 5, 8), (8,)])
def test_special_tokens_take_precedence_and_emptied_rows_are_left_out(special):
    rng = np.random.default_rng(5)
    weights = rng.random((2, 3, 9, 9)) ** 2
    weights[1, 2, 4] = 0.0  # emptied rows are left out
    weights[0, 0, :3] = 0.0
    weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
    item = references.Item(tuple("abcdefghi"), special, weights.astype(np.float32), False)
    np.testing.assert_allclose(role_distribution(item.record), references.roles(item), rtol=0,
                               atol=ATOL)


def test_roles_of_real_records_sum_to_one(encoder_runner, decoder_runner):
    text = "the cat saw the dog , and the dog saw the cat ."
    encoder = encoder_runner.run(text, "a cat , a dog .").record
    decoder = decoder_runner.run(text).record
    for record, layers in ((encoder, [0, 5]), (decoder, [0, 29])):
        (shares,) = reduce_record(record, Roles())
        item = references.Item(record.tokens, record.special_positions, record.weights[layers],
                               "causal" in record.masks)
        np.testing.assert_allclose(shares.of()[layers], references.roles(item), atol=ATOL)
        np.testing.assert_allclose(shares.of().sum(-1), 1.0, atol=1e-5)
    assert role_distribution(decoder)[..., ROLES.index("later")].max() == 0.0  # causal
    assert role_distribution(encoder)[..., ROLES.index("other special")].max() > 0.1


def test_roles_need_square_maps():
    record = AttentionRecord(tokens=("a", "b"), key_tokens=("x", "y", "z"),
                             weights=np.full((1, 1, 2, 3), 1 / 3), source="hand")
    with pytest.raises(ValueError, match="square"):
        role_distribution(record)

"""The one pass over a layer's maps (models.analysis.layer_pass), read in blocks of query rows as a
long input's layer is: with blocks of one, a few and many rows (boundaries that cut the
thumbnail's pooled blocks and the diagonal's corners), a Summary's statistics, roles, thumbnails,
rollout, detectors and norm-based shares are each number's definition, one cell at a time
(tests/analysis/references.py), for inputs padded into one batch, causal or not."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis import layer_pass
from models.analysis.norm_shares import NORM_COLUMNS
from models.analysis.roles import ROLES
from models.analysis.statistics import NUMERIC_COLUMNS
from models.analysis.summary import Summary
from tests.analysis import references
from models.analysis.token_batch import TokenBatch
from tests.analysis.batches import feed_batch

ATOL = 1e-5
LENGTHS = (23, 17, 20)  # padded to 23
HEADS = 4
THUMBNAIL_CELLS = 6  # pooled blocks of 3-4 rows: block boundaries fall inside them
ROLLOUT_CELLS = 5


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rows_per_block", [1, 3, 7, 100])
def test_a_summary_read_in_blocks_of_rows_is_every_numbers_definition(monkeypatch, causal,
                                                                      rows_per_block):
    # Blocks of `rows_per_block` query rows of every input at once.
    monkeypatch.setattr(layer_pass, "BLOCK_WEIGHTS",
                        rows_per_block * len(LENGTHS) * HEADS * max(LENGTHS))
    batch = [references.random_item(count, 70 + index, causal, heads=HEADS)
             for index, count in enumerate(LENGTHS)]
    rng = np.random.default_rng(71)
    norms = [rng.random((3, HEADS, item.count)).astype(np.float32) + 0.1 for item in batch]
    result = feed_batch(Summary(THUMBNAIL_CELLS, ROLLOUT_CELLS, exact_rollout=True), batch, norms)
    for index, item in enumerate(batch):
        one = result.item(index)
        statistics = references.statistics(item)
        for name in NUMERIC_COLUMNS:
            np.testing.assert_allclose(one.head_statistics.columns[name][0], statistics[name],
                                       rtol=0, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(one.roles, references.roles(item), rtol=0, atol=ATOL)
        if causal:
            assert one.roles[..., ROLES.index("later")].max() == 0.0
        for layer, head in np.ndindex(3, HEADS):
            np.testing.assert_array_equal(
                one.pooled[layer, head],
                references.max_pooled(item.weights[layer, head], THUMBNAIL_CELLS))
        averages, rolled = references.rollout(item)
        np.testing.assert_allclose(one.rollout.raw[0], averages, rtol=0, atol=ATOL)
        np.testing.assert_allclose(one.rollout.rolled[0], rolled, rtol=0, atol=ATOL)
        for layer in range(3):
            np.testing.assert_allclose(one.rollout_rolled[layer],
                                       references.max_pooled(rolled[layer], ROLLOUT_CELLS),
                                       atol=ATOL)
        detectors = references.detector_scores(item)
        for name in one.detectors:  # the sentence detectors
            expected = detectors[name]
            if isinstance(expected, str):
                assert isinstance(one.detectors[name], str)
            else:
                np.testing.assert_allclose(one.detector_scores(name), expected, rtol=0,
                                           atol=ATOL, err_msg=name)
        shares = references.norm_shares(item, norms[index])
        for name in NORM_COLUMNS:
            np.testing.assert_allclose(one.norm_shares.columns[name][0], shares[name], rtol=0,
                                       atol=ATOL, err_msg=name)


def test_parts_of_two_reducers_are_read_in_one_pass_and_must_agree():
    both = layer_pass.Parts(statistics=True, thumbnail_cells=4) | layer_pass.Parts(norms=True)
    assert both == layer_pass.Parts(statistics=True, thumbnail_cells=4, norms=True)
    with pytest.raises(ValueError, match="thumbnail_cells"):
        layer_pass.Parts(thumbnail_cells=4) | layer_pass.Parts(thumbnail_cells=8)


def _cut_rows(weights: np.ndarray, item, norms: np.ndarray) -> dict[str, np.ndarray]:
    """One input's rows by their definitions, head by head and row by row over its real tokens
    (numpy, float64): what the batch's pass must give for it."""
    heads, count, _ = weights.shape
    special = list(item.special)
    punctuation = [j for j, t in enumerate(item.tokens)
                   if t in references.PUNCTUATION and j not in special]
    copies = [[j for j in range(i) if i not in special and j not in special
               and item.tokens[j] == item.tokens[i]] for i in range(count)]
    out = {name: np.zeros((heads, count)) for name in
           ("row_sums", "entropy", "distance", "left", "right", "norm_sums", "equal_tokens")}
    out["shares"] = np.zeros((heads, count, 3))
    for h in range(heads):
        for i in range(count):
            w = weights[h, i].astype(np.float64)
            out["row_sums"][h, i] = w.sum()
            out["entropy"][h, i] = sum(x * np.log(x) for x in w if x > 0)
            out["distance"][h, i] = sum(w[j] * abs(i - j) for j in range(count))
            out["left"][h, i], out["right"][h, i] = w[:i].sum(), w[i + 1:].sum()
            out["norm_sums"][h, i] = float(w @ norms[h].astype(np.float64))
            out["equal_tokens"][h, i] = w[copies[i]].sum()
            out["shares"][h, i] = (w[special[0]], w[special[1:]].sum(), w[punctuation].sum())
    out["head_sum"] = weights.astype(np.float64).sum(0)
    out["thumbnail"] = np.stack([references.max_pooled(weights[h], THUMBNAIL_CELLS)
                                 for h in range(heads)])
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rows_per_block", [1, 4, 100])
def test_the_batch_pass_gives_each_input_its_own_rows(monkeypatch, causal, rows_per_block):
    """Every input at once, garbage in the padded keys, queries and norms: each input's rows
    are the ones its own cut maps give by definition, and the pass of that input alone."""
    monkeypatch.setattr(layer_pass, "BLOCK_WEIGHTS",
                        rows_per_block * len(LENGTHS) * HEADS * max(LENGTHS))
    batch = [references.random_item(count, 80 + index, causal, heads=HEADS)
             for index, count in enumerate(LENGTHS)]
    tokens = TokenBatch.padded([TokenBatch.of_record(item.record) for item in batch])
    maps = references.padded_maps(batch, layer=1)  # (B, H, T, T)
    norms = np.random.default_rng(81).random((len(batch), HEADS, max(LENGTHS)),
                                             dtype=np.float32) + 0.1  # (B, H, T)
    parts = layer_pass.Parts(statistics=True, sides=True, thumbnail_cells=THUMBNAIL_CELLS,
                             head_sum=np.dtype(np.float64), norms=True, equal_tokens=True)
    rows = layer_pass.measure_batch(maps, tokens, parts, norms)
    assert len(rows) == len(batch)
    for index, item in enumerate(batch):
        count = item.count
        expected = _cut_rows(item.weights[1], item, norms[index, :, :count])
        alone = layer_pass.measure(np.ascontiguousarray(maps[index, :, :count, :count]),
                                   tokens.item(index), parts, norms[index, :, :count])
        for name, values in expected.items():
            for found in (getattr(rows[index], name), getattr(alone, name)):
                assert found.shape == values.shape, name
                np.testing.assert_allclose(found, values, rtol=0, atol=ATOL, err_msg=name)
        assert rows[index].left.max() <= 1 + ATOL
        if causal:
            assert np.abs(rows[index].right).max() <= ATOL


@pytest.mark.parametrize("causal", [False, True])
def test_buffers_kept_over_a_batchs_layers_leave_every_layers_rows_its_own(monkeypatch, causal):
    """The batch's columns, key weights and scratch are made at its first layer and kept: each
    layer's rows are still its own cut maps' by definition, and a layer's rows are not changed
    by the next layer's pass."""
    monkeypatch.setattr(layer_pass, "BLOCK_WEIGHTS", 7 * len(LENGTHS) * HEADS * max(LENGTHS))
    batch = [references.random_item(count, 90 + index, causal, heads=HEADS)
             for index, count in enumerate(LENGTHS)]
    tokens = TokenBatch.padded([TokenBatch.of_record(item.record) for item in batch])
    rng = np.random.default_rng(91)
    parts = layer_pass.Parts(statistics=True, sides=True, head_sum=np.dtype(np.float64),
                             norms=True, equal_tokens=True)
    buffers: dict = {}
    found = []
    for layer in range(2):
        maps = references.padded_maps(batch, layer=layer)  # (B, H, T, T), garbage padding
        norms = rng.random((len(batch), HEADS, max(LENGTHS)), dtype=np.float32) + 0.1
        rows = layer_pass.measure_batch(maps, tokens, parts, norms, buffers)
        found.append((rows, norms, [{name: np.array(getattr(rows[index], name)) for name in
                                     ("row_sums", "entropy", "distance", "norm_sums",
                                      "equal_tokens")} for index in range(len(batch))]))
    assert "pass" in buffers[0]
    for layer, (rows, norms, copies) in enumerate(found):
        for index, item in enumerate(batch):
            expected = _cut_rows(item.weights[layer], item, norms[index, :, :item.count])
            for name, values in copies[index].items():
                np.testing.assert_allclose(values, expected[name], rtol=0, atol=ATOL,
                                           err_msg=name)
                if layer == 0:  # not overwritten by layer 1's pass
                    np.testing.assert_array_equal(getattr(rows[index], name), values)

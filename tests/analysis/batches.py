"""Feeding hand-made items to a reducer alone and as one padded batch (see references.py)."""

from __future__ import annotations

import numpy as np

from models.analysis.token_batch import TokenBatch
from tests.analysis.references import Item, padded_maps, random_item

LENGTHS = (9, 5, 7)  # padded to 9: the second and third items carry padding


def items(causal: bool = False, seed: int = 0) -> list[Item]:
    return [random_item(count, seed + index, causal) for index, count in enumerate(LENGTHS)]


def feed_batch(reducer, batch: list[Item], norms: list[np.ndarray] | None = None):
    """Every layer of the items as one batch padded on the right, garbage in the padding; norms:
    per item (L, H, n) value norms, or None. Returns the reducer's result."""
    tokens = TokenBatch.padded([TokenBatch.of_record(item.record) for item in batch])
    width = tokens.real.shape[1]
    for layer in range(batch[0].weights.shape[0]):
        layer_norms = None
        if norms is not None:
            layer_norms = np.random.default_rng(layer).random(
                (len(batch), batch[0].weights.shape[1], width)).astype(np.float32)
            for index, item_norms in enumerate(norms):
                layer_norms[index, :, :item_norms.shape[-1]] = item_norms[layer]
        reducer.add(layer, padded_maps(batch, layer), tokens, layer_norms)
    return reducer.result()

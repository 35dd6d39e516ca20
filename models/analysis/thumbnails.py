"""Every head's thumbnail: each layer's maps max-pooled to at most `cells` x `cells` blocks
(models.analysis.pooling), light enough to tile every layer and head of a 4,096-token input into
one mosaic. The exact values stay in the record (or are computed again for one head).

Dimensions: B batch, L layers, H heads, Q/K query/key positions, q/k pooled blocks.
"""

from __future__ import annotations

import numpy as np

from models.analysis.pooling import PooledMap, max_pool, pooled_map
from models.analysis.reducer import LayerLog, Reducer, reduce_record
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord

THUMBNAIL_CELLS = 64


class Thumbnails(Reducer):
    """Each input's heads max-pooled layer by layer; `result()` is one PooledMap (L, H, q, k)
    per input seen."""

    def __init__(self, cells: int = THUMBNAIL_CELLS):
        if cells < 1:
            raise ValueError("a thumbnail needs at least one cell")
        self.cells = cells
        self._log: LayerLog[np.ndarray] = LayerLog()
        self._sizes: list[tuple[int, int]] = []  # (queries, keys) per input

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        pooled = []
        for index in range(tokens.batch_size):
            item = tokens.cut(maps, index)  # (H, Q, K)
            thumbnail = max_pool(item, self.cells)  # (H, q, k)
            pooled.append(thumbnail.copy() if thumbnail is item else thumbnail)  # never a view
        self._log.put(layer, pooled)
        if layer == 0:
            self._sizes.extend((int(q), int(k)) for q, k in
                               zip(tokens.query_lengths, tokens.lengths))

    def result(self) -> tuple[PooledMap, ...]:
        return tuple(pooled_map(np.stack(layers), queries, keys, self.cells)
                     for layers, (queries, keys) in zip(self._log.items(), self._sizes))


def thumbnails(record: AttentionRecord, cells: int = THUMBNAIL_CELLS) -> PooledMap:
    """(L, H, q, k) every head of `record` max-pooled: the Thumbnails reducer over its layers."""
    (pooled,) = reduce_record(record, Thumbnails(cells))
    return pooled[0]

"""Every head's thumbnail: each layer's maps max-pooled to at most `cells` x `cells` blocks
(models.analysis.pooling), light enough to tile every layer and head of a 4,096-token input into
one mosaic. The exact values stay in the record (or are computed again for one head).

Dimensions: B batch, L layers, H heads, Q/K query/key positions, q/k pooled blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.analysis.layer_pass import LayerRows, Parts
from models.analysis.pooling import PooledMap, pooled_map
from models.analysis.reducer import LayerLog, PassReducer, reduce_record
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord

THUMBNAIL_CELLS = 64


class Thumbnails(PassReducer):
    """Each input's heads max-pooled layer by layer; `result()` is one PooledMap (L, H, q, k)
    per input seen."""

    def __init__(self, cells: int = THUMBNAIL_CELLS):
        if cells < 1:
            raise ValueError("a thumbnail needs at least one cell")
        self.cells = cells
        self._log: LayerLog[np.ndarray] = LayerLog()
        self._sizes: list[tuple[int, int]] = []  # (queries, keys) per input

    @property
    def parts(self) -> Parts:
        return Parts(thumbnail_cells=self.cells)

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: Sequence[LayerRows], norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        self._log.put(layer, [measured.thumbnail for measured in rows])  # (H, q, k) each
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

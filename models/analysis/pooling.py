"""Maps too large to draw, max-pooled to blocks: a block keeps its largest value, so thin
diagonals and sink columns stay visible at any length.

`max_pool` cuts each axis longer than `cells` into `cells` near-equal blocks (queries and keys on
their own, so a rectangular cross-attention map stays rectangular). A `PooledMap` is what a view
draws: the pooled values, the first position of each block (for the block's label), and each
map's colour top (`tile_tops`: over thousands of keys most weights are small, and the first rows
of a causal map, one key and weight 1, would set any maximum-based scale).

Dimensions: Q/K query/key positions, q/k pooled blocks (at most `cells` each).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

HEAD_CELLS = 256  # one head of a long input drawn whole: at most this many blocks a side
TOP_PERCENTILE = 99


def block_edges(size: int, blocks: int) -> np.ndarray:
    """Start index of each of `blocks` near-equal blocks covering range(size)."""
    return np.linspace(0, size, blocks + 1).astype(int)[:-1]


def block_starts(size: int, cells: int) -> np.ndarray:
    """(min(size, cells),) the first position of each block `max_pool` makes of `size`."""
    return block_edges(size, cells) if size > cells else np.arange(size)


def max_pool(maps: np.ndarray, cells: int) -> np.ndarray:
    """(..., Q, K) -> (..., min(Q, cells), min(K, cells)): the maximum of each block. The query
    blocks are pooled first, each the elementwise maximum of a block's whole rows (a fast pass
    over contiguous memory; numpy's reduceat along the rows is many times slower), then the key
    blocks of the few rows left; a maximum is exact in any order. An axis no longer than
    `cells` is kept as it is (the result may then be `maps`)."""
    queries, keys = maps.shape[-2:]
    if queries > cells:
        edges = block_edges(queries, cells)
        rows = np.empty((*maps.shape[:-2], cells, keys), dtype=maps.dtype)  # (..., q, K)
        for block, (start, end) in enumerate(zip(edges, [*edges[1:], queries])):
            np.max(maps[..., start:end, :], axis=-2, out=rows[..., block, :])
        maps = rows
    if keys > cells:
        maps = np.maximum.reduceat(maps, block_edges(keys, cells), axis=-1)  # (..., q, k)
    return maps


def tile_tops(pooled: np.ndarray, percentile: float = TOP_PERCENTILE) -> np.ndarray:
    """(...) each pooled (..., q, k) map's colour top: the `percentile` of its non-zero blocks,
    at most 1 (1 for an empty map), so a few saturated blocks do not set it."""
    flat = pooled.reshape(*pooled.shape[:-2], -1).astype(np.float64)  # (..., q*k)
    masked = np.where(flat > 0, flat, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty map: an all-NaN slice
        tops = np.nanpercentile(masked, percentile, axis=-1)
    return np.where(np.isfinite(tops) & (tops > 0), np.minimum(tops, 1.0), 1.0)


@dataclass(frozen=True)
class PooledMap:
    """Max-pooled maps (..., q, k) of `num_queries` x `num_keys` positions: block i covers
    positions query_starts[i] .. query_starts[i + 1] - 1 (the last block runs to the end), and
    `tops` (...) is each map's colour top (`tile_tops`)."""

    values: np.ndarray
    query_starts: np.ndarray  # (q,)
    key_starts: np.ndarray  # (k,)
    num_queries: int
    num_keys: int
    tops: np.ndarray

    @property
    def is_pooled(self) -> bool:
        """True when a block covers more than one position."""
        return self.values.shape[-2] < self.num_queries or self.values.shape[-1] < self.num_keys

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.tops.nbytes


def pooled_map(values: np.ndarray, num_queries: int, num_keys: int, cells: int) -> PooledMap:
    """The PooledMap of maps already pooled with `max_pool(maps, cells)`."""
    starts = block_starts(num_queries, cells), block_starts(num_keys, cells)
    if values.shape[-2:] != (len(starts[0]), len(starts[1])):
        raise ValueError(f"pooled maps {values.shape} are not {num_queries} x {num_keys} "
                         f"positions pooled to at most {cells} blocks")
    return PooledMap(values=values, query_starts=starts[0], key_starts=starts[1],
                     num_queries=num_queries, num_keys=num_keys, tops=tile_tops(values))


def pool(maps: np.ndarray, cells: int = HEAD_CELLS) -> PooledMap:
    """(..., Q, K) maps max-pooled to at most `cells` blocks a side, as a PooledMap (its values
    never share memory with `maps`)."""
    pooled = max_pool(maps, cells)
    return pooled_map(pooled.copy() if pooled is maps else pooled, *maps.shape[-2:], cells)

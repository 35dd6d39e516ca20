"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Raw attention of one layer says how a position mixes the previous layer's vectors, but those
vectors are already mixtures. Rollout follows the mixing down through the layers: per layer the
heads' mean A_l, with the residual connection counted as (A_l + I) / 2 and each row
renormalised (a row a mask emptied becomes the identity's), multiplied from the first layer up:
rollout_l = Â_l · rollout_(l-1).

The reducer folds each layer's maps into a running product as they arrive, so one (T, T) product
and the layer's step are all that is alive; per layer it keeps the head average and the product
max-pooled to `cells` blocks a side, and, when asked (`keep_layers`, for inputs short enough to
draw whole), both exactly. A causal model's steps are lower-triangular, and so is their
product: its blocks above the diagonal are then never multiplied (about a third of the work of
a full product remains).

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions (Q == K == T),
c pooled cells a side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from models.analysis.pooling import PooledMap, max_pool, pooled_map
from models.analysis.reducer import LayerLog, Reducer, reduce_record
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord

# The rollout's maps are kept for every layer (the page's layer slider): 128 blocks a side, about
# 4 px each in the page's half-width columns at 1280 px, and 4 MB for all 30 layers of SmolLM2.
ROLLOUT_CELLS = 128
SMALLEST_SPLIT = 512  # products of at most this many rows are taken whole


def multiply_into(step: np.ndarray, product: np.ndarray) -> None:
    """product <- step @ product, in place, for square (n, n) matrices.

    When the blocks above the diagonal of both halves are zero (lower-triangular matrices, as a
    causal model's are), the product is taken by blocks, C21 = A21 B11 + A22 B21 and
    C11, C22 recursively, C12 = 0: no full-size temporary and about a third of the arithmetic.
    Otherwise it is one matrix product.
    """
    size = step.shape[0]
    half = size // 2
    if size <= SMALLEST_SPLIT or step[:half, half:].any() or product[:half, half:].any():
        product[...] = step @ product  # (n, n)
        return
    lower = step[half:, :half] @ product[:half, :half]  # (n - h, h), before B11 and B21 change
    lower += step[half:, half:] @ product[half:, :half]
    product[half:, :half] = lower
    multiply_into(step[half:, half:], product[half:, half:])
    multiply_into(step[:half, :half], product[:half, :half])


def head_mean(maps: np.ndarray, dtype=np.float32) -> np.ndarray:
    """(Q, K) the mean of one input's (H, Q, K) maps over its heads, in `dtype`."""
    mean = maps.sum(axis=0, dtype=dtype)  # (Q, K)
    mean /= maps.shape[0]
    return mean


def residual_step(mean: np.ndarray) -> np.ndarray:
    """Â = rownorm((A + I) / 2) from the heads' mean A (Q, K), in place: + I, then each row
    divided by its sum (the halving cancels in the normalisation)."""
    mean.flat[::mean.shape[0] + 1] += 1.0  # + I
    mean /= mean.sum(axis=-1, keepdims=True)
    return mean


class RolloutLayer(NamedTuple):
    """One layer's head-averaged map and the rollout up to it (arrays or PooledMaps)."""

    raw: np.ndarray | PooledMap
    rolled: np.ndarray | PooledMap


@dataclass(frozen=True)
class RolloutMaps:
    """Per input seen: each layer's head average and the rollout up to it, max-pooled
    (`raw_pooled`, `rolled_pooled`: (L, c, c)), and exact when kept (`raw`, `rolled`:
    (L, Q, K), else None); `num_tokens` each input's length, `cells` the pooling."""

    raw_pooled: tuple[np.ndarray, ...]
    rolled_pooled: tuple[np.ndarray, ...]
    num_tokens: tuple[int, ...]
    cells: int
    raw: tuple[np.ndarray, ...] | None = None
    rolled: tuple[np.ndarray, ...] | None = None

    def pooled(self, layer: int, item: int = 0) -> RolloutLayer:
        """Input `item`'s layer `layer`, as two PooledMaps (c, c)."""
        count = self.num_tokens[item]
        return RolloutLayer(pooled_map(self.raw_pooled[item][layer], count, count, self.cells),
                            pooled_map(self.rolled_pooled[item][layer], count, count,
                                       self.cells))

    def exact(self, layer: int, item: int = 0) -> RolloutLayer:
        """Input `item`'s layer `layer`, exact (Q, K) maps (kept only with `keep_layers`)."""
        if self.raw is None or self.rolled is None:
            raise ValueError("the exact rollout was not kept (Rollout(keep_layers=True) keeps it)")
        return RolloutLayer(self.raw[item][layer], self.rolled[item][layer])

    @property
    def nbytes(self) -> int:
        kept = [*self.raw_pooled, *self.rolled_pooled, *(self.raw or ()), *(self.rolled or ())]
        return sum(array.nbytes for array in kept)


class Rollout(Reducer):
    """The rollout of each input, layer by layer in order; `result()` is RolloutMaps. The
    product is kept in `dtype` (float32: a 4,096-token product is 64 MB). Square maps only."""

    def __init__(self, cells: int = ROLLOUT_CELLS, keep_layers: bool = False,
                 dtype=np.float32):
        if cells < 1:
            raise ValueError("a rollout needs at least one cell")
        self.cells = cells
        self.keep_layers = keep_layers
        self.dtype = np.dtype(dtype)
        self._pooled: LayerLog[tuple[np.ndarray, np.ndarray]] = LayerLog()
        self._exact: LayerLog[tuple[np.ndarray, np.ndarray]] = LayerLog()
        self._products: list[np.ndarray] = []  # (Q, K) per input of the batch being added
        self._num_tokens: list[int] = []

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        if tokens.rectangular:
            raise ValueError("rollout needs square maps (self-attention)")
        if layer == 0:
            self._products = [None] * tokens.batch_size
            self._num_tokens.extend(int(count) for count in tokens.lengths)
        elif len(self._products) != tokens.batch_size:
            raise ValueError("a batch's layers are added in order, from layer 0")
        pooled, exact = [], []
        for index in range(tokens.batch_size):
            step = head_mean(tokens.cut(maps, index), self.dtype)  # (Q, K)
            raw = self._pooled_copy(step)
            kept_raw = step.copy() if self.keep_layers else None
            residual_step(step)
            product = self._products[index]
            if product is None:
                product = self._products[index] = step
            else:
                multiply_into(step, product)
            pooled.append((raw, self._pooled_copy(product)))
            if self.keep_layers:
                exact.append((kept_raw, product.copy()))
        self._pooled.put(layer, pooled)
        if self.keep_layers:
            self._exact.put(layer, exact)

    def _pooled_copy(self, matrix: np.ndarray) -> np.ndarray:
        """(c, c) float32 `max_pool(matrix, cells)`, never a view of `matrix`."""
        pooled = max_pool(matrix, self.cells)
        return pooled.astype(np.float32, copy=pooled is matrix)

    def result(self) -> RolloutMaps:
        pooled = self._pooled.items()
        exact = self._exact.items() if self.keep_layers else None
        return RolloutMaps(
            raw_pooled=tuple(np.stack([raw for raw, _ in layers]) for layers in pooled),
            rolled_pooled=tuple(np.stack([rolled for _, rolled in layers]) for layers in pooled),
            num_tokens=tuple(self._num_tokens), cells=self.cells,
            raw=None if exact is None else tuple(np.stack([raw for raw, _ in layers])
                                                 for layers in exact),
            rolled=None if exact is None else tuple(np.stack([rolled for _, rolled in layers])
                                                    for layers in exact))


def record_rollout(record: AttentionRecord, cells: int = ROLLOUT_CELLS) -> RolloutMaps:
    """The rollout of `record` with every layer kept exactly, in float64: the Rollout reducer
    over its layers."""
    (rollout,) = reduce_record(record, Rollout(cells, keep_layers=True, dtype=np.float64))
    return rollout


def head_average(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K) float64: each layer's attention averaged over its heads."""
    return record_rollout(record).raw[0]


def attention_rollout(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K) float64: rollout[l] = Â_l ... Â_1, the flow from the input tokens to layer l."""
    return record_rollout(record).rolled[0]


def residual_attention(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K) float64: each layer's step Â_l = rownorm((A_l + I) / 2) (a row emptied by a
    mask becomes the identity's), the steps the Rollout reducer multiplies."""
    return np.stack([residual_step(head_mean(maps, np.float64)) for maps in record.layers])

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
product: its blocks above the diagonal are then never multiplied (about a sixth of the work of
a full product remains). The heads' mean comes from the one pass over the layer's maps
(models.analysis.layer_pass); the products run in torch, on the forward's threads.

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions (Q == K == T),
c pooled cells a side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from models.analysis.layer_pass import LayerRows, Parts, as_tensor
from models.analysis.pass_parts import pooled_rows
from models.analysis.pooling import PooledMap, pooled_map
from models.analysis.reducer import LayerLog, PassReducer, reduce_record
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord

# The rollout's maps are kept for every layer (the page's layer slider): 128 blocks a side, about
# 4 px each in the page's half-width columns at 1280 px, and 4 MB for all 30 layers of SmolLM2.
ROLLOUT_CELLS = 128
SMALLEST_SPLIT = 256  # products of at most this many rows are taken whole


def multiply_into(step: np.ndarray | torch.Tensor, product: np.ndarray | torch.Tensor,
                  triangular: bool = False) -> None:
    """product <- step @ product, in place, for square (n, n) matrices (numpy arrays or tensors),
    in torch with its threads.

    When the blocks above the diagonal of both halves are zero (lower-triangular matrices, as a
    causal model's are), the product is taken by blocks: C21 = A21 B11 + A22 B21, each a full
    block times a triangular one (`_times_lower`, `_lower_times`: half a full product each),
    and C11, C22 recursively, C12 = 0: about a sixth of a full product's arithmetic. Otherwise
    it is one matrix product. `triangular`: both are known to be lower-triangular (a causal map's
    cells above the diagonal are zero by construction), so their upper blocks are not read.
    """
    step, product = as_tensor(step), as_tensor(product)
    size = step.shape[0]
    half = size // 2
    if size <= SMALLEST_SPLIT or not triangular and (step[:half, half:].any() or
                                                     product[:half, half:].any()):
        product.copy_(step @ product)  # (n, n)
        return
    lower = torch.empty(size - half, half, dtype=product.dtype)  # (n - h, h)
    _times_lower(step[half:, :half], product[:half, :half], lower, accumulate=False)  # A21 B11
    _lower_times(step[half:, half:], product[half:, :half], lower, accumulate=True)  # + A22 B21
    product[half:, :half] = lower
    multiply_into(step[half:, half:], product[half:, half:], triangular)
    multiply_into(step[:half, :half], product[:half, :half], triangular)


def _times_lower(full: torch.Tensor, lower: torch.Tensor, out: torch.Tensor,
                 accumulate: bool) -> None:
    """out (+)= full @ lower, for a lower-triangular (n, n) `lower`: [X1 X2] L =
    [X1 L11 + X2 L21, X2 L22]."""
    size = lower.shape[0]
    if size <= SMALLEST_SPLIT:
        out.addmm_(full, lower, beta=1 if accumulate else 0)
        return
    half = size // 2
    _times_lower(full[:, :half], lower[:half, :half], out[:, :half], accumulate)
    out[:, :half].addmm_(full[:, half:], lower[half:, :half])
    _times_lower(full[:, half:], lower[half:, half:], out[:, half:], accumulate)


def _lower_times(lower: torch.Tensor, full: torch.Tensor, out: torch.Tensor,
                 accumulate: bool) -> None:
    """out (+)= lower @ full, for a lower-triangular (n, n) `lower`: L [X1; X2] =
    [L11 X1; L21 X1 + L22 X2]."""
    size = lower.shape[0]
    if size <= SMALLEST_SPLIT:
        out.addmm_(lower, full, beta=1 if accumulate else 0)
        return
    half = size // 2
    _lower_times(lower[:half, :half], full[:half], out[:half], accumulate)
    _lower_times(lower[half:, half:], full[half:], out[half:], accumulate)
    out[half:].addmm_(lower[half:, :half], full[:half])


def residual_step(mean: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """Â = rownorm((A + I) / 2) from the heads' mean A (Q, K), in place: + I, then each row
    divided by its sum (the halving cancels in the normalisation)."""
    matrix = as_tensor(mean)
    matrix.diagonal().add_(1.0)  # + I
    matrix.div_(matrix.sum(dim=-1, keepdim=True))
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


class Rollout(PassReducer):
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
        self._products: list[torch.Tensor | None] = []  # (Q, K) per input of the batch
        self._num_tokens: list[int] = []

    @property
    def parts(self) -> Parts:
        return Parts(head_sum=self.dtype)

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: Sequence[LayerRows], norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        if tokens.rectangular:
            raise ValueError("rollout needs square maps (self-attention)")
        if layer == 0:
            self._products = [None] * tokens.batch_size
            self._num_tokens.extend(int(count) for count in tokens.lengths)
        elif len(self._products) != tokens.batch_size:
            raise ValueError("a batch's layers are added in order, from layer 0")
        pooled, exact = [], []
        for index, measured in enumerate(rows):
            step = as_tensor(measured.head_sum)  # (Q, K) the heads' sum, valid this layer
            step /= maps.shape[1]  # the heads' mean
            raw = pooled_rows(step, self.cells)
            kept_raw = step.numpy().copy() if self.keep_layers else None
            residual_step(step)
            product = self._products[index]
            if product is None:
                product = self._products[index] = step.clone()
            else:
                multiply_into(step, product, triangular=tokens.causal)
            pooled.append((raw, pooled_rows(product, self.cells)))
            if self.keep_layers:
                exact.append((kept_raw, product.numpy().copy()))
        self._pooled.put(layer, pooled)
        if self.keep_layers:
            self._exact.put(layer, exact)

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
    return np.stack([residual_step(mean.copy()) for mean in head_average(record)])

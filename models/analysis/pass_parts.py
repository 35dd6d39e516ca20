"""The pieces of the one pass over a layer's maps (models.analysis.layer_pass) besides its products
with the key columns: the columns that depend on the block, the diagonal's corners, each input's
thumbnail, the weights on the earlier copies of each query's token, the entropy terms and the
buffers kept from one layer to the next.

Dimensions: B batch, H heads, Q/K query/key positions, b rows of a block, k keys read, P token
pairs, q/k' pooled blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

from models.analysis.pooling import block_starts, max_pool
from models.analysis.token_batch import ItemTokens

TINY = torch.finfo(torch.float32).tiny


def outside_columns(positions: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """(k, 4) the columns that give, multiplied by a block's rows [start, stop), each row's
    weight on the keys before the block and sum_k w (start - k) over them, then its weight on
    the keys after the block and sum_k w (k - stop) over them (distances from the block's
    edges: positive terms only, nothing cancels in float32)."""
    columns = torch.zeros(positions.size(0), 4)  # (k, 4)
    columns[:start, 0] = 1.0
    columns[:start, 1] = start - positions[:start]
    columns[stop:, 2] = 1.0
    columns[stop:, 3] = positions[stop:] - stop
    return columns


@lru_cache(maxsize=8)
def corner_columns(size: int) -> torch.Tensor:
    """(b, b, 3) for a block's corner of b rows (its rows' own positions as keys), query q and
    key k: k < q, k > q, |q - k| (shared: never written)."""
    index = torch.arange(size)
    offsets = (index[:, None] - index[None, :]).float()  # (b, b) q - k
    return torch.stack([(offsets > 0).float(), (offsets < 0).float(), offsets.abs()], dim=-1)


def corner_sums(square: torch.Tensor, key_weight: torch.Tensor | None) -> torch.Tensor:
    """(N, b, 3) for the blocks' (N, b, s) corners (keys: the block's own rows, s <= b): each
    row's weight before and after the diagonal, and sum_k w |q - k| over the corner; the keys
    weighted by `key_weight` (N, 1, s) (0 on a padded key) when given. One product per row of
    the block, every map at once."""
    rows, size = square.size(1), square.size(2)
    if key_weight is not None:
        square = square * key_weight
    columns = corner_columns(rows)[:, :size]  # (b, s, 3)
    return torch.bmm(square.transpose(0, 1), columns).transpose(0, 1)  # (N, b, 3)


class PairSums:
    """Each row's weight on the earlier copies of its token (ItemTokens.pairs_by_query), every
    input's pairs at once, summed block by block while the block is in the processor's cache."""

    def __init__(self, heads: int, queries: int, items: Sequence[ItemTokens]):
        found = [item.pairs_by_query for item in items]
        which = np.concatenate([np.full(len(q), b, dtype=np.int64)
                                for b, (q, _) in enumerate(found)])  # (P,)
        rows = np.concatenate([q for q, _ in found]).astype(np.int64)
        keys = np.concatenate([k for _, k in found]).astype(np.int64)
        if rows.size and (rows[1:] < rows[:-1]).any():  # by query: a block's pairs side by side
            order = np.argsort(rows, kind="stable")
            which, rows, keys = which[order], rows[order], keys[order]
        self.items, self.rows, self.keys = (torch.from_numpy(part) for part in (which, rows, keys))
        self.cells = self.items * queries + self.rows  # (P,) each pair's (input, query)
        self.batch, self.queries, self.heads = len(items), queries, heads
        self.restart()

    def restart(self) -> None:
        """New sums (a layer's result is not overwritten by the next), the same pairs."""
        self.sums = torch.zeros(self.heads, self.batch * self.queries,
                                dtype=torch.float64)  # (H, B*Q)

    def add(self, weights: torch.Tensor, start: int, stop: int) -> None:
        """weights (B, H, Q, K): the pairs of the query rows [start, stop)."""
        first, end = torch.searchsorted(self.rows, torch.tensor([start, stop])).tolist()
        if end > first:
            part = slice(first, end)
            gathered = weights[self.items[part], :, self.rows[part], self.keys[part]]  # (p, H)
            self.sums.index_add_(1, self.cells[part], gathered.T.double())

    def result(self) -> torch.Tensor:
        """(B, H, Q) float64."""
        return self.sums.view(-1, self.batch, self.queries).transpose(0, 1)


class ThumbnailRows:
    """One input's heads max-pooled while the pass goes over the rows: each query block's
    elementwise maximum of its rows (all keys), then the key blocks of those few rows."""

    def __init__(self, heads: int, queries: int, keys: int, cells: int):
        self.cells = cells
        self.starts = block_starts(queries, cells)  # (q,) each query block's first row
        self.whole_rows = queries <= cells  # each row is its own block
        # A causal row's unread keys are zero, and so is their maximum.
        self.rows = torch.zeros(heads, len(self.starts), keys)  # (H, q, K)
        self.filled = np.zeros(len(self.starts), dtype=bool)
        self.ends = np.r_[self.starts[1:], queries]

    def add(self, block: torch.Tensor, start: int, stop: int) -> None:
        """block (H, b, k): the input's rows [start, stop) over its first k keys."""
        seen = block.size(-1)
        if self.whole_rows:
            self.rows[:, start:stop, :seen] = block
            return
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        last = int(np.searchsorted(self.starts, stop - 1, side="right")) - 1
        for index in range(first, last + 1):
            rows = slice(max(self.starts[index], start) - start, min(self.ends[index], stop) - start)
            part = torch.amax(block[:, rows], dim=1)  # (H, k)
            target = self.rows[:, index, :seen]
            if self.filled[index]:  # a causal row's unread keys count as its zeros
                torch.maximum(target, part, out=target)
            else:
                target.copy_(part)
            self.filled[index] = True

    def result(self) -> np.ndarray:
        """(H, q, k') float32, never a view of the maps."""
        return max_pool(self.rows.numpy(), self.cells)


def pooled_rows(matrix: torch.Tensor, cells: int) -> np.ndarray:
    """(Q, K) -> (min(Q, cells), min(K, cells)) float32 numpy, the maximum of each block (as
    models.analysis.pooling.max_pool), the rows pooled in torch; never a view of `matrix`."""
    queries = matrix.size(0)
    if queries <= cells:
        rows = matrix.float().clone()
    else:
        starts = block_starts(queries, cells)
        rows = torch.stack([torch.amax(matrix[begin:end], dim=0) for begin, end in
                            zip(starts, [*starts[1:], queries])]).float()  # (q, K)
    return max_pool(rows.numpy(), cells)


def kept_zeros(buffers: dict | None, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """(Q, K) zeros, or the buffer kept from the layer before when it has this shape: the pass
    writes the same cells of it every layer (a causal map's cells above each block are never
    written and stay zero), so what it holds is this layer's alone."""
    kept = None if buffers is None else buffers.get("head_sum")
    if kept is None or tuple(kept.shape) != shape or kept.dtype != dtype:
        kept = torch.zeros(shape, dtype=dtype)
        if buffers is not None:
            buffers["head_sum"] = kept
    return kept


def torch_dtype(dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


def entropy_terms(block: torch.Tensor, logs: torch.Tensor, shortest: int,
                   key_weight: torch.Tensor | None) -> torch.Tensor:
    """(N, b) sum_k w ln w of each row (0 ln 0 = 0), with `logs` (N, b, k) as scratch: ln of
    max(w, the smallest normal float) (vectorised, unlike xlogy: 2-3x faster), times w, summed
    over the real keys (each input's terms from key `shortest` on weighted by `key_weight`
    (B, 1, k) when given). A weight below that floor changes its term by less than 1e-36."""
    torch.clamp(block, min=TINY, out=logs).log_()
    terms = logs.mul_(block)  # (N, b, k)
    if key_weight is not None:
        terms.view(key_weight.size(0), -1, terms.size(-1))[..., shortest:].mul_(
            key_weight[..., shortest:])  # (B, H*b, k - shortest)
    return terms.sum(-1)

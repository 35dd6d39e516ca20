"""One pass over one input's layer: everything the per-layer reducers read of its maps, in torch.

The statistics, roles, detectors, norm-based shares, thumbnails and rollout all read the same
(H, Q, K) maps, and at 4,096 tokens one layer's maps are 600 MB: reading them once per reducer
cost as much as the forward itself. `measure` reads them once, a block of query rows at a time
(small enough to stay in the processor's cache while every sum is taken of it), with torch's
threads (the forward's own), and keeps only what is linear in the length: per head and query
row the row's total, its entropy terms, its weight on the special and punctuation keys, on the
keys left and right of the diagonal and the distance it attends over, its norm-weighted total;
per head the max-pooled thumbnail; and the heads' sum (Q, K) the rollout starts from. A causal
layer's keys right of a block's last row are all zero: they are not read.

Each reducer states the `Parts` it reads; a Summary asks for all of them in one pass.

Dimensions: H heads, Q/K query/key positions, b rows of a block, k keys read, q/k' pooled blocks.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

import numpy as np
import torch

from models.analysis.pooling import block_starts, max_pool
from models.analysis.token_batch import ItemTokens, TokenBatch

# A block of query rows holds at most this many weights of every head (8 MB of float32): few
# enough blocks that torch's calls cost nothing, each small enough to stay in the processor's
# last-level cache while the pass takes its sums, maxima and logarithms (measured at 4,096
# tokens: 2x faster than 1 MB blocks, the same as 16 MB).
BLOCK_WEIGHTS = 1 << 21
KEY_SETS = ("cls", "sep", "punctuation")
COLUMNS = 16  # the product with the key columns: at most 9 used (measured: 2x faster than 9)
TINY = torch.finfo(torch.float32).tiny


@dataclass(frozen=True)
class Parts:
    """What a reducer reads of a layer. `statistics`: entropy terms, key-set shares and
    distances; `sides`: weight left and right of the diagonal; `thumbnail_cells`: thumbnails
    max-pooled to at most this many blocks a side (0: none); `head_sum`: the heads' sum, in
    this numpy dtype (None: none); `norms`: each row's norm-weighted total; `equal_tokens`:
    each row's weight on the earlier copies of its token (square maps)."""

    statistics: bool = False
    sides: bool = False
    thumbnail_cells: int = 0
    head_sum: np.dtype | None = None
    norms: bool = False
    equal_tokens: bool = False

    def __or__(self, other: Parts) -> Parts:
        """Both reducers' parts, read in one pass."""
        for name in ("thumbnail_cells", "head_sum"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine and theirs and mine != theirs:
                raise ValueError(f"two reducers ask one pass for different {name}: "
                                 f"{mine} and {theirs}")
        return Parts(**{field.name: getattr(self, field.name) or getattr(other, field.name)
                        for field in fields(self)})


@dataclass(frozen=True)
class LayerRows:
    """What one pass measured of one input's layer (the parts asked for; None otherwise).

    row_sums: (H, Q) float32, every row's total weight.
    entropy: (H, Q) float32, sum_k w ln w (nats, <= 0).
    shares: (H, Q, 3) float32, weight on the KEY_SETS keys (`key_sets`).
    distance: (H, Q) float32, sum_k w |q - k| (square maps).
    left, right: (H, Q) float32, weight on the keys before and after the query (square maps).
    norm_sums: (H, Q) float32, sum_k w ||v_k W_O^h||.
    thumbnail: (H, q, k') float32, the maps max-pooled (models.analysis.pooling.max_pool).
    head_sum: (Q, K) the heads' sum, in the dtype asked for.
    equal_tokens: (H, Q) float64, each row's weight on the earlier copies of its token
        (ItemTokens.equal_token_pairs; 0 for a row without any).
    """

    row_sums: np.ndarray
    entropy: np.ndarray | None = None
    shares: np.ndarray | None = None
    distance: np.ndarray | None = None
    left: np.ndarray | None = None
    right: np.ndarray | None = None
    norm_sums: np.ndarray | None = None
    thumbnail: np.ndarray | None = None
    head_sum: np.ndarray | None = None
    equal_tokens: np.ndarray | None = None


def as_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A torch view of a numpy array, sharing its memory (a read-only array is only read); a
    tensor as it is."""
    if isinstance(array, torch.Tensor):
        return array
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def key_sets(item: ItemTokens) -> np.ndarray:
    """(K, 3) float32 indicators of the [CLS] (first special), [SEP] (other special) and
    punctuation (not special) keys. A rectangular map's keys are never special."""
    special = [] if item.rectangular else item.special_positions.tolist()
    sets = np.zeros((item.keys, 3), dtype=np.float32)  # (K, 3)
    sets[special[:1], 0] = 1.0
    sets[special[1:], 1] = 1.0
    sets[:, 2] = item.punctuation & ~np.isin(np.arange(item.keys), special)
    return sets


def measure(maps: np.ndarray, item: ItemTokens, parts: Parts,
            norms: np.ndarray | None = None, buffers: dict | None = None) -> LayerRows:
    """One input's layer measured in one pass: maps (H, Q, K) over its real tokens (read only;
    float32, another dtype is copied to float32), norms (H, K) when `parts.norms`. With
    `buffers` (a dict kept from one layer of this input to the next), the heads' sum is
    written into the same memory every layer (64 MB at 4,096 tokens, otherwise zeroed anew
    each layer): `head_sum` is then valid until the next layer is measured."""
    weights = as_tensor(np.asarray(maps))
    if weights.dtype != torch.float32:
        weights = weights.float()
    heads, queries, keys = weights.shape
    square = not item.rectangular
    causal = item.causal and square
    sides = square and (parts.sides or parts.statistics)
    fixed = np.ones((keys, 1), np.float32)  # (K, 1): the row's total
    if parts.statistics:
        fixed = np.concatenate([fixed, key_sets(item)], axis=1)  # (K, 4)
    width = fixed.shape[1]
    norm_at = width + (4 if sides else 0)  # columns: fixed, outside (sides), norms (last)
    # Every head's columns, padded with zeros to COLUMNS (a few more zero columns cost nothing,
    # an odd count makes the product several times slower).
    columns = torch.zeros(heads, keys, COLUMNS)  # (H, K, C)
    columns[:, :, :width] = torch.from_numpy(fixed)
    if parts.norms:
        if norms is None:
            raise ValueError("norm-weighted sums need the value norms ||v_j W_O^h||")
        columns[:, :, norm_at] = as_tensor(np.asarray(norms, dtype=np.float32))  # (H, K)
    positions = torch.arange(keys, dtype=torch.float32)
    totals = torch.empty(heads, queries, COLUMNS)  # (H, Q, C)
    corner = torch.zeros(heads, queries, 3)  # (H, Q, 3): left, right, distance in the block
    entropy = torch.empty(heads, queries) if parts.statistics else None
    head_sum = None
    if parts.head_sum is not None:
        head_sum = _zeros(buffers, (queries, keys), _torch_dtype(parts.head_sum))  # (Q, K)
    thumbnail = _Thumbnail(heads, queries, keys, parts.thumbnail_cells) \
        if parts.thumbnail_cells else None
    rows_per_block = max(1, BLOCK_WEIGHTS // max(heads * keys, 1))
    logs = torch.empty(heads * min(rows_per_block, queries) * keys) if entropy is not None \
        else None  # one block's ln w, reused block after block
    pairs = _Pairs(heads, item) if parts.equal_tokens and square else None
    corner_weights = corner_columns(min(rows_per_block, queries)) if sides else None
    for start in range(0, queries, rows_per_block):
        stop = min(start + rows_per_block, queries)
        seen = stop if causal else keys  # a causal block's later keys are zero
        block = weights[:, start:stop, :seen]  # (H, b, k)
        rows = slice(start, stop)
        if sides:
            columns[:, :seen, width:width + 4] = _outside(positions[:seen], start, stop)
            corner[:, rows] = _corner(block[:, :, start:stop], corner_weights)
        torch.bmm(block, columns[:, :seen], out=totals[:, rows])  # (H, b, C)
        if entropy is not None:
            entropy[:, rows] = _entropy_terms(block, logs[:block.numel()].view(block.shape))
        if head_sum is not None:
            torch.sum(block, dim=0, dtype=head_sum.dtype, out=head_sum[rows, :seen])
        if thumbnail is not None:
            thumbnail.add(block, start, stop)
        if pairs is not None:
            pairs.add(block, start, stop)
    row_sums = totals[..., 0]
    outside = totals[..., width:width + 4]  # (H, Q, 4): before the block, and after it
    left = outside[..., 0] + corner[..., 0] if sides else None
    right = outside[..., 2] + corner[..., 1] if sides else None
    distance = None
    if sides and parts.statistics:
        offsets = torch.arange(queries, dtype=torch.float32)  # (Q,)
        block_start = offsets - offsets % rows_per_block  # each query's block's first row
        block_stop = torch.clamp(block_start + rows_per_block, max=queries)
        distance = ((offsets - block_start) * outside[..., 0] + outside[..., 1] + corner[..., 2]
                    + (block_stop - offsets) * outside[..., 2] + outside[..., 3])  # (H, Q)
    return LayerRows(
        row_sums=row_sums.numpy(),
        entropy=None if entropy is None else entropy.numpy(),
        shares=totals[..., 1:width].numpy() if parts.statistics else None,
        distance=None if distance is None else distance.numpy(),
        left=None if left is None else left.numpy(),
        right=None if right is None else right.numpy(),
        norm_sums=totals[..., norm_at].numpy() if parts.norms else None,
        thumbnail=None if thumbnail is None else thumbnail.result(),
        head_sum=None if head_sum is None else head_sum.numpy(),
        equal_tokens=None if pairs is None else pairs.sums.numpy())


def measure_batch(maps: np.ndarray, tokens: TokenBatch, parts: Parts,
                  norms: np.ndarray | None = None,
                  buffers: dict | None = None) -> tuple[LayerRows, ...]:
    """`measure` of each input of a batch: maps (B, H, Q, K), norms (B, H, K) or None;
    `buffers`: a dict kept from one layer of the batch to the next (each input its own)."""
    tokens.check(maps)
    lengths = tokens.lengths
    return tuple(
        measure(tokens.cut(maps, index), tokens.item(index), parts,
                None if norms is None or not parts.norms else norms[index, :, :lengths[index]],
                None if buffers is None else buffers.setdefault(index, {}))
        for index in range(tokens.batch_size))


def _zeros(buffers: dict | None, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """(Q, K) zeros, or the buffer kept from the layer before when it has this shape: the pass
    writes the same cells of it every layer (a causal map's cells above each block are never
    written and stay zero), so what it holds is this layer's alone."""
    kept = None if buffers is None else buffers.get("head_sum")
    if kept is None or tuple(kept.shape) != shape or kept.dtype != dtype:
        kept = torch.zeros(shape, dtype=dtype)
        if buffers is not None:
            buffers["head_sum"] = kept
    return kept


def _torch_dtype(dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


def _outside(positions: torch.Tensor, start: int, stop: int) -> torch.Tensor:
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


def corner_columns(size: int) -> torch.Tensor:
    """(b, b, 3) for a block's corner of b rows (its rows' own positions as keys), query q and
    key k: k < q, k > q, |q - k|."""
    index = torch.arange(size)
    offsets = (index[:, None] - index[None, :]).float()  # (b, b) q - k
    return torch.stack([(offsets > 0).float(), (offsets < 0).float(), offsets.abs()], dim=-1)


def _corner(square: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """(H, b, 3) for the block's (H, b, b) corner: each row's weight before and after the
    diagonal, and sum_k w |q - k| over the corner (`columns`: corner_columns of b rows or more,
    whose top-left corner is the same for fewer rows)."""
    size = square.size(-1)
    return (square[..., None] * columns[:size, :size]).sum(-2)  # (H, b, 3)


def _entropy_terms(block: torch.Tensor, logs: torch.Tensor) -> torch.Tensor:
    """(H, b) sum_k w ln w of each row (0 ln 0 = 0), with `logs` (H, b, k) as scratch: ln of
    max(w, the smallest normal float) (vectorised, unlike xlogy: 2-3x faster), times w, summed.
    A weight below that floor changes its term by less than 1e-36."""
    torch.clamp(block, min=TINY, out=logs).log_()
    return logs.mul_(block).sum(-1)


class _Pairs:
    """Each row's weight on the earlier copies of its token, summed block by block: the
    block's pairs are gathered while the block is in the processor's cache."""

    def __init__(self, heads: int, item: ItemTokens):
        self.queries, self.keys = (as_tensor(part)
                                   for part in item.pairs_by_query)  # (P,) each
        self.sums = torch.zeros(heads, item.queries, dtype=torch.float64)  # (H, Q)

    def add(self, block: torch.Tensor, start: int, stop: int) -> None:
        first, end = torch.searchsorted(self.queries, torch.tensor([start, stop])).tolist()
        if end > first:
            queries = self.queries[first:end]
            gathered = block[:, queries - start, self.keys[first:end]]  # (H, p)
            self.sums.index_add_(1, queries, gathered.double())


class _Thumbnail:
    """Each head's maps max-pooled while the pass goes over the rows: each query block's
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

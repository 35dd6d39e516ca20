"""One pass over a layer's maps: everything the per-layer reducers read of them, in torch.

The statistics, roles, detectors, norm-based shares, thumbnails and rollout all read the same
(H, Q, K) maps, and at 4,096 tokens one layer's maps are 600 MB: reading them once per reducer
cost as much as the forward itself. The pass reads them once, a block of query rows at a time
(small enough to stay in the processor's cache while every sum is taken of it), with torch's
threads (the forward's own), and keeps only what is linear in the length: per head and query
row the row's total, its entropy terms, its weight on the special and punctuation keys, on the
keys left and right of the diagonal and the distance it attends over, its norm-weighted total;
per head the max-pooled thumbnail; and the heads' sum (Q, K) the rollout starts from. A causal
layer's keys right of a block's last row are all zero: they are not read.

A padded batch (a corpus's) is read in the same pass, every input at once: its blocks hold
every input's rows, the key columns they are multiplied by are each input's own (zero on its
padded keys), and a padded query's rows are computed and cut away. One input (`measure`) is a
batch of one: there is one pass, not two.

Each reducer states the `Parts` it reads; a Summary asks for all of them in one pass.

Dimensions: B batch, H heads, Q/K query/key positions, N = B x H maps, b rows of a block,
k keys read, q/k' pooled blocks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from models.analysis.pass_parts import (PairSums, ThumbnailRows, corner_sums, entropy_terms,
                                         kept_zeros, outside_columns, torch_dtype)
from models.analysis.token_batch import ItemTokens, TokenBatch

# A block of query rows holds at most this many weights of every head (8 MB of float32): few
# enough blocks that torch's calls cost nothing, each small enough to stay in the processor's
# last-level cache while the pass takes its sums, maxima and logarithms (measured at 4,096
# tokens: 2x faster than 1 MB blocks, the same as 16 MB).
BLOCK_WEIGHTS = 1 << 21
# ... and at most an eighth of the queries (16 rows or more): each block's corner on the diagonal
# is read once more per row, so a block of half the rows (a corpus batch of short passages fills
# 8 MB with 40-60 rows of ~85) reads half the maps again; blocks of 16 rows of 85 measured 2.5x
# faster there. A long input's blocks (56-113 rows of 2,048-4,096) are not cut by this.
CORNER_SHARE = 8
CORNER_ROWS = 16
KEY_SETS = ("cls", "sep", "punctuation")
COLUMNS = 16  # the product with the key columns: at most 9 used (measured: 2x faster than 9)


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
    shares: (H, Q, 3) float32, weight on the KEY_SETS keys (ItemTokens.key_sets).
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


@dataclass(frozen=True)
class BatchRows(Sequence):
    """What one pass measured of a batch's layer: LayerRows' arrays for every input at once,
    (B, H, Q) (shares (B, H, Q, 3)) over the padded queries (a padded query's row is garbage:
    cut it, or leave it out with the batch's query flags), each input's thumbnail and heads'
    sum; `rows[b]` is input b's LayerRows, cut to its real queries."""

    query_lengths: tuple[int, ...]
    row_sums: np.ndarray
    entropy: np.ndarray | None = None
    shares: np.ndarray | None = None
    distance: np.ndarray | None = None
    left: np.ndarray | None = None
    right: np.ndarray | None = None
    norm_sums: np.ndarray | None = None
    equal_tokens: np.ndarray | None = None
    thumbnails: tuple[np.ndarray, ...] | None = None
    head_sums: tuple[np.ndarray, ...] | None = None

    def __len__(self) -> int:
        return len(self.query_lengths)

    def __getitem__(self, index: int) -> LayerRows:
        if not 0 <= index < len(self):
            raise IndexError(index)
        rows = slice(0, self.query_lengths[index])

        def cut(values: np.ndarray | None) -> np.ndarray | None:
            return None if values is None else values[index, :, rows]

        return LayerRows(
            row_sums=cut(self.row_sums), entropy=cut(self.entropy), shares=cut(self.shares),
            distance=cut(self.distance), left=cut(self.left), right=cut(self.right),
            norm_sums=cut(self.norm_sums),
            thumbnail=None if self.thumbnails is None else self.thumbnails[index],
            head_sum=None if self.head_sums is None else self.head_sums[index],
            equal_tokens=cut(self.equal_tokens))


def as_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A torch view of a numpy array, sharing its memory (a read-only array is only read); a
    tensor as it is."""
    if isinstance(array, torch.Tensor):
        return array
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def measure(maps: np.ndarray, item: ItemTokens, parts: Parts,
            norms: np.ndarray | None = None, buffers: dict | None = None) -> LayerRows:
    """One input's layer measured in one pass: maps (H, Q, K) over its real tokens (read only;
    float32, another dtype is copied to float32), norms (H, K) when `parts.norms`. With
    `buffers` (a dict kept from one layer of this input to the next), the heads' sum is
    written into the same memory every layer (64 MB at 4,096 tokens, otherwise zeroed anew
    each layer): `head_sum` is then valid until the next layer is measured. The batch's pass
    (`measure_batch`) of a batch of one."""
    weights = as_tensor(maps if isinstance(maps, torch.Tensor) else np.asarray(maps))
    return _measure(weights[None], (item,), parts,
                    None if norms is None else np.asarray(norms)[None],
                    None if buffers is None else (buffers,))[0]


def measure_batch(maps: np.ndarray, tokens: TokenBatch, parts: Parts,
                  norms: np.ndarray | None = None,
                  buffers: dict | None = None) -> BatchRows:
    """Every input of a batch measured in one pass: maps (B, H, Q, K) padded on the right
    (what a padded key or query holds is never read into an input's numbers), norms (B, H, K)
    or None; `buffers`: a dict kept from one layer of the batch to the next (each input its
    own; the pass's key columns, key weights and scratch are made once, at the first layer).
    Input b's rows are the ones `measure` gives for its maps cut to its real tokens."""
    tokens.check(maps)
    items = tuple(tokens.item(index) for index in range(tokens.batch_size))
    kept = None if buffers is None else tuple(buffers.setdefault(index, {})
                                              for index in range(len(items)))
    weights = as_tensor(maps if isinstance(maps, torch.Tensor) else np.asarray(maps))
    return _measure(weights, items, parts, norms if parts.norms else None, kept)


def _measure(weights: torch.Tensor, items: Sequence[ItemTokens], parts: Parts,
             norms: np.ndarray | None, buffers: Sequence[dict] | None) -> BatchRows:
    """The pass (see the module doc) over weights (B, H, Q, K) of `items`, each padded on the
    right: every sum is a product of the batch's blocks with per-input key columns, zero on a
    padded key; a padded query's rows are computed and cut away."""
    if weights.dtype != torch.float32:
        weights = weights.float()
    batch, heads, queries, keys = weights.shape
    flat = weights.reshape(batch * heads, queries, keys)  # (B*H, Q, K), a view when it can
    square = not items[0].rectangular
    causal = items[0].causal and square
    sides = square and (parts.sides or parts.statistics)
    query_lengths = tuple(item.queries for item in items)
    width = 4 if parts.statistics else 1  # the row's total, then the KEY_SETS
    norm_at = width + (4 if sides else 0)  # columns: fixed, outside (sides), norms (last)
    kept = _kept_setup(None if buffers is None else buffers[0], weights.shape, items, parts)
    key_weight, flat_key_weight, columns = kept.key_weight, kept.flat_key_weight, kept.columns
    shortest, positions = kept.shortest, kept.positions
    if parts.norms:
        if norms is None:
            raise ValueError("norm-weighted sums need the value norms ||v_j W_O^h||")
        value_norms = as_tensor(np.asarray(norms, dtype=np.float32))  # (B, H, K)
        columns[..., norm_at] = value_norms if key_weight is None \
            else value_norms * key_weight[:, None]
    flat_columns = columns.view(batch * heads, keys, COLUMNS)  # (B*H, K, C)
    totals = torch.empty(batch * heads, queries, COLUMNS)  # (B*H, Q, C)
    corner = torch.zeros(batch * heads, queries, 3)  # left, right, distance in the block
    entropy = torch.empty(batch * heads, queries) if parts.statistics else None
    head_sums = None
    if parts.head_sum is not None:
        dtype = torch_dtype(parts.head_sum)
        head_sums = [kept_zeros(None if buffers is None else buffers[index],
                            (item.queries, item.keys), dtype)
                     for index, item in enumerate(items)]  # (Q_b, K_b) each
    thumbnails = None if not parts.thumbnail_cells else [
        ThumbnailRows(heads, item.queries, item.keys, parts.thumbnail_cells) for item in items]
    rows_per_block = _rows_per_block(batch, heads, queries, keys)
    logs = kept.logs if entropy is not None else None  # one block's ln w, reused
    pairs = kept.pairs if parts.equal_tokens and square else None
    if pairs is not None:
        pairs.restart()
    per_input = head_sums is not None or thumbnails is not None  # read input by input
    for start in range(0, queries, rows_per_block):
        stop = min(start + rows_per_block, queries)
        seen = stop if causal else keys  # a causal block's later keys are zero
        block = flat[:, start:stop, :seen]  # (B*H, b, k)
        rows = slice(start, stop)
        if sides:
            outside = outside_columns(positions[:seen], start, stop)  # (k, 4)
            if key_weight is not None:
                outside = outside * key_weight[:, None, :seen, None]  # (B, 1, k, 4)
            columns[:, :, :seen, width:width + 4] = outside
            corner[:, rows] = corner_sums(  # keys below `shortest` are every input's own
                block[:, :, start:stop],
                None if stop <= shortest else flat_key_weight[..., start:stop])
        totals[:, rows] = torch.bmm(block, flat_columns[:, :seen])  # (B*H, b, C)
        if entropy is not None:
            entropy[:, rows] = entropy_terms(
                block, logs[:block.numel()].view(block.shape), shortest,
                None if seen <= shortest else key_weight[:, None, :seen])
        for index, item in enumerate(items if per_input else ()):
            if start >= item.queries:
                continue
            end, read = min(stop, item.queries), min(seen, item.keys)
            own = weights[index, :, start:end, :read]  # (H, b_b, k_b) the input's own rows
            if head_sums is not None:
                torch.sum(own, dim=0, dtype=head_sums[index].dtype,
                          out=head_sums[index][start:end, :read])
            if thumbnails is not None:
                thumbnails[index].add(own, start, end)
        if pairs is not None:
            pairs.add(weights, start, stop)
    shape = (batch, heads, queries)
    row_sums = totals[..., 0]
    outside = totals[..., width:width + 4]  # (B*H, Q, 4): before the block, and after it
    left = outside[..., 0] + corner[..., 0] if sides else None
    right = outside[..., 2] + corner[..., 1] if sides else None
    distance = None
    if sides and parts.statistics:
        offsets = torch.arange(queries, dtype=torch.float32)  # (Q,)
        block_start = offsets - offsets % rows_per_block  # each query's block's first row
        block_stop = torch.clamp(block_start + rows_per_block, max=queries)
        distance = ((offsets - block_start) * outside[..., 0] + outside[..., 1] + corner[..., 2]
                    + (block_stop - offsets) * outside[..., 2] + outside[..., 3])  # (B*H, Q)

    def batched(values: torch.Tensor | None) -> np.ndarray | None:
        return None if values is None else values.reshape(*shape, *values.shape[2:]).numpy()

    return BatchRows(
        query_lengths=query_lengths, row_sums=batched(row_sums), entropy=batched(entropy),
        shares=batched(totals[..., 1:width]) if parts.statistics else None,
        distance=batched(distance), left=batched(left), right=batched(right),
        norm_sums=batched(totals[..., norm_at]) if parts.norms else None,
        equal_tokens=None if pairs is None else pairs.result().numpy(),
        thumbnails=None if thumbnails is None else tuple(t.result() for t in thumbnails),
        head_sums=None if head_sums is None else tuple(s.numpy() for s in head_sums))


@dataclass
class _Setup:
    """What a batch's pass reads besides its maps, the same every layer: the key weights, the
    key columns (the fixed ones filled; the block's and the norms' written by each pass), the
    key positions, the entropy's scratch and the equal-token pairs."""

    items: tuple[ItemTokens, ...]
    shape: tuple[int, ...]
    parts: Parts
    shortest: int
    key_weight: torch.Tensor | None  # (B, K) 1 on a real key, 0 on a padded one; None: no pad
    flat_key_weight: torch.Tensor | None  # (B*H, 1, K)
    columns: torch.Tensor  # (B, H, K, C)
    positions: torch.Tensor  # (K,)
    logs: torch.Tensor | None  # one block's ln w
    pairs: PairSums | None


def _kept_setup(buffers: dict | None, shape: torch.Size, items: Sequence[ItemTokens],
                parts: Parts) -> _Setup:
    """The batch's _Setup: the one kept in `buffers` (the first input's dict, kept from one
    layer of the batch to the next) when it is of these maps and tokens, else made (and kept)."""
    kept = None if buffers is None else buffers.get("pass")
    if kept is not None and kept.shape == tuple(shape) and kept.parts == parts and \
            len(kept.items) == len(items) and all(a is b for a, b in zip(kept.items, items)):
        return kept
    batch, heads, queries, keys = shape
    lengths = [item.keys for item in items]
    shortest = min(lengths)  # the keys before it are real in every input
    key_weight = None
    if shortest < keys:
        key_weight = (torch.arange(keys)[None] < torch.tensor(lengths)[:, None]).float()
    width = 4 if parts.statistics else 1  # the row's total, then the KEY_SETS
    fixed = torch.zeros(batch, keys, width)  # (B, K, width)
    for index, item in enumerate(items):
        fixed[index, :item.keys, 0] = 1.0
        if parts.statistics:
            fixed[index, :item.keys, 1:] = as_tensor(item.key_sets)
    # Every map's columns, padded with zeros to COLUMNS (a few more zero columns cost nothing,
    # an odd count makes the product several times slower).
    columns = torch.zeros(batch, heads, keys, COLUMNS)  # (B, H, K, C)
    columns[..., :width] = fixed[:, None]
    flat_key_weight = None if key_weight is None else \
        key_weight[:, None, None].expand(batch, heads, 1, keys).reshape(batch * heads, 1, keys)
    rows_per_block = _rows_per_block(batch, heads, queries, keys)
    square = not items[0].rectangular
    kept = _Setup(
        items=tuple(items), shape=tuple(shape), parts=parts, shortest=shortest,
        key_weight=key_weight, flat_key_weight=flat_key_weight, columns=columns,
        positions=torch.arange(keys, dtype=torch.float32),
        logs=torch.empty(batch * heads * min(rows_per_block, queries) * keys)
        if parts.statistics else None,
        pairs=PairSums(heads, queries, items) if parts.equal_tokens and square else None)
    if buffers is not None:
        buffers["pass"] = kept
    return kept


def _rows_per_block(batch: int, heads: int, queries: int, keys: int) -> int:
    return max(1, min(BLOCK_WEIGHTS // max(batch * heads * keys, 1),
                      max(CORNER_ROWS, queries // CORNER_SHARE)))

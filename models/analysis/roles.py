"""Head roles: what kind of token a head looks at, whatever the input's length.

A head's role distribution is its weight, averaged over the live query rows, on each of ROLES:
the first special token, the other special tokens, the token itself, the previous token, the
next token, other earlier tokens and other later tokens (each key counted once, in that order:
a special token is never "self", "previous" or "next"). Two inputs of different lengths are
compared by these distributions (models.analysis.compare).

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions, R roles,
S special tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.analysis.layer_pass import LayerRows, Parts, measure
from models.analysis.reducer import EMPTY_ROW_WEIGHT, LayerLog, PassReducer, reduce_record
from models.analysis.token_batch import ItemTokens, TokenBatch
from models.hooks.record import AttentionRecord

ROLES = ("first special", "other special", "self", "previous", "next", "earlier", "later")
ROLE_PARTS = Parts(sides=True)


def item_roles(maps: np.ndarray, item: ItemTokens, rows: LayerRows | None = None) -> np.ndarray:
    """(H, R) float64: one input's layer's role distribution from its (H, Q, K) float32 maps
    over its real tokens (read only, square) and the layer's pass (models.analysis.layer_pass,
    with ROLE_PARTS; taken here when None).

    From the pass: each row's weight left and right of the diagonal; from the maps: the three
    diagonals and the special columns. No (Q, K) array is built, and a row's total (left +
    diagonal + right) decides whether it is live.
    """
    heads, count, keys = maps.shape
    if keys != count or item.rectangular:
        raise ValueError(f"roles need square maps, got {maps.shape}")
    if rows is None:
        rows = measure(maps, item, ROLE_PARTS)
    special = item.special_positions.tolist()
    first = special[:1]
    others = sorted(set(special[1:]) - set(first))
    specials = np.array(sorted(set(special)), dtype=np.int64)  # (S,)
    left = rows.left.astype(np.float64)  # (H, Q) k < q
    right = rows.right.astype(np.float64)  # (H, Q) k > q
    positions = np.arange(count)
    is_special = np.zeros(count, dtype=bool)  # (Q,)
    is_special[specials] = True
    diagonal = np.diagonal(maps, axis1=1, axis2=2).astype(np.float64)  # (H, Q)
    previous, following = np.zeros((heads, count)), np.zeros((heads, count))
    previous[:, 1:] = np.diagonal(maps, offset=-1, axis1=1, axis2=2)  # query q, key q - 1
    following[:, :-1] = np.diagonal(maps, offset=1, axis1=1, axis2=2)  # query q, key q + 1
    previous[:, 1:] *= ~is_special[:count - 1]
    following[:, :-1] *= ~is_special[1:count]
    columns = maps[:, :, specials].astype(np.float64)  # (H, Q, S)
    below = specials[None, :] < positions[:, None]  # (Q, S) special keys left of each query
    above = specials[None, :] > positions[:, None]
    roles = np.empty((heads, count, len(ROLES)))  # (H, Q, R)
    roles[..., ROLES.index("first special")] = maps[:, :, first].sum(axis=-1)
    roles[..., ROLES.index("other special")] = maps[:, :, others].sum(axis=-1, dtype=np.float64)
    roles[..., ROLES.index("self")] = np.where(is_special, 0.0, diagonal)
    roles[..., ROLES.index("previous")] = previous
    roles[..., ROLES.index("next")] = following
    roles[..., ROLES.index("earlier")] = left - previous - (columns * below).sum(axis=-1)
    roles[..., ROLES.index("later")] = right - following - (columns * above).sum(axis=-1)
    live = left + diagonal + right > EMPTY_ROW_WEIGHT  # (H, Q)
    count_live = np.maximum(live.sum(axis=-1, keepdims=True), 1)  # (H, 1)
    return (roles * live[..., None]).sum(axis=1) / count_live


@dataclass(frozen=True)
class RoleShares:
    """(N, L, H, R) float64: each input's heads' role distributions (ROLES)."""

    shares: np.ndarray

    def of(self, item: int = 0) -> np.ndarray:
        """(L, H, R) input `item`'s role distributions."""
        return self.shares[item]

    @property
    def nbytes(self) -> int:
        return self.shares.nbytes


class Roles(PassReducer):
    """The role distribution of every head, layer by layer; `result()` is RoleShares. Square
    maps only."""

    def __init__(self):
        self._log: LayerLog[np.ndarray] = LayerLog()  # (H, R) per input and layer

    @property
    def parts(self) -> Parts:
        return ROLE_PARTS

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: Sequence[LayerRows], norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        if tokens.rectangular:
            raise ValueError("head roles need square maps (self-attention)")
        self._log.put(layer, [item_roles(tokens.cut(maps, index), tokens.item(index),
                                         rows[index])
                              for index in range(tokens.batch_size)])

    def result(self) -> RoleShares:
        return RoleShares(self._log.stacked())


def role_distribution(record: AttentionRecord) -> np.ndarray:
    """(L, H, R): each head's mean weight on each of ROLES (sums to 1 over R for live heads):
    the Roles reducer over the record's layers."""
    (roles,) = reduce_record(record, Roles())
    return roles.of()

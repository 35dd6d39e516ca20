"""Norm-based shares on [CLS] and [SEP] (Kobayashi et al. 2020, "Attention is Not Only a Weight").

The norm-based map of a head is ||alpha_ij f(x_j)|| = alpha_ij ||v_j W_O^h|| (models.analysis.norms
computes the value norms from a captured layer). Each of its rows is divided by its sum, so a
share compares with the weight columns of the statistics ('cls', 'sep'); rows that sum to 0 and
padded rows are left out, as are padded keys.

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.analysis.columns import NORM_COLUMNS
from models.analysis.layer_pass import LayerRows, Parts, measure
from models.analysis.reducer import LayerLog, PassReducer, row_mean
from models.analysis.token_batch import ItemTokens, TokenBatch
from models.hooks.record import AttentionRecord

NORM_COLUMN_HELP = {
    "norm_cls": "Share of the norm-based attention ‖α·f(x)‖ (Kobayashi et al. 2020) on the "
                "first special token: compare with 'cls' to see how little that weight moves.",
    "norm_sep": "Share of the norm-based attention ‖α·f(x)‖ on the other special tokens "
                "([SEP]): compare with 'sep'.",
}


NORM_PARTS = Parts(norms=True)


def item_norm_shares(maps: np.ndarray, norms: np.ndarray, item: ItemTokens,
                     rows: LayerRows | None = None) -> np.ndarray:
    """(2, H) float64: the mean share of each norm-based row on the first special token and on
    the others, from one input's (H, Q, K) weights and (H, K) value norms over its real tokens,
    and the layer's pass (models.analysis.layer_pass, with NORM_PARTS; taken here when None).
    Row sums are taken as products with the norms: no (H, Q, K) norm-based map is built."""
    if rows is None:
        rows = measure(maps, item, NORM_PARTS, norms)
    special = item.special_positions.tolist()
    totals = rows.norm_sums.astype(np.float64)  # (H, Q)
    live = totals > 0
    shares = []
    for keys in (special[:1], special[1:]):
        share = np.einsum("hqs,hs->hq", maps[..., keys], norms[:, keys]).astype(np.float64)
        shares.append(row_mean(np.divide(share, totals, out=np.zeros_like(share), where=live),
                               live))
    return np.stack(shares)  # (2, H)


@dataclass(frozen=True)
class NormShareColumns:
    """NORM_COLUMNS name -> (N, L, H) float64."""

    columns: dict[str, np.ndarray]

    def item(self, index: int) -> NormShareColumns:
        return NormShareColumns({name: values[index:index + 1]
                                 for name, values in self.columns.items()})

    @property
    def nbytes(self) -> int:
        return sum(values.nbytes for values in self.columns.values())


class NormShares(PassReducer):
    """The norm-based shares of every head, layer by layer (`add` needs the value norms)."""

    def __init__(self):
        self._log: LayerLog[np.ndarray] = LayerLog()  # (2, H) per input and layer

    @property
    def parts(self) -> Parts:
        return NORM_PARTS

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        super().add(layer, maps, tokens, _checked_norms(maps, norms))

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: Sequence[LayerRows], norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        norms = _checked_norms(maps, norms)
        if tokens.rectangular:
            raise ValueError("norm-based shares on [CLS] and [SEP] need square maps")
        lengths = tokens.lengths
        self._log.put(layer, [
            item_norm_shares(tokens.cut(maps, index), norms[index, :, :lengths[index]],
                             tokens.item(index), rows[index])
            for index in range(tokens.batch_size)])

    def result(self) -> NormShareColumns:
        values = self._log.stacked()  # (N, L, 2, H)
        return NormShareColumns({name: values[:, :, column]
                                 for column, name in enumerate(NORM_COLUMNS)})


def _checked_norms(maps: np.ndarray, norms: np.ndarray | None) -> np.ndarray:
    """(B, H, K) float32 value norms that fit (B, H, Q, K) maps, or a ValueError."""
    if norms is None:
        raise ValueError("norm-based shares need the value norms ||v_j W_O^h||")
    norms = np.asarray(norms, dtype=np.float32)
    if norms.shape != (maps.shape[0], maps.shape[1], maps.shape[3]):
        raise ValueError(f"value norms {norms.shape} do not fit maps {maps.shape}")
    return norms


def add_norm_columns(table: pd.DataFrame, shares: NormShareColumns,
                     item: int = 0) -> pd.DataFrame:
    """A statistics table (one row per layer and head) with input `item`'s NORM_COLUMNS added."""
    extended = table.copy()
    for name, values in shares.columns.items():
        extended[name] = values[item].ravel()
    return extended


def with_norm_columns(table: pd.DataFrame, record: AttentionRecord,
                      norms: np.ndarray) -> pd.DataFrame:
    """`head_statistics(record)` plus the norm-based shares on [CLS] and [SEP], from the
    (L, H, Q, K) norm-based maps of the same input: the NormShares reducer over its layers, fed
    the norm-based maps as weights with unit norms (their product is the norm-based map)."""
    norms = np.asarray(norms)
    if norms.shape != (record.num_layers, record.num_heads, record.num_tokens, record.num_keys):
        raise ValueError(f"norm maps {norms.shape} do not fit the record "
                         f"{(record.num_layers, record.num_heads, record.num_tokens, record.num_keys)}")
    tokens = TokenBatch.of_record(record)
    reducer = NormShares()
    units = np.ones((1, record.num_heads, record.num_keys), dtype=np.float32)  # (1, H, K)
    for layer, weighted in enumerate(norms):
        reducer.add(layer, weighted[None].astype(np.float32, copy=False), tokens, units)
    return add_norm_columns(table, reducer.result())

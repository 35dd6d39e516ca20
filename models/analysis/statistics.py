"""Per-head statistics after Clark et al. (2019), "What Does BERT Look At?".

One value per (input, layer, head). Every statistic is a mean over the head's query rows; rows
that a mask left empty (they sum to less than EMPTY_ROW_WEIGHT) and padded rows are left out.

- entropy_bits: -sum_j w_ij log2 w_ij (0 = all weight on one key; log2(K) = uniform).
- mean_distance: sum_j w_ij |i - j|, in token positions.
- cls: weight on the first special token ([CLS] in BERT, <s> in RoBERTa/Llama).
- sep: weight on every other special token ([SEP] in BERT, </s> in RoBERTa).
- first: weight on the first token, special or not (a causal decoder's attention sink).
- punctuation: weight on tokens made only of punctuation (".", ",", "##'", "Ġ!", ...).
- self, previous, next: weight on key i, i-1, i+1; previous (next) is averaged over the rows
  that have a previous (next) token.

A rectangular map (cross-attention: target queries over source keys) has no query token that
is also a key, so mean_distance, cls, sep, self, previous and next are NaN there; entropy and
punctuation (over the source's tokens) keep their meaning.

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.analysis.columns import NUMERIC_COLUMNS, SQUARE_ONLY
from models.analysis.layer_pass import BatchRows, Parts, measure_batch
from models.analysis.reducer import (EMPTY_ROW_WEIGHT, LayerLog, PassReducer, reduce_record,
                                     row_mean)
from models.analysis.token_batch import ItemTokens, TokenBatch
from models.hooks.record import AttentionRecord

COLUMN_HELP = {
    "entropy_bits": "Entropy of a row in bits, averaged over rows: 0 = one key, log2(n) = even.",
    "mean_distance": "Average |query - key| position distance, weighted by attention.",
    "cls": "Share of attention on the first special token ([CLS]).",
    "sep": "Share of attention on the other special tokens ([SEP]).",
    "first": "Share of attention on the first token, special or not: a decoder's attention sink.",
    "punctuation": "Share of attention on punctuation tokens.",
    "self": "Share of attention on the query token itself.",
    "previous": "Share of attention on the token just before the query.",
    "next": "Share of attention on the token just after the query.",
}

# Labels: the first rule that holds, in this order.
PATTERN_SHARE = 0.5  # a head is "previous-token" etc. when at least half its weight goes there
BROAD_ENTROPY_FRACTION = 0.8  # "broad": entropy at least 80 % of an even spread over the keys
PATTERN_LABELS = {
    "previous": "previous-token", "next": "next-token", "self": "self",
    "sep": "[SEP] sink", "cls": "[CLS] sink", "punctuation": "punctuation",
    "first": "first-token sink",  # after "cls": with [CLS] first, both shares are equal
}
LOCAL_LABEL, BROAD_LABEL, MIXED_LABEL = "local", "broad", "mixed"
LABEL_RULES = (
    f"A head is labelled by the largest of its shares on the previous token, next token, itself, "
    f"[SEP], [CLS], the first token or punctuation when that share is at least {PATTERN_SHARE:.0%}; otherwise "
    f"'{BROAD_LABEL}' when its entropy is at least {BROAD_ENTROPY_FRACTION:.0%} of an even "
    f"spread over the keys; otherwise '{LOCAL_LABEL}' when self + previous + next reach "
    f"{PATTERN_SHARE:.0%}; otherwise '{MIXED_LABEL}'."
)

STATISTICS_PARTS = Parts(statistics=True)


def row_entropy_bits(weights: np.ndarray) -> np.ndarray:
    """-sum_k w log2 w along the last axis (0 log 0 = 0)."""
    logs = np.log2(weights, out=np.zeros_like(weights), where=weights > 0)
    return -np.einsum("...k,...k->...", weights, logs)


def uniform_entropy_bits(item: ItemTokens) -> float:
    """Mean entropy of an even spread over the keys each query row may see."""
    if item.rectangular:
        return float(np.log2(item.keys))
    visible = np.arange(1, item.queries + 1) if item.causal else np.full(item.queries, item.queries)
    return float(np.log2(visible).mean())


def layer_statistics(maps: np.ndarray, tokens: TokenBatch,
                     rows: BatchRows | None = None) -> np.ndarray:
    """(B, C, H) float64: every column of NUMERIC_COLUMNS for each head of a batch's layer.

    maps: (B, H, Q, K) float32 weights padded on the right (read only); rows: the layer's pass
    (models.analysis.layer_pass.measure_batch) with STATISTICS_PARTS, taken here when None.
    Each row's sums come from the pass, the means over each input's live rows (real, and not
    emptied by a mask) are taken in float64, every input at once.
    """
    if rows is None:
        rows = measure_batch(maps, tokens, STATISTICS_PARTS)
    batch, heads = maps.shape[:2]
    queries = tokens.real if tokens.query_real is None else tokens.query_real  # (B, Q)
    live = (rows.row_sums > EMPTY_ROW_WEIGHT) & queries[:, None]  # (B, H, Q)
    columns = {
        "entropy_bits": 0.0 - row_mean(rows.entropy, live) / np.log(2.0),  # nats to bits, 0 not -0
        "first": row_mean(maps[..., 0], live),
        "punctuation": row_mean(rows.shares[..., 2], live),
    }
    if not tokens.rectangular:
        has_next = tokens.real[:, None, 1:]  # (B, 1, Q-1) key q + 1 is a real token
        columns.update({
            "mean_distance": row_mean(rows.distance, live),
            "cls": row_mean(rows.shares[..., 0], live),
            "sep": row_mean(rows.shares[..., 1], live),
            "self": row_mean(np.diagonal(maps, axis1=-2, axis2=-1), live),
            "previous": row_mean(np.diagonal(maps, offset=-1, axis1=-2, axis2=-1),
                                 live[..., 1:]),  # row i, key i - 1, for i >= 1
            "next": row_mean(np.diagonal(maps, offset=1, axis1=-2, axis2=-1),
                             live[..., :-1] & has_next),  # row i, key i + 1, for i < n - 1
        })
    else:  # no key is the query itself
        columns.update({name: np.full((batch, heads), np.nan) for name in SQUARE_ONLY})
    return np.stack([columns[name] for name in NUMERIC_COLUMNS], axis=1)  # (B, C, H)


def head_labels(columns: dict[str, np.ndarray], broad_bits: np.ndarray) -> np.ndarray:
    """(N, L, H) str: each head's label by LABEL_RULES, from (N, L, H) columns and each input's
    (N,) even-spread entropy."""
    patterns = list(PATTERN_LABELS)
    shares = np.stack([columns[name] for name in patterns])  # (P, N, L, H)
    best = np.argmax(np.where(np.isfinite(shares), shares, -np.inf), axis=0)  # first of ties
    best_share = np.take_along_axis(shares, best[None], axis=0)[0]
    broad = broad_bits[:, None, None]  # (N, 1, 1)
    local = columns["self"] + columns["previous"] + columns["next"]
    names = np.array([PATTERN_LABELS[name] for name in patterns], dtype=object)
    return np.select(
        [best_share >= PATTERN_SHARE,
         (broad > 0) & (columns["entropy_bits"] >= BROAD_ENTROPY_FRACTION * broad),
         local >= PATTERN_SHARE],
        [names[best], BROAD_LABEL, LOCAL_LABEL], MIXED_LABEL).astype(object)


@dataclass(frozen=True)
class HeadStatistics:
    """Every statistic of every head of N inputs: `columns` NUMERIC_COLUMNS name -> (N, L, H)
    float64, `broad_bits` (N,) each input's even-spread entropy (for the 'broad' label)."""

    columns: dict[str, np.ndarray]
    broad_bits: np.ndarray

    @property
    def num_items(self) -> int:
        return len(self.broad_bits)

    @property
    def labels(self) -> np.ndarray:
        """(N, L, H) each head's label (LABEL_RULES)."""
        return head_labels(self.columns, self.broad_bits)

    def item(self, index: int) -> HeadStatistics:
        """Input `index` alone."""
        return HeadStatistics({name: values[index:index + 1] for name, values in
                               self.columns.items()}, self.broad_bits[index:index + 1])

    def table(self, item: int = 0) -> pd.DataFrame:
        """One row per (layer, head) of input `item`: layer, head, label, NUMERIC_COLUMNS."""
        one = self.item(item)
        layers, heads = one.columns[NUMERIC_COLUMNS[0]].shape[1:]
        layer_index, head_index = np.meshgrid(np.arange(layers), np.arange(heads),
                                              indexing="ij")  # (L, H)
        table = pd.DataFrame({"layer": layer_index.ravel(), "head": head_index.ravel(),
                              "label": one.labels[0].ravel().tolist()})
        for name in NUMERIC_COLUMNS:
            table[name] = one.columns[name][0].ravel()
        return table

    @property
    def nbytes(self) -> int:
        return sum(values.nbytes for values in self.columns.values()) + self.broad_bits.nbytes


class Statistics(PassReducer):
    """The statistics of every head, layer by layer; `result()` is HeadStatistics."""

    def __init__(self):
        self._log: LayerLog[np.ndarray] = LayerLog()  # (C, H) per input and layer
        self._broad_bits: list[float] = []

    @property
    def parts(self) -> Parts:
        return STATISTICS_PARTS

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: BatchRows, norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        self._log.put(layer, list(layer_statistics(maps, tokens, rows)))  # (C, H) per input
        if layer == 0:
            self._broad_bits.extend(uniform_entropy_bits(tokens.item(index))
                                    for index in range(tokens.batch_size))

    def result(self) -> HeadStatistics:
        values = self._log.stacked()  # (N, L, C, H)
        return HeadStatistics({name: values[:, :, column] for column, name in
                               enumerate(NUMERIC_COLUMNS)}, np.array(self._broad_bits))


def head_statistics(record: AttentionRecord) -> pd.DataFrame:
    """One row per (layer, head) of `record`: the statistics above and a label (LABEL_RULES):
    the Statistics reducer over the record's layers."""
    (statistics,) = reduce_record(record, Statistics())
    return statistics.table()

"""Per-head statistics after Clark et al. (2019), "What Does BERT Look At?".

One row per (layer, head). Every statistic is a mean over the head's query rows; rows that a
mask left empty (they sum to 0) are left out.

- entropy_bits: -sum_j w_ij log2 w_ij (0 = all weight on one key; log2(K) = uniform).
- mean_distance: sum_j w_ij |i - j|, in token positions.
- cls: weight on the first special token ([CLS] in BERT, <s> in RoBERTa/Llama).
- sep: weight on every other special token ([SEP] in BERT, </s> in RoBERTa).
- first: weight on the first token, special or not (a causal decoder's attention sink).
- punctuation: weight on tokens made only of punctuation (".", ",", "##'", "Ġ!", ...).
- self, previous, next: weight on key i, i-1, i+1; previous (next) is averaged over the rows
  that have a previous (next) token.

A rectangular record (cross-attention: target queries over source keys) has no query token that
is also a key, so mean_distance, cls, sep, self, previous and next are NaN there; entropy and
punctuation (over the source's tokens) keep their meaning.

Everything is measured one layer at a time (`layer_statistics`, on one (H, Q, K) array), so a
long input streamed layer by layer and a full record give the same numbers by construction.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz.heatmap import matrix_heatmap
from viz.tokens import EMPTY_ROW_WEIGHT, WORD_START_MARKERS, WORDPIECE_CONTINUATION

SHARE_COLUMNS = ("cls", "sep", "first", "punctuation", "self", "previous", "next")
NUMERIC_COLUMNS = ("entropy_bits", "mean_distance") + SHARE_COLUMNS
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


def is_punctuation(token: str) -> bool:
    """True for tokens made only of Unicode punctuation once word-piece markers are removed."""
    text = token.removeprefix(WORDPIECE_CONTINUATION).lstrip("".join(WORD_START_MARKERS))
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def _row_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean over the query axis (-1) of (..., Q) values, counting only the rows marked True."""
    count = rows.sum(axis=-1)
    total = np.where(rows, values.astype(np.float64), 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def row_entropy_bits(weights: np.ndarray) -> np.ndarray:
    """-sum_k w log2 w along the last axis (0 log 0 = 0)."""
    logs = np.log2(weights, out=np.zeros_like(weights), where=weights > 0)
    return -np.einsum("...k,...k->...", weights, logs)


@dataclass(frozen=True)
class StatisticsInput:
    """What the statistics need to know about an input besides its maps: the key tokens, which
    of them are special, whether a causal mask hides every later key, and whether the keys are a
    different sequence from the queries (cross-attention)."""

    keys: tuple[str, ...]
    special_positions: tuple[int, ...] = ()
    causal: bool = False
    rectangular: bool = False

    @classmethod
    def of(cls, record: AttentionRecord) -> StatisticsInput:
        return cls(keys=record.keys, special_positions=record.special_positions,
                   causal="causal" in record.masks, rectangular=record.is_rectangular)

    def key_sets(self) -> np.ndarray:
        """(K, 3) float32 indicators of [CLS], [SEP] and punctuation keys."""
        special = [] if self.rectangular else list(self.special_positions)
        sets = np.zeros((len(self.keys), 3), dtype=np.float32)  # (K, 3)
        sets[special[:1], 0] = 1.0
        sets[special[1:], 1] = 1.0
        sets[[p for p, t in enumerate(self.keys) if p not in special and is_punctuation(t)],
             2] = 1.0
        return sets

    def uniform_entropy_bits(self, queries: int) -> float:
        """Mean entropy of an even spread over the keys each of `queries` rows may see."""
        if self.rectangular:
            return float(np.log2(len(self.keys)))
        visible = np.arange(1, queries + 1) if self.causal else np.full(queries, queries)
        return float(np.log2(visible).mean())


# One layer is read in blocks of query rows holding at most this many weights, so the
# temporaries (logs, weights times distances) stay small at any length: 8 M floats = 32 MB.
BLOCK_WEIGHTS = 1 << 23
_TINY = np.finfo(np.float32).tiny  # log(max(w, tiny)) * w is 0 for w = 0 and w log w otherwise


def layer_statistics(maps: np.ndarray, given: StatisticsInput) -> dict[str, np.ndarray]:
    """The statistics of every head of one layer: column name -> (H,) float64 values.

    maps: (H, Q, K) float32 weights (read only). The layer is read in blocks of query rows, in
    float32 with float64 means, and a causal layer's hidden keys (right of the diagonal, all
    zero) are not read: this is what `head_statistics` runs on every layer, and what a long
    input's streamed forward runs on each layer as it is computed.
    """
    heads, queries, keys = maps.shape
    key_sets = given.key_sets()  # (K, 3)
    row_sums = np.empty((heads, queries), np.float32)  # (H, Q)
    entropy = np.empty((heads, queries), np.float32)
    shares = np.empty((heads, queries, 3), np.float32)  # (H, Q, 3)
    distance = np.zeros((heads, queries), np.float32)  # (H, Q), square maps only
    rows_per_block = max(1, BLOCK_WEIGHTS // max(heads * keys, 1))
    scratch = np.empty((heads, min(rows_per_block, queries), keys), np.float32)
    positions = np.arange(keys, dtype=np.float32)
    for start in range(0, queries, rows_per_block):
        stop = min(start + rows_per_block, queries)
        seen = min(stop, keys) if given.causal and not given.rectangular else keys
        block = maps[:, start:stop, :seen]  # (H, b, k): the keys these rows may see
        work = scratch[:, :stop - start, :seen]
        row_sums[:, start:stop] = block.sum(axis=-1)
        np.maximum(block, _TINY, out=work)
        np.log(work, out=work)
        np.multiply(work, block, out=work)
        entropy[:, start:stop] = work.sum(axis=-1)
        shares[:, start:stop] = block @ key_sets[:seen]  # (H, b, 3)
        if not given.rectangular:
            offsets = np.arange(start, stop, dtype=np.float32)[:, None] - positions[:seen]
            np.multiply(block, np.abs(offsets), out=work)  # (H, b, k) weight x |query - key|
            distance[:, start:stop] = work.sum(axis=-1)
    live = row_sums > EMPTY_ROW_WEIGHT  # (H, Q)
    columns = {
        "entropy_bits": 0.0 - _row_mean(entropy, live) / np.log(2.0),  # nats to bits, 0 not -0
        "first": _row_mean(maps[..., 0], live),
        "punctuation": _row_mean(shares[..., 2], live),
    }
    if given.rectangular:  # no key is the query itself
        unmeasured = np.full(heads, np.nan)
        return {**columns, **{name: unmeasured for name in
                              ("mean_distance", "cls", "sep", "self", "previous", "next")}}
    return {
        **columns,
        "mean_distance": _row_mean(distance, live),
        "cls": _row_mean(shares[..., 0], live),
        "sep": _row_mean(shares[..., 1], live),
        "self": _row_mean(np.diagonal(maps, axis1=-2, axis2=-1), live),
        "previous": _row_mean(np.diagonal(maps, offset=-1, axis1=-2, axis2=-1),
                              live[..., 1:]),  # row i, key i - 1, for i >= 1
        "next": _row_mean(np.diagonal(maps, offset=1, axis1=-2, axis2=-1),
                          live[..., :-1]),  # row i, key i + 1, for i < Q - 1
    }


def statistics_table(layers: Sequence[dict[str, np.ndarray]], given: StatisticsInput,
                     queries: int) -> pd.DataFrame:
    """One row per (layer, head) from each layer's `layer_statistics`, with its label."""
    columns = {name: np.stack([layer[name] for layer in layers]) for name in NUMERIC_COLUMNS}
    num_layers, num_heads = columns[NUMERIC_COLUMNS[0]].shape  # (L, H)
    layer_index, head_index = np.meshgrid(np.arange(num_layers), np.arange(num_heads),
                                          indexing="ij")  # (L, H)
    table = pd.DataFrame({"layer": layer_index.ravel(), "head": head_index.ravel()})
    for name, values in columns.items():
        table[name] = values.ravel()
    broad_bits = given.uniform_entropy_bits(queries)
    table.insert(2, "label", [_label(row, broad_bits) for _, row in table.iterrows()])
    return table


def _label(row: pd.Series, broad_bits: float) -> str:
    measured = [column for column in PATTERN_LABELS if np.isfinite(row[column])]
    best = max(measured, key=lambda column: row[column])
    if row[best] >= PATTERN_SHARE:
        return PATTERN_LABELS[best]
    if broad_bits > 0 and row["entropy_bits"] >= BROAD_ENTROPY_FRACTION * broad_bits:
        return BROAD_LABEL
    if row["self"] + row["previous"] + row["next"] >= PATTERN_SHARE:
        return LOCAL_LABEL
    return MIXED_LABEL


def head_statistics(record: AttentionRecord) -> pd.DataFrame:
    """One row per (layer, head): the statistics above and a label (see LABEL_RULES), computed
    layer by layer (`layer_statistics`), as a long input's streamed forward computes them."""
    given = StatisticsInput.of(record)
    return statistics_table([layer_statistics(record.layer(index), given)
                             for index in range(record.num_layers)], given, record.num_tokens)


def statistic_heatmap(table: pd.DataFrame, column: str) -> go.Figure:
    """A layer x head map of one numeric column of `head_statistics`."""
    if column not in NUMERIC_COLUMNS:
        raise ValueError(f"'{column}' is not one of {NUMERIC_COLUMNS}")
    grid = table.pivot(index="layer", columns="head", values=column)  # (L, H)
    values = grid.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]  # NaN where a statistic does not apply
    zmax = 1.0 if column in SHARE_COLUMNS else max(float(finite.max(initial=0.0)), 1e-9)
    return matrix_heatmap(
        values, tuple(str(h) for h in grid.columns), f"{column} for every layer and head",
        zmin=0.0, zmax=zmax, colorbar_title=column,
        row_tokens=tuple(str(layer) for layer in grid.index), axis_titles=("layer", "head"),
    )


def statistics_csv(table: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV (no index column), ready for a download button."""
    return table.to_csv(index=False, float_format="%.6g").encode("utf-8")


NORM_COLUMNS = ("norm_cls", "norm_sep")
NORM_COLUMN_HELP = {
    "norm_cls": "Share of the norm-based attention ‖α·f(x)‖ (Kobayashi et al. 2020) on the "
                "first special token: compare with 'cls' to see how little that weight moves.",
    "norm_sep": "Share of the norm-based attention ‖α·f(x)‖ on the other special tokens "
                "([SEP]): compare with 'sep'.",
}


def with_norm_columns(table: pd.DataFrame, record: AttentionRecord,
                      norms: np.ndarray) -> pd.DataFrame:
    """`head_statistics(record)` plus the norm-based shares on [CLS] and [SEP].

    norms: (L, H, Q, K) norm-based maps of the same input. Each row is divided by its sum, so a
    share is comparable with the weight columns; rows that sum to 0 are left out.
    """
    norms = np.asarray(norms, dtype=np.float64)
    if norms.shape != record.weights.shape:
        raise ValueError(f"norm maps {norms.shape} do not fit the record {record.weights.shape}")
    totals = norms.sum(axis=-1)  # (L, H, Q)
    special = list(record.special_positions)
    shares = {
        "norm_cls": norms[..., special[:1]].sum(axis=-1),  # (L, H, Q)
        "norm_sep": norms[..., special[1:]].sum(axis=-1),
    }
    live = totals > 0
    extended = table.copy()
    for name, share in shares.items():
        fraction = np.divide(share, totals, out=np.zeros_like(share), where=live)
        extended[name] = _row_mean(fraction, live).ravel()
    return extended

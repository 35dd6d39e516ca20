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
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.record import AttentionRecord
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
    """Mean over the query axis (-1) of (L, H, Q) values, counting only the rows marked True."""
    count = rows.sum(axis=-1)
    total = np.where(rows, values.astype(np.float64), 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def row_entropy_bits(weights: np.ndarray) -> np.ndarray:
    """-sum_k w log2 w along the last axis (0 log 0 = 0)."""
    logs = np.log2(weights, out=np.zeros_like(weights), where=weights > 0)
    return -np.einsum("...k,...k->...", weights, logs)


def _uniform_entropy_bits(record: AttentionRecord) -> float:
    """Mean entropy of an even spread over the keys each row may see."""
    if record.is_rectangular:
        return float(np.log2(record.num_keys))
    count = record.num_tokens
    visible = np.arange(1, count + 1) if "causal" in record.masks else np.full(count, count)
    return float(np.log2(visible).mean())


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
    """One row per (layer, head): the statistics above and a label (see LABEL_RULES)."""
    weights = record.weights  # (L, H, Q, K), float32
    count = record.num_tokens
    live = weights.sum(axis=-1) > EMPTY_ROW_WEIGHT  # (L, H, Q)
    special = [] if record.is_rectangular else list(record.special_positions)
    key_sets = np.zeros((record.num_keys, 3), dtype=weights.dtype)  # (K, 3): [CLS], [SEP], punct.
    key_sets[special[:1], 0] = 1.0
    key_sets[special[1:], 1] = 1.0
    key_sets[[p for p, t in enumerate(record.keys) if p not in special and is_punctuation(t)],
             2] = 1.0
    shares = weights @ key_sets  # (L, H, Q, 3)
    if record.is_rectangular:
        unmeasured = np.full(weights.shape[:2], np.nan)  # (L, H): no key is the query itself
        columns = {
            "entropy_bits": _row_mean(row_entropy_bits(weights), live),
            "mean_distance": unmeasured, "cls": unmeasured, "sep": unmeasured,
            "first": _row_mean(weights[..., 0], live),
            "punctuation": _row_mean(shares[..., 2], live),
            "self": unmeasured, "previous": unmeasured, "next": unmeasured,
        }
        return _table(record, columns)
    positions = np.arange(count)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(weights.dtype)  # (Q, K)
    columns = {
        "entropy_bits": _row_mean(row_entropy_bits(weights), live),
        "mean_distance": _row_mean(np.einsum("lhqk,qk->lhq", weights, distance), live),
        "cls": _row_mean(shares[..., 0], live),
        "sep": _row_mean(shares[..., 1], live),
        "first": _row_mean(weights[..., 0], live),
        "punctuation": _row_mean(shares[..., 2], live),
        "self": _row_mean(np.diagonal(weights, axis1=-2, axis2=-1), live),
        "previous": _row_mean(np.diagonal(weights, offset=-1, axis1=-2, axis2=-1),
                              live[..., 1:]),  # row i, key i - 1, for i >= 1
        "next": _row_mean(np.diagonal(weights, offset=1, axis1=-2, axis2=-1),
                          live[..., :-1]),  # row i, key i + 1, for i < Q - 1
    }
    return _table(record, columns)


def _table(record: AttentionRecord, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    layers, heads = np.meshgrid(np.arange(record.num_layers), np.arange(record.num_heads),
                                indexing="ij")  # (L, H)
    table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel()})
    for name, values in columns.items():
        table[name] = values.ravel()
    broad_bits = _uniform_entropy_bits(record)
    table.insert(2, "label", [_label(row, broad_bits) for _, row in table.iterrows()])
    return table


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

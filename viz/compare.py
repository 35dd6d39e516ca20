"""Two inputs through the same model: which heads attend most differently?

Difference of one head between input A and input B, in bits (0 = same, 1 = nothing in common),
using the Jensen-Shannon divergence JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½ (P + Q):

- aligned_jsd (only when both inputs have the same number of tokens): the JSD between the
  head's row i for A and its row i for B, averaged over the positions i (rows a mask emptied
  are left out). Position i is the same slot in both sentences, so this compares the maps
  cell by cell.
- role_jsd (any lengths): the JSD between the head's "role" distributions: its weight, averaged
  over the query rows, on the first special token, the other special tokens, the token itself,
  the previous token, the next token, other earlier tokens, and other later tokens (each key
  counted once, in that order). It compares what kind of token a head looks at, not where.
- difference: aligned_jsd when the lengths match, else role_jsd. Heads are ranked by it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.record import AttentionRecord
from viz.heatmap import matrix_heatmap
from viz.statistics import head_statistics, row_entropy_bits
from viz.tokens import EMPTY_ROW_WEIGHT

MIN_DIFFERENCE_SCALE = 0.01  # colour scale top when the two inputs are (almost) the same
ROLES = ("first special", "other special", "self", "previous", "next", "earlier", "later")


def jensen_shannon_bits(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JSD in bits along the last axis of two arrays of distributions: H(M) - (H(P) + H(Q)) / 2."""
    divergence = row_entropy_bits((p + q) / 2) - (row_entropy_bits(p) + row_entropy_bits(q)) / 2
    return np.clip(divergence, 0.0, 1.0)


def role_distribution(record: AttentionRecord) -> np.ndarray:
    """(L, H, R): each head's mean weight on each of ROLES (sums to 1 over R for live heads)."""
    count = record.num_tokens
    queries, keys = np.indices((count, count))  # (Q, K)
    role = np.where(keys < queries, ROLES.index("earlier"), ROLES.index("later"))
    role[keys == queries - 1] = ROLES.index("previous")
    role[keys == queries + 1] = ROLES.index("next")
    role[keys == queries] = ROLES.index("self")
    special = list(record.special_positions)
    role[:, special[1:]] = ROLES.index("other special")
    role[:, special[:1]] = ROLES.index("first special")
    one_hot = np.eye(len(ROLES), dtype=record.weights.dtype)[role]  # (Q, K, R)
    weights = record.weights
    per_row = np.einsum("lhqk,qkr->lhqr", weights, one_hot, optimize=True)  # (L, H, Q, R)
    live = weights.sum(axis=-1) > EMPTY_ROW_WEIGHT  # (L, H, Q)
    count_live = np.maximum(live.sum(axis=-1, keepdims=True), 1)  # (L, H, 1)
    return (per_row * live[..., None]).sum(axis=-2, dtype=np.float64) / count_live


def aligned_divergence(first: AttentionRecord, second: AttentionRecord) -> np.ndarray:
    """(L, H): mean over positions of the JSD between the two inputs' rows (same length only)."""
    if first.num_tokens != second.num_tokens:
        raise ValueError("position-aligned comparison needs inputs with the same number of tokens")
    p, q = first.weights, second.weights  # (L, H, Q, K) each
    both = (p.sum(axis=-1) > EMPTY_ROW_WEIGHT) & (q.sum(axis=-1) > EMPTY_ROW_WEIGHT)  # (L, H, Q)
    rows = jensen_shannon_bits(p, q)  # (L, H, Q)
    count = both.sum(axis=-1)
    total = np.where(both, rows, 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def ranking_measure(first: AttentionRecord, second: AttentionRecord) -> str:
    """One sentence saying which difference the ranking uses for these two inputs."""
    if first.num_tokens == second.num_tokens:
        return (f"Both inputs have {first.num_tokens} tokens, so heads are ranked by the "
                "position-aligned difference: the Jensen-Shannon divergence (in bits, 0 to 1) "
                "between the head's rows for the same position, averaged over positions.")
    return (f"The inputs have {first.num_tokens} and {second.num_tokens} tokens, so heads are "
            "ranked by the difference of their roles: the Jensen-Shannon divergence (in bits, "
            "0 to 1) between how much weight each puts on [CLS], [SEP], itself, the previous "
            "token, the next token, and other earlier or later tokens.")


def compare_heads(first: AttentionRecord, second: AttentionRecord) -> pd.DataFrame:
    """One row per (layer, head), the most different first (see the module docstring)."""
    if first.weights.shape[:2] != second.weights.shape[:2]:
        raise ValueError("the two records come from models with different layers or heads")
    stats_first, stats_second = head_statistics(first), head_statistics(second)
    table = stats_first[["layer", "head"]].copy()
    table["role_jsd"] = jensen_shannon_bits(role_distribution(first),
                                            role_distribution(second)).ravel()
    if first.num_tokens == second.num_tokens:
        table["aligned_jsd"] = aligned_divergence(first, second).ravel()
        table.insert(2, "difference", table["aligned_jsd"])
    else:
        table.insert(2, "difference", table["role_jsd"])
    table["label_first"] = stats_first["label"]
    table["label_second"] = stats_second["label"]
    table = table.sort_values(["difference", "layer", "head"], ascending=[False, True, True],
                              kind="stable")
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table.reset_index(drop=True)


def difference_heatmap(table: pd.DataFrame) -> go.Figure:
    """A layer x head map of the ranking's difference column (bits), scaled to its largest value."""
    grid = table.pivot(index="layer", columns="head", values="difference")  # (L, H)
    values = grid.to_numpy(dtype=float)
    return matrix_heatmap(
        values, tuple(str(h) for h in grid.columns),
        "How differently each head attends to the two inputs", zmin=0.0,
        zmax=max(float(values.max()), MIN_DIFFERENCE_SCALE),
        colorbar_title="difference (bits)", row_tokens=tuple(str(i) for i in grid.index),
        axis_titles=("layer", "head"),
    )


def side_by_side(first: AttentionRecord, second: AttentionRecord,
                 layer: int, head: int) -> tuple[go.Figure, go.Figure]:
    """The chosen head's map for each input, on the same [0, 1] scale."""
    return tuple(
        matrix_heatmap(record.head(layer, head), record.tokens,
                       f"{name} · layer {layer}, head {head}")
        for name, record in (("First input", first), ("Second input", second))
    )

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

from models.hooks.record import AttentionRecord
from viz.heatmap import matrix_heatmap
from viz.statistics import head_statistics, row_entropy_bits
from viz.tokens import EMPTY_ROW_WEIGHT

MIN_DIFFERENCE_SCALE = 0.01  # colour scale top when the two inputs are (almost) the same
ROLE_BLOCK = 256  # query rows `layer_roles` reads at a time
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


def layer_roles(maps: np.ndarray, special_positions) -> np.ndarray:
    """(H, R) float64: one layer's `role_distribution` from its (H, Q, K) float32 maps (read only,
    square), with the same roles, special-token precedence and live rows.

    Read in blocks of ROLE_BLOCK query rows: each row's weight left and right of the diagonal
    (the block's columns outside it are summed whole; only its (H, b, b) corner is copied to
    cut it), the three diagonals and the special columns. No (Q, K) array is built, and a
    row's total (left + diagonal + right) decides whether it is live.
    """
    heads, count, keys = maps.shape
    if keys != count:
        raise ValueError(f"roles need square maps, got {maps.shape}")
    special = list(special_positions)
    first = special[:1]
    others = sorted(set(special[1:]) - set(first))
    specials = np.array(sorted(set(special)), dtype=np.int64)  # (S,)
    left, right = np.empty((heads, count)), np.empty((heads, count))  # (H, Q) k < q, k > q
    for start in range(0, count, ROLE_BLOCK):
        end = min(start + ROLE_BLOCK, count)
        rows = maps[:, start:end]  # (H, b, K) view
        corner = rows[:, :, start:end]  # (H, b, b)
        left[:, start:end] = rows[:, :, :start].sum(axis=-1) + np.tril(corner, -1).sum(axis=-1)
        right[:, start:end] = rows[:, :, end:].sum(axis=-1) + np.triu(corner, 1).sum(axis=-1)
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
    role_jsd = jensen_shannon_bits(role_distribution(first), role_distribution(second))  # (L, H)
    aligned = (aligned_divergence(first, second) if first.num_tokens == second.num_tokens
               else None)
    return _ranked(role_jsd, stats_first["label"], stats_second["label"], aligned)


def compare_role_tables(first_roles: np.ndarray, second_roles: np.ndarray, first_labels,
                        second_labels) -> pd.DataFrame:
    """`compare_heads`' ranking by roles alone, from each input's (L, H, R) role shares
    (`role_distribution`, or `layer_roles` of each layer stacked) and each input's (L * H,) head
    labels (the `label` column of `head_statistics`, ordered by layer, then head): what is known
    of an input read layer by layer, whatever the lengths."""
    first_roles, second_roles = np.asarray(first_roles), np.asarray(second_roles)
    if first_roles.shape != second_roles.shape or first_roles.shape[-1:] != (len(ROLES),):
        raise ValueError("the two inputs' roles come from models with different layers or heads")
    return _ranked(jensen_shannon_bits(first_roles, second_roles), first_labels, second_labels)


def _ranked(role_jsd: np.ndarray, first_labels, second_labels,
            aligned: np.ndarray | None = None) -> pd.DataFrame:
    """The ranking table from (L, H) role JSDs (and position-aligned JSDs, when the lengths
    match): rank, layer, head, difference, role_jsd[, aligned_jsd], label_first, label_second."""
    layers, heads = role_jsd.shape
    layer, head = np.divmod(np.arange(layers * heads), heads)  # (L*H,) each
    table = pd.DataFrame({"layer": layer, "head": head, "role_jsd": role_jsd.ravel()})
    if aligned is not None:
        table["aligned_jsd"] = aligned.ravel()
    table.insert(2, "difference", table["role_jsd" if aligned is None else "aligned_jsd"])
    for column, labels in (("label_first", first_labels), ("label_second", second_labels)):
        labels = pd.Series(labels).reset_index(drop=True)
        if len(labels) != len(table):
            raise ValueError(f"{len(labels)} head labels for {layers} layers x {heads} heads")
        table[column] = labels
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

"""Two inputs through the same model: which heads attend most differently?

Difference of one head between input A and input B, in bits (0 = same, 1 = nothing in common),
using the Jensen-Shannon divergence JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½ (P + Q):

- aligned_jsd (only when both inputs have the same number of tokens): the JSD between the
  head's row i for A and its row i for B, averaged over the positions i (rows a mask emptied
  are left out). Position i is the same slot in both sentences, so this compares the maps
  cell by cell.
- role_jsd (any lengths): the JSD between the head's role distributions (models.analysis.roles):
  it compares what kind of token a head looks at, not where.
- difference: aligned_jsd when the lengths match, else role_jsd. Heads are ranked by it.

Dimensions: L layers, H heads, Q/K query/key positions, R roles.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.analysis.reducer import EMPTY_ROW_WEIGHT, reduce_record
from models.analysis.roles import ROLES, Roles
from models.analysis.statistics import Statistics, row_entropy_bits
from models.hooks.record import AttentionRecord


def jensen_shannon_bits(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JSD in bits along the last axis of two arrays of distributions: H(M) - (H(P) + H(Q)) / 2."""
    divergence = row_entropy_bits((p + q) / 2) - (row_entropy_bits(p) + row_entropy_bits(q)) / 2
    return np.clip(divergence, 0.0, 1.0)


def aligned_divergence(first: AttentionRecord, second: AttentionRecord) -> np.ndarray:
    """(L, H): mean over positions of the JSD between the two inputs' rows (same length only),
    one layer at a time."""
    if first.num_tokens != second.num_tokens:
        raise ValueError("position-aligned comparison needs inputs with the same number of tokens")
    means = []
    for p, q in zip(first.layers, second.layers):  # (H, Q, K) each
        both = (p.sum(axis=-1) > EMPTY_ROW_WEIGHT) & (q.sum(axis=-1) > EMPTY_ROW_WEIGHT)  # (H, Q)
        rows = jensen_shannon_bits(p, q)  # (H, Q)
        count = both.sum(axis=-1)
        total = np.where(both, rows, 0.0).sum(axis=-1)
        means.append(np.divide(total, count, out=np.zeros_like(total), where=count > 0))
    return np.stack(means)


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
    """One row per (layer, head), the most different first (see the module docstring): the
    Roles and Statistics reducers over each record's layers."""
    if first.weights.shape[:2] != second.weights.shape[:2]:
        raise ValueError("the two records come from models with different layers or heads")
    roles_first, stats_first = reduce_record(first, Roles(), Statistics())
    roles_second, stats_second = reduce_record(second, Roles(), Statistics())
    role_jsd = jensen_shannon_bits(roles_first.of(), roles_second.of())  # (L, H)
    aligned = (aligned_divergence(first, second) if first.num_tokens == second.num_tokens
               else None)
    return _ranked(role_jsd, stats_first.labels[0].ravel(), stats_second.labels[0].ravel(),
                   aligned)


def compare_role_tables(first_roles: np.ndarray, second_roles: np.ndarray, first_labels,
                        second_labels) -> pd.DataFrame:
    """`compare_heads`' ranking by roles alone, from each input's (L, H, R) role shares
    (RoleShares.of) and each input's (L * H,) head labels (ordered by layer, then head): what
    is known of an input read layer by layer, whatever the lengths."""
    first_roles, second_roles = np.asarray(first_roles), np.asarray(second_roles)
    if first_roles.shape != second_roles.shape or first_roles.shape[-1:] != (len(ROLES),):
        raise ValueError("the two inputs' roles come from models with different layers or heads")
    return _ranked(jensen_shannon_bits(first_roles, second_roles), first_labels, second_labels)


def head_changes(before: AttentionRecord, after: AttentionRecord) -> pd.DataFrame:
    """compare_heads' ranking of one input before and after fine-tuning, most changed head
    first, its label columns named "label before" and "label after"."""
    return compare_heads(before, after).rename(columns={"label_first": "label before",
                                                        "label_second": "label after"})


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

"""Figures and tables for "which heads matter": layer x head maps, rankings, predictions.

Pure functions on arrays the models computed: (L, H) scores in, a Plotly figure or a DataFrame
out. Layer x head maps reuse the one heatmap builder (viz.heatmap.matrix_heatmap).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz import style
from viz.heatmap import fit_rows, matrix_heatmap


def layer_head_map(scores: np.ndarray, title: str, colorbar_title: str, *,
                   zmin: float = 0.0, zmax: float = 1.0, diverging: bool = False) -> go.Figure:
    """A layer x head map of (L, H) scores; `diverging` centres a red-blue scale on 0. Its cells
    fill the page's width (a 30 x 9 map of square cells was a narrow strip whose head labels
    overlapped)."""
    scores = np.asarray(scores, dtype=float)
    layers, heads = scores.shape
    figure = matrix_heatmap(
        scores, tuple(str(h) for h in range(heads)), title, zmin=zmin, zmax=zmax,
        colorbar_title=colorbar_title, row_tokens=tuple(str(layer) for layer in range(layers)),
        axis_titles=("layer", "head"),
    )
    if diverging:
        figure.update_traces(colorscale=style.DIVERGING_COLORSCALE, zmid=0.0)
    return fit_rows(figure, layers)


def ranked_heads(scores: np.ndarray, value_name: str = "score") -> pd.DataFrame:
    """Every head of (L, H) scores as rows (rank, layer, head, value), highest first."""
    scores = np.asarray(scores, dtype=float)
    layers, heads = np.meshgrid(np.arange(scores.shape[0]), np.arange(scores.shape[1]),
                                indexing="ij")  # (L, H)
    table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(),
                          value_name: scores.ravel()})
    table = table.sort_values(value_name, ascending=False, kind="stable").reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table


def ranking_table(scores: np.ndarray, strongest: Sequence[Sequence[str]]) -> pd.DataFrame:
    """The head finder's table: every head ranked by its (L, H) attention to the keys, with the
    key each head's query looks at most (`strongest[layer][head]`, a token)."""
    table = ranked_heads(scores, "attention")
    table["strongest key"] = [strongest[layer][head]
                              for layer, head in zip(table["layer"], table["head"])]
    return table


def importance_map(changes: np.ndarray, target: str) -> go.Figure:
    """The single-head ablation grid: change of the target's log-probability per head."""
    changes = np.asarray(changes, dtype=float)
    limit = max(float(np.abs(changes).max()), style.MIN_COLOR_RANGE)
    return layer_head_map(changes, f"Change of log P({target}) when one head is ablated",
                          "Δ log P", zmin=-limit, zmax=limit, diverging=True)


def most_important(changes: np.ndarray, count: int) -> pd.DataFrame:
    """The `count` heads whose ablation changes the log-probability most, largest |change| first."""
    changes = np.asarray(changes, dtype=float)
    order = np.argsort(-np.abs(changes), axis=None, kind="stable")[:count]
    layers, heads = np.unravel_index(order, changes.shape)
    return pd.DataFrame({"layer": layers, "head": heads,
                         "change of log-probability": changes[layers, heads]})


def prediction_table(before: Sequence[tuple[str, float]],
                     after: Sequence[tuple[str, float]]) -> pd.DataFrame:
    """Top predictions before and after an edit, side by side: (text, probability) pairs."""
    rows = max(len(before), len(after))

    def column(pairs, index):
        return [pairs[i][index] if i < len(pairs) else None for i in range(rows)]

    return pd.DataFrame({
        "before": [repr(t) if t is not None else "" for t in column(before, 0)],
        "P before": column(before, 1),
        "after": [repr(t) if t is not None else "" for t in column(after, 0)],
        "P after": column(after, 1),
    })


def norm_heatmap(tokens: tuple[str, ...], norms: np.ndarray, layer: int, head: int) -> go.Figure:
    """One head's norm-based map ||alpha_ij f(x_j)|| (Kobayashi et al. 2020), on its own scale."""
    norms = np.asarray(norms, dtype=float)
    top = max(float(norms.max()), style.MIN_COLOR_RANGE)
    return matrix_heatmap(norms, tokens, f"Layer {layer} · Head {head}: ‖α·f(x)‖",
                          zmin=0.0, zmax=top, colorbar_title="‖α·f(x)‖")

"""Figures and a table for the arithmetic of one attention row (models.arithmetic.RowArithmetic)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from models.arithmetic import RowArithmetic
from viz import style
from viz.labels import numbered_labels

MASKED_COLOUR = "#bdbdbd"


def key_labels(tokens: tuple[str, ...]) -> list[str]:
    return numbered_labels(tokens)


def row_steps_figure(row: RowArithmetic, tokens: tuple[str, ...]) -> go.Figure:
    """q.k, then divided by sqrt(d_k), then the softmax, one bar per key, on linked x axes."""
    labels = key_labels(tokens)
    blocked = ~row.allowed
    figure = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08,
        subplot_titles=["1. q · k  (one dot product per key)",
                        f"2. divided by √d_k = √{row.query.shape[-1]} = {row.scale:.3f}; masked keys greyed",
                        "3. softmax over the allowed keys: the attention weights (sum to 1)"],
    )
    figure.add_trace(go.Bar(x=labels, y=row.dots, name="q · k", marker_color=style.STEP_COLOURS[0],
                            hovertemplate="%{x}<br>q · k = %{y:.4f}<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Bar(
        x=labels, y=row.scaled, name="q · k / √d_k",
        marker_color=[MASKED_COLOUR if b else style.STEP_COLOURS[1] for b in blocked],
        customdata=np.where(blocked, "masked: never attended", "allowed"),
        hovertemplate="%{x}<br>scaled = %{y:.4f}<br>%{customdata}<extra></extra>",
    ), row=2, col=1)
    figure.add_trace(go.Bar(x=labels, y=row.weights, name="softmax", marker_color=style.STEP_COLOURS[2],
                            hovertemplate="%{x}<br>weight = %{y:.4f}<extra></extra>"), row=3, col=1)
    figure.update_yaxes(range=[0, 1], row=3, col=1)
    figure.update_layout(
        showlegend=False, font=style.FONT, height=620, margin=dict(l=10, r=10, t=40, b=10),
        plot_bgcolor="white", bargap=0.25,
    )
    figure.update_yaxes(gridcolor="#eeeeee", zerolinecolor="#999999")
    figure.update_annotations(font_size=style.FONT["size"])
    return figure


def vectors_figure(row: RowArithmetic, tokens: tuple[str, ...]) -> go.Figure:
    """The query vector, every key and value vector, and the weighted sum, as columns of numbers."""
    labels = key_labels(tokens)
    stacked = np.concatenate([row.query[None], row.keys, row.values, row.output[None]])
    limit = float(np.abs(stacked).max()) or 1.0
    figure = make_subplots(rows=1, cols=4, column_widths=[0.08, 0.42, 0.42, 0.08],
                           horizontal_spacing=0.04,
                           subplot_titles=["query q", "keys k_j", "values v_j", "Σ w_j v_j"])
    dims = list(range(row.query.shape[-1]))
    common = dict(colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit, coloraxis=None, showscale=False)
    figure.add_trace(go.Heatmap(z=row.query[:, None], y=dims, x=[labels[row.query_index]],
                                hovertemplate="dim %{y}: %{z:.4f}<extra></extra>", **common), 1, 1)
    for col, matrix, name in ((2, row.keys, "k"), (3, row.values, "v")):
        figure.add_trace(go.Heatmap(
            z=matrix.T, x=labels, y=dims,
            hovertemplate=f"{name} of %{{x}}<br>dim %{{y}}: %{{z:.4f}}<extra></extra>", **common,
        ), 1, col)
    figure.add_trace(go.Heatmap(z=row.output[:, None], y=dims, x=["output"],
                                hovertemplate="dim %{y}: %{z:.4f}<extra></extra>", **common), 1, 4)
    figure.update_yaxes(title_text="dimension", row=1, col=1)
    figure.update_yaxes(autorange="reversed", showticklabels=False)
    figure.update_yaxes(showticklabels=True, row=1, col=1)
    figure.update_xaxes(tickangle=-45)
    figure.update_layout(font=style.FONT, height=460, margin=dict(l=10, r=10, t=40, b=10))
    return figure


def row_table(row: RowArithmetic, tokens: tuple[str, ...]) -> pd.DataFrame:
    """One line per key: the numbers of every step, and each value vector's contribution."""
    contribution = np.linalg.norm(row.weights[:, None] * row.values, axis=-1)
    return pd.DataFrame({
        "key": list(tokens),
        "position": np.arange(len(tokens)),
        "q · k": row.dots,
        "÷ √d_k": row.scaled,
        "allowed": row.allowed,
        "softmax weight": row.weights,
        "|weight × v|": contribution,
    })


def output_check(row: RowArithmetic) -> float:
    """Largest difference between the weighted sum shown and the model's own head output."""
    return float(np.abs(row.output - row.model_output).max())

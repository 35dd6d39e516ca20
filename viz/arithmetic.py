"""Figures and a table for the arithmetic of one attention row (models.teaching.arithmetic.RowArithmetic)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from models.teaching.arithmetic import KeyProducts, RowArithmetic
from viz import style
from viz.labels import numbered_labels

MASKED_COLOUR = "#bdbdbd"
STEPS_HEIGHT = 760  # three bar charts, each with its tokens under it
STEP_SPACING = 0.13  # room for each step's rotated token labels
PRODUCTS_HEIGHT = 520
POSITIVE_COLOUR, NEGATIVE_COLOUR = "#2166ac", "#b2182b"  # the two ends of RdBu


def key_labels(tokens: tuple[str, ...]) -> list[str]:
    return numbered_labels(tokens)


def row_steps_figure(row: RowArithmetic, tokens: tuple[str, ...],
                     shown_keys: Sequence[int] | None = None) -> go.Figure:
    """q.k, then divided by sqrt(d_k), then the softmax, one bar per key, every step with the
    keys' tokens on its x axis. `shown_keys` leaves the other keys out of the bars (the softmax
    stays the model's, over every key it used)."""
    keys = np.arange(len(tokens)) if shown_keys is None else np.asarray(shown_keys, dtype=int)
    labels = [key_labels(tokens)[k] for k in keys]
    blocked = ~row.allowed[keys]
    left_out = len(keys) < len(tokens)
    softmax_title = "3. softmax over the allowed keys: the attention weights (sum to 1)"
    if left_out:
        softmax_title = (f"3. softmax over all {len(tokens)} keys the model used; the "
                         f"{len(keys)} shown hold {row.weights[keys].sum():.3f} of the weight")
    figure = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=STEP_SPACING,
        subplot_titles=["1. q · k  (one dot product per key)",
                        f"2. divided by √d_k = √{row.query.shape[-1]} = {row.scale:.3f}; masked keys greyed",
                        softmax_title],
    )
    figure.add_trace(go.Bar(x=labels, y=row.dots[keys], name="q · k",
                            marker_color=style.STEP_COLOURS[0],
                            hovertemplate="%{x}<br>q · k = %{y:.4f}<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Bar(
        x=labels, y=row.scaled[keys], name="q · k / √d_k",
        marker_color=[MASKED_COLOUR if b else style.STEP_COLOURS[1] for b in blocked],
        customdata=np.where(blocked, "masked: never attended", "allowed"),
        hovertemplate="%{x}<br>scaled = %{y:.4f}<br>%{customdata}<extra></extra>",
    ), row=2, col=1)
    figure.add_trace(go.Bar(x=labels, y=row.weights[keys], name="softmax",
                            marker_color=style.STEP_COLOURS[2],
                            hovertemplate="%{x}<br>weight = %{y:.4f}<extra></extra>"), row=3, col=1)
    # 0 to 1 shows how a row's weight is shared; bars for a few of thousands of keys would be
    # flat on that scale, so a row shown in part is scaled to its largest bar
    top = float(row.weights[keys].max()) * 1.15 if left_out and len(keys) else 1.0
    figure.update_yaxes(range=[0, min(top, 1.0) or 1.0], row=3, col=1)
    figure.update_xaxes(showticklabels=True, tickangle=-45)  # shared axes hide all but the last
    figure.update_layout(
        showlegend=False, font=style.FONT, height=STEPS_HEIGHT, margin=dict(l=10, r=10, t=40, b=10),
        plot_bgcolor="white", bargap=0.25,
    )
    figure.update_yaxes(gridcolor="#eeeeee", zerolinecolor="#999999")
    figure.update_annotations(font_size=style.FONT["size"])
    return figure


def products_figure(products: KeyProducts, tokens: tuple[str, ...], query_index: int) -> go.Figure:
    """q · k for one key taken apart, as bertviz's neuron view does: q, k and their element-wise
    product q_d k_d for every dimension d (one colour scale around 0), then the products as bars;
    the bars add up to q · k."""
    labels = key_labels(tokens)
    dims = np.arange(len(products.products))
    strip = np.stack([products.query, products.key, products.products])  # (3, Dh)
    limit = float(np.abs(strip).max()) or 1.0
    names = [f"q ({labels[query_index]})", f"k ({labels[products.key_index]})", "q × k"]
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                           row_heights=[0.35, 0.65],
                           subplot_titles=["q, k and their product, dimension by dimension",
                                           f"q_d × k_d: the {len(dims)} bars add up to "
                                           f"q · k = {products.total:.4f}"])
    figure.add_trace(go.Heatmap(
        z=strip, x=dims, y=names, colorscale=style.DIVERGING_COLORSCALE, zmid=0, zmin=-limit,
        zmax=limit, showscale=False,
        hovertemplate="%{y}<br>dimension %{x}: %{z:.4f}<extra></extra>",
    ), row=1, col=1)
    figure.add_trace(go.Bar(
        x=dims, y=products.products, name="q_d × k_d",
        marker_color=[POSITIVE_COLOUR if p >= 0 else NEGATIVE_COLOUR for p in products.products],
        hovertemplate="dimension %{x}<br>q_d × k_d = %{y:.4f}<extra></extra>",
    ), row=2, col=1)
    figure.update_yaxes(autorange="reversed", row=1, col=1)
    figure.update_xaxes(title_text="dimension d", row=2, col=1)
    figure.update_yaxes(title_text="q_d × k_d", gridcolor="#eeeeee", zerolinecolor="#999999",
                        row=2, col=1)
    figure.update_layout(showlegend=False, font=style.FONT, height=PRODUCTS_HEIGHT,
                         margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white", bargap=0.1)
    figure.update_annotations(font_size=style.FONT["size"])
    return figure


def vectors_figure(row: RowArithmetic, tokens: tuple[str, ...],
                   shown_keys: Sequence[int] | None = None) -> go.Figure:
    """The query vector, every key and value vector (or those of `shown_keys`), and the weighted
    sum, as columns of numbers."""
    every = key_labels(tokens)
    keys = np.arange(len(tokens)) if shown_keys is None else np.asarray(shown_keys, dtype=int)
    labels = [every[k] for k in keys]
    stacked = np.concatenate([row.query[None], row.keys[keys], row.values[keys], row.output[None]])
    limit = float(np.abs(stacked).max()) or 1.0
    figure = make_subplots(rows=1, cols=4, column_widths=[0.08, 0.42, 0.42, 0.08],
                           horizontal_spacing=0.04,
                           subplot_titles=["query q", "keys k_j", "values v_j", "Σ w_j v_j"])
    dims = list(range(row.query.shape[-1]))
    common = dict(colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit, coloraxis=None, showscale=False)
    figure.add_trace(go.Heatmap(z=row.query[:, None], y=dims, x=[every[row.query_index]],
                                hovertemplate="dim %{y}: %{z:.4f}<extra></extra>", **common), 1, 1)
    for col, matrix, name in ((2, row.keys[keys], "k"), (3, row.values[keys], "v")):
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
    # the narrow first and last columns' titles are wider than them: kept inside the figure
    first, *_, last = figure.layout.annotations
    first.update(x=0, xanchor="left")
    last.update(x=1, xanchor="right")
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

"""Figures for generation step by step: plain arrays and labels in, a Plotly figure out.

The candidates a step chose from as bars; the attention row that chose the token as a one-row
heatmap over every earlier token; a heads x steps overview of one layer; and the first-token
("attention sink") share of every layer and head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz import style
from viz.heatmap import matrix_heatmap
from viz.labels import display_tokens, safe_token

ROW_HEATMAP_PX = 300  # height of the one-row heatmap (key labels along the top)
BAR_PX_PER_CANDIDATE = 34
BAR_BASE_PX = 120
CHOSEN_COLOR = "#08519c"
OTHER_COLOR = "#9ecae1"
SINK_MAP_CELL_PX = 30  # layers x heads map: one cell per head


def visible_text(text: str) -> str:
    """A token's text with its spaces and newlines made visible (" Paris" -> "␣Paris")."""
    return safe_token(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥"))


def candidates_figure(texts: Sequence[str], probabilities: Sequence[float], chosen: int | None,
                      title: str) -> go.Figure:
    """Horizontal bars, most probable on top; the chosen candidate (an index, or None) is dark."""
    labels = [f"{rank}. {visible_text(text)}" for rank, text in enumerate(texts, start=1)]
    colours = [CHOSEN_COLOR if i == chosen else OTHER_COLOR for i in range(len(texts))]
    figure = go.Figure(go.Bar(
        x=list(map(float, probabilities)), y=labels, orientation="h", marker_color=colours,
        text=[f"{p:.3f}" for p in probabilities], textposition="outside", cliponaxis=False,
        hovertemplate=f"%{{y}}<br>probability: %{{x:.{style.HOVER_DECIMALS}f}}<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text=title), font=style.FONT, margin=style.MARGIN, plot_bgcolor="white",
        height=BAR_BASE_PX + BAR_PX_PER_CANDIDATE * len(texts),
        xaxis=dict(title="probability", range=[0, 1.08], showgrid=True, gridcolor="#eeeeee"),
        yaxis=dict(autorange="reversed", type="category"),
    )
    return figure


def step_row_figure(row: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """One attention row (t,) over the t tokens read, as a one-row heatmap on [0, 1].

    The row belongs to the last token read, which labels it.
    """
    row = np.asarray(row, dtype=np.float32)
    if row.ndim != 1 or len(row) != len(tokens) or not len(tokens):
        raise ValueError(f"a row of {row.shape} weights for {len(tokens)} tokens")
    query_label = f"{display_tokens(tokens)[-1]} #{len(tokens) - 1}"
    figure = matrix_heatmap(row[None, :], tuple(tokens), title, row_tokens=(query_label,),
                            axis_titles=("query", "key"))
    figure.update_layout(height=ROW_HEATMAP_PX)
    figure.layout.yaxis.scaleanchor = None  # one row: let it fill the height, not a square cell
    return figure


def heads_by_steps_figure(values: np.ndarray, step_tokens: Sequence[str], title: str,
                          value_title: str, zmax: float) -> go.Figure:
    """(H, S) values of one layer: a row per head, a column per generated step."""
    values = np.asarray(values, dtype=np.float32)
    heads, steps = values.shape
    if steps != len(step_tokens):
        raise ValueError(f"{steps} steps of values for {len(step_tokens)} step tokens")
    head_labels = tuple(f"head {h}" for h in range(heads))
    figure = matrix_heatmap(values, tuple(step_tokens), title, zmin=0.0, zmax=float(zmax),
                            colorbar_title=value_title, row_tokens=head_labels,
                            axis_titles=("head", "generated token"))
    figure.layout.yaxis.scaleanchor = None
    figure.update_layout(height=max(ROW_HEATMAP_PX, style.HEATMAP_MARGIN["t"] + 40 * heads))
    return figure


def sink_share_figure(shares: np.ndarray, title: str) -> go.Figure:
    """(L, H) mean weight on the first token: a row per layer, a column per head, on [0, 1]."""
    shares = np.asarray(shares, dtype=np.float32)
    layers, heads = shares.shape
    figure = matrix_heatmap(
        shares, tuple(str(h) for h in range(heads)), title, colorbar_title="share",
        row_tokens=tuple(str(layer) for layer in range(layers)), axis_titles=("layer", "head"),
    )
    figure.update_layout(height=style.HEATMAP_MARGIN["t"] + SINK_MAP_CELL_PX * layers + 40,
                         width=max(style.MIN_HEATMAP_PX, SINK_MAP_CELL_PX * heads + 200))
    figure.layout.yaxis.scaleanchor = None
    return figure

"""Figures for the encoder–decoder page: one step's cross-attention row, the training loss, and
the cross-attention of one sentence at several points during training."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from models.hooks.record import AttentionRecord
from viz import style
from viz.heatmap import attention_heatmap
from viz.labels import tick_labels

SNAPSHOT_COLUMNS = 3
ROW_FIGURE_PX = 300  # one query row: no need for a square figure


def step_row(record: AttentionRecord, step: int) -> AttentionRecord:
    """The one query row (0-based `step`) of a record, as a record of its own (1 x K maps)."""
    if not 0 <= step < record.num_tokens:
        raise ValueError(f"step {step} is outside the {record.num_tokens} steps")
    return replace(record, tokens=(record.tokens[step],), key_tokens=record.keys,
                   weights=record.weights[:, :, step:step + 1], segment_ids=(),
                   special_positions=())


def step_row_figure(record: AttentionRecord, step: int, layer: int, head: int) -> go.Figure:
    """One step's attention row (the heatmap every page uses, one query high)."""
    figure = attention_heatmap(step_row(record, step), layer, head)
    figure.update_layout(height=ROW_FIGURE_PX)
    figure.layout.yaxis.scaleanchor = None  # one row fills the height instead of a square cell
    return figure


def loss_curve_figure(losses: tuple[float, ...] | list[float],
                      marked_steps: tuple[int, ...] = ()) -> go.Figure:
    """Training loss per step on a log scale; `marked_steps` (the snapshots) as dotted lines."""
    steps = np.arange(1, len(losses) + 1)
    figure = go.Figure(go.Scatter(x=steps, y=np.asarray(losses, dtype=float), mode="lines",
                                  line=dict(color=style.MEASURED_COLOR), name="loss",
                                  hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>"))
    for step in marked_steps:
        if step > 0:
            figure.add_vline(x=step, line=dict(color=style.TILE_OUTLINE, dash="dot", width=1))
    figure.update_layout(
        title=dict(text="Training loss (cross-entropy per target word)"), font=style.FONT,
        height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, plot_bgcolor="white",
        xaxis=dict(title="training step", showgrid=True, gridcolor="#eeeeee"),
        yaxis=dict(title="loss", type="log", showgrid=True, gridcolor="#eeeeee"),
        showlegend=False,
    )
    return figure


def snapshots_figure(records: tuple[AttentionRecord, ...], steps: tuple[int, ...],
                     layer: int, head: int) -> go.Figure:
    """One head's cross-attention at each training step, side by side on one [0, 1] scale."""
    if len(records) != len(steps) or not records:
        raise ValueError(f"{len(records)} snapshots for {len(steps)} steps")
    columns = min(SNAPSHOT_COLUMNS, len(records))
    rows = math.ceil(len(records) / columns)
    figure = make_subplots(rows=rows, cols=columns,
                           subplot_titles=[f"after {s} steps" if s else "before training"
                                           for s in steps],
                           horizontal_spacing=0.08, vertical_spacing=0.16 if rows > 1 else 0.0)
    for index, record in enumerate(records):
        keys, queries = tick_labels(record.keys), tick_labels(record.tokens)
        figure.add_trace(
            go.Heatmap(z=np.round(record.head(layer, head), style.HOVER_DECIMALS),
                       x=[f"{k} #{i}" for i, k in enumerate(keys)],
                       y=[f"{q} #{i}" for i, q in enumerate(queries)],
                       coloraxis="coloraxis", name=f"step {steps[index]}",
                       hovertemplate=f"query: %{{y}}<br>key: %{{x}}<br>weight: "
                                     f"%{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>"),
            row=index // columns + 1, col=index % columns + 1,
        )
    figure.update_xaxes(showgrid=False, zeroline=False, tickangle=-45, tickfont_size=style.SMALL_FONT_SIZE,
                        type="category")
    figure.update_yaxes(showgrid=False, zeroline=False, autorange="reversed", type="category",
                        tickfont_size=style.SMALL_FONT_SIZE)
    figure.update_layout(
        coloraxis=dict(colorscale=style.COLORSCALE, cmin=0.0, cmax=1.0,
                       colorbar=dict(title=dict(text="weight"), thickness=14)),
        font=style.FONT, height=rows * (style.GRID_CELL_PX + 90) + 60,
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white",
        title=dict(text=f"Cross-attention of layer {layer}, head {head} while the model learns"),
    )
    figure.update_annotations(font_size=style.SMALL_FONT_SIZE + 2)
    return figure

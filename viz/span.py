"""Figures for adaptive attention span: the soft mask's ramp, a head before and after a span,
the attention mass the span removed, and the spans a trained model learned per layer and head."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz import style
from viz.heatmap import matrix_heatmap
from viz.labels import numbered_labels, raw_differs, raw_hover

PERCENT = 100.0


def ramp_figure(distances: np.ndarray, values: np.ndarray, span: float, ramp: float) -> go.Figure:
    """m_z(x) (`values`) against the distance x: 1 up to z, a straight ramp down to 0 at z + R."""
    distances = np.asarray(distances, dtype=float)
    figure = go.Figure()
    figure.add_vrect(x0=span, x1=span + ramp, fillcolor=style.SPAN_RAMP_FILL, line_width=0,
                     annotation_text="ramp (width R)", annotation_position="top")
    figure.add_trace(go.Scatter(
        x=distances, y=np.asarray(values, dtype=float), mode="lines", name="m_z(x)",
        line=dict(color=style.SPAN_CURVE_COLOR, width=3),
        hovertemplate="distance %{x:.2f}<br>m = %{y:.3f}<extra></extra>",
    ))
    figure.add_trace(go.Scatter(
        x=[span + ramp / 2], y=[0.5], mode="markers+text", name="half-way",
        marker=dict(color=style.SPAN_MARKER_COLOR, size=10),
        text=["m = 0.5"], textposition="middle right",
        hovertemplate="x = z + R/2 = %{x:.2f}<br>m = %{y:.2f}<extra></extra>",
    ))
    for x, label in ((span, f"z = {span:g}"), (span + ramp, f"z + R = {span + ramp:g}")):
        figure.add_vline(x=x, line=dict(color=style.SPAN_MARKER_COLOR, dash="dash", width=1),
                         annotation_text=label, annotation_position="bottom left")
    figure.update_layout(
        title=dict(text=f"Soft span mask m_z(x) = clamp((R + z − x) / R, 0, 1), z = {span:g}, R = {ramp:g}"),
        xaxis=dict(title="distance x between query and key (tokens)", range=[0, distances.max()]),
        yaxis=dict(title="m_z(x): share of the weight kept", range=[-0.05, 1.1]),
        font=style.FONT, height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, showlegend=False,
        plot_bgcolor="white",
    )
    figure.update_xaxes(showgrid=True, gridcolor=style.TILE_OUTLINE)
    figure.update_yaxes(showgrid=True, gridcolor=style.TILE_OUTLINE)
    return figure


def before_after_heatmaps(
    original: AttentionRecord, masked: AttentionRecord, layer: int, head: int,
    span: float, ramp: float,
) -> tuple[go.Figure, go.Figure]:
    """One head as the model computed it, and after the span (masked, rows renormalised)."""
    before = matrix_heatmap(original.head(layer, head), original.tokens,
                            f"Before: layer {layer} · head {head}")
    after = matrix_heatmap(masked.head(layer, head), masked.tokens,
                           f"After the span z = {span:g}, R = {ramp:g}")
    return before, after


def removed_mass_figure(
    tokens: Sequence[str], removed: np.ndarray, emptied: np.ndarray, layer: int, head: int
) -> go.Figure:
    """Per query row: the share of its attention (`removed`, 0..1, (Q,)) the span took away;
    rows the span `emptied` (bool (Q,)) are marked."""
    removed = np.asarray(removed, dtype=float) * PERCENT  # (Q,)
    emptied = np.asarray(emptied, dtype=bool)  # (Q,)
    labels = numbered_labels(tokens)  # words; the token as the tokenizer wrote it on hover
    written = ([f"<br>as the tokenizer wrote it: {raw}" for raw in raw_hover(tokens)]
               if raw_differs(tokens) else [""] * len(labels))
    notes = np.where(emptied, "<br>row emptied: drawn as zeros", "")
    figure = go.Figure(go.Bar(
        x=labels, y=removed,
        marker_color=[style.EMPTIED_COLOR if e else style.REMOVED_COLOR for e in emptied],
        customdata=np.stack([np.asarray(written, dtype=object), notes.astype(object)], axis=-1),
        hovertemplate="query %{x}<br>removed %{y:.1f}%%{customdata[0]}%{customdata[1]}"
                      "<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text=f"Attention mass removed per query row (layer {layer} · head {head}); "
                        f"mean {removed.mean():.1f}%"),
        xaxis=dict(title="query token", tickangle=-45, type="category"),
        yaxis=dict(title="removed (%)", range=[0, PERCENT * 1.05]),
        font=style.FONT, height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, plot_bgcolor="white",
    )
    return figure


def _ablation_text(cell: dict[str, float] | None) -> str:
    if not cell:
        return ""
    return "<br>accuracy with this head off: " + ", ".join(
        f"{name} {value:.0%}" for name, value in cell.items())


def learned_spans_figure(
    spans: np.ndarray, max_span: float, ramp: float,
    ablation: Sequence[Sequence[dict[str, float]]] | None = None,
) -> go.Figure:
    """Span z of every head, grouped by layer, like the paper's per-head span figure. A paler
    block on top of each bar is the ramp: the head still sees up to z + R at reduced weight.
    `ablation[layer][head]` (accuracy per target with that head switched off) goes into the hover."""
    spans = np.asarray(spans, dtype=float)
    layers, heads = spans.shape
    layer_labels = [f"layer {layer}" for layer in range(layers)]
    figure = go.Figure()
    for head in range(heads):
        colour = style.HEAD_COLORS[head % len(style.HEAD_COLORS)]
        notes = [_ablation_text(ablation[layer][head] if ablation else None) for layer in range(layers)]
        figure.add_trace(go.Bar(
            x=layer_labels, y=spans[:, head], name=f"head {head}", offsetgroup=str(head),
            marker_color=colour, customdata=notes,
            hovertemplate=f"%{{x}} · head {head}<br>z = %{{y:.2f}} tokens%{{customdata}}<extra></extra>",
        ))
        figure.add_trace(go.Bar(
            x=layer_labels, y=[ramp] * layers, base=spans[:, head], offsetgroup=str(head),
            marker=dict(color=colour, opacity=style.SPAN_RAMP_OPACITY), showlegend=False,
            name=f"head {head} ramp", text=[f"z={z:.1f}" for z in spans[:, head]],
            textposition="inside", insidetextanchor="middle",
            textfont=dict(color=style.SPAN_LABEL_COLOR, size=style.SMALL_FONT_SIZE),
            hovertemplate=f"%{{x}} · head {head}<br>ramp up to z + R = %{{base:.2f}} + {ramp:g}<extra></extra>",
        ))
    figure.add_hline(y=max_span, line=dict(color=style.SPAN_MARKER_COLOR, dash="dash", width=1),
                     annotation_text=f"max span S = {max_span:g}", annotation_position="top left")
    figure.update_layout(
        barmode="group",
        title=dict(text=f"Learned span z per layer and head (pale: the ramp R = {ramp:g} beyond it)"),
        yaxis=dict(title="distance (tokens)", range=[0, (max_span + ramp) * 1.1]),
        font=style.FONT, height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, plot_bgcolor="white",
        legend=dict(orientation="h", y=-0.15),
    )
    return figure


def loss_figure(steps: Sequence[int], losses: Sequence[float]) -> go.Figure:
    """Task loss (without the span penalty) during training, on a log axis."""
    figure = go.Figure(go.Scatter(
        x=list(steps), y=list(losses), mode="lines", line=dict(color=style.SPAN_CURVE_COLOR),
        hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text="Training loss (cross-entropy, both targets)"),
        xaxis=dict(title="step"), yaxis=dict(title="loss", type="log"),
        font=style.FONT, height=style.LINE_PLOT_HEIGHT, margin=style.MARGIN, plot_bgcolor="white",
    )
    return figure

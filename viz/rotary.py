"""Figures for rotary position embeddings: the angle every pair of dimensions turns by."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz import style


def rotary_heatmap(angles: np.ndarray) -> go.Figure:
    """(P, Dh/2) angles: cos(angle) per position and pair, on [-1, 1]; pairs turn slower to the right."""
    positions, pairs = angles.shape
    figure = go.Figure(go.Heatmap(
        z=np.round(np.cos(angles), style.HOVER_DECIMALS), colorscale=style.DIVERGING_COLORSCALE,
        zmin=-1.0, zmax=1.0, customdata=np.degrees(angles),
        colorbar=dict(title=dict(text="cos(angle)"), thickness=14),
        hovertemplate="position %{y}<br>pair %{x}<br>turned by %{customdata:.1f}°"
                      "<br>cos %{z:.3f}<extra></extra>",
    ))
    figure.update_layout(
        title=style.top_title(
            f"Rotary angles: {positions} positions × {pairs} pairs of dimensions"),
        font=style.FONT, plot_bgcolor="white", height=style.heatmap_size(
            min(positions, style.MAX_TICK_LABELS)),
        margin=dict(l=10, r=10, t=style.TOP_AXIS_MARGIN_PX, b=10),
        xaxis=dict(title="pair of dimensions (each turns at its own speed; slower to the right)",
                   side="top", showgrid=False, zeroline=False),
        yaxis=dict(title="position", autorange="reversed", showgrid=False, zeroline=False),
    )
    return figure


def turn_per_token_figure(angles: np.ndarray) -> go.Figure:
    """Degrees each pair turns from one position to the next (log scale): fast pairs tell
    neighbours apart, slow pairs tell far-apart positions apart."""
    step = np.degrees(angles[1] - angles[0]) if len(angles) > 1 else np.zeros(angles.shape[1])
    figure = go.Figure(go.Scatter(
        x=np.arange(len(step)), y=step, mode="lines+markers", line=dict(color=style.MEASURED_COLOR),
        hovertemplate="pair %{x}<br>%{y:.4g}° per token<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text="How far each pair turns per token"), font=style.FONT,
        margin=style.MARGIN, plot_bgcolor="white", height=style.LINE_PLOT_HEIGHT,
        xaxis=dict(title="pair of dimensions", gridcolor="#eeeeee"),
        yaxis=dict(title="degrees per token (log scale)", type="log", gridcolor="#eeeeee"),
    )
    return figure

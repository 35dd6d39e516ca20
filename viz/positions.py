"""Figures for position information: an encoding over positions x dimensions, and similarity maps.

These maps are indexed by position numbers, not tokens, so they are drawn here rather than with
the token heatmap; colours and sizes still come from the shared style.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz import style


def _layout(figure: go.Figure, title: str, x_title: str, y_title: str, height: int,
            square: bool) -> go.Figure:
    square_axes = dict(constrain="domain") if square else {}
    figure.update_layout(
        title=style.top_title(title), font=style.FONT, height=height,
        plot_bgcolor="white", margin=dict(l=10, r=10, t=style.TOP_AXIS_MARGIN_PX, b=10),
        xaxis=dict(title=x_title, showgrid=False, zeroline=False, side="top", **square_axes),
        yaxis=dict(title=y_title, showgrid=False, zeroline=False, autorange="reversed",
                   **(dict(scaleanchor="x", **square_axes) if square else {})),
    )
    return figure


def sinusoid_heatmap(encoding: np.ndarray) -> go.Figure:
    """A (P, D) position encoding: positions down, dimensions across, values in [-1, 1]."""
    positions, dims = encoding.shape
    figure = go.Figure(go.Heatmap(
        z=np.round(encoding, style.HOVER_DECIMALS), colorscale=style.DIVERGING_COLORSCALE,
        zmin=-1.0, zmax=1.0, colorbar=dict(title=dict(text="value"), thickness=14),
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>",
    ))
    return _layout(figure, f"Sinusoidal encoding: {positions} positions × {dims} dimensions",
                   "dimension (even: sin, odd: cos)",
                   "position", style.heatmap_size(min(positions, style.MAX_TICK_LABELS)), False)


def blank_positions(similarity: np.ndarray) -> list[int]:
    """Positions whose whole row is NaN: zero vectors, which have no direction to compare."""
    return [int(p) for p in np.flatnonzero(np.all(np.isnan(similarity), axis=1))]


def similarity_heatmap(similarity: np.ndarray, title: str) -> go.Figure:
    """A (P, P) cosine-similarity map between positions, on a fixed [-1, 1] scale.

    Rows of zero vectors (NaN) are left blank and named in the title.
    """
    blank = blank_positions(similarity)
    if blank:
        listed = ", ".join(str(p) for p in blank[:3]) + (", …" if len(blank) > 3 else "")
        title = f"{title} (blank: position {listed}, a zero vector)"
    figure = go.Figure(go.Heatmap(
        z=np.round(similarity, style.HOVER_DECIMALS), colorscale=style.DIVERGING_COLORSCALE,
        zmin=-1.0, zmax=1.0, colorbar=dict(title=dict(text="cosine"), thickness=14),
        hovertemplate="position %{y} vs %{x}<br>cosine %{z:.3f}<extra></extra>",
    ))
    return _layout(figure, title, "position", "position", style.MIN_HEATMAP_PX, True)

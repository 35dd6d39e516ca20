"""Figures for "why attention is scaled": |q . k| against d, and a softmax row saturating."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import style

APPROXIMATION_NOTE = (
    "Dashed: √(2d/π), the mean |x| of a normal with variance d. It is an approximation: "
    "q·k is only close to normal for large d (at d = 1 the exact mean is 2/π ≈ 0.64)."
)


def _line_layout(figure: go.Figure, title: str, y_title: str) -> go.Figure:
    figure.update_layout(
        title=dict(text=title), font=style.FONT, height=style.LINE_PLOT_HEIGHT,
        margin=dict(l=10, r=10, t=60, b=90), plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
        xaxis=dict(type="log", title="d (dimensions of q and k)", gridcolor="#eeeeee"),
        yaxis=dict(title=y_title, gridcolor="#eeeeee", rangemode="tozero"),
    )
    return figure


def dot_product_figure(dimensions: np.ndarray, measured: np.ndarray, approximation: np.ndarray,
                       *, samples: int, highlight: tuple[int, float] | None = None) -> go.Figure:
    """Measured mean |q . k| against d on a log x axis, the normal approximation dashed, and
    below it their ratio, which approaches 1 as d grows.

    highlight: (d_k, measured mean |q . k| at d_k), drawn as a marker.
    """
    ratio = measured / approximation  # (n,)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3],
                           vertical_spacing=0.06)
    figure.add_trace(go.Scatter(
        x=dimensions, y=approximation, mode="lines",
        name="√(2d/π) (approximation)", line=dict(color=style.APPROXIMATION_COLOR, dash="dash"),
        hovertemplate="d = %{x}<br>√(2d/π) = %{y:.3f}<extra></extra>",
    ), row=1, col=1)
    figure.add_trace(go.Scatter(
        x=dimensions, y=measured, mode="markers+lines",
        name=f"measured (mean of {samples} pairs)",
        line=dict(color=style.MEASURED_COLOR), customdata=np.stack([approximation, ratio], axis=-1),
        hovertemplate=("d = %{x}<br>mean |q·k| = %{y:.3f}<br>√(2d/π) = %{customdata[0]:.3f}"
                       "<br>ratio = %{customdata[1]:.3f}<extra></extra>"),
    ), row=1, col=1)
    if highlight is not None:
        figure.add_trace(go.Scatter(
            x=[highlight[0]], y=[highlight[1]], mode="markers",
            name=f"your d_k = {highlight[0]}",
            marker=dict(color=style.UNSCALED_COLOR, size=14, symbol="diamond"),
            hovertemplate="d_k = %{x}<br>mean |q·k| = %{y:.3f}<extra></extra>",
        ), row=1, col=1)
    figure.add_trace(go.Scatter(
        x=dimensions, y=np.ones(len(dimensions)), mode="lines", showlegend=False,
        line=dict(color=style.APPROXIMATION_COLOR, dash="dash"), hoverinfo="skip",
    ), row=2, col=1)
    figure.add_trace(go.Scatter(
        x=dimensions, y=ratio, mode="markers+lines", name="measured / √(2d/π)",
        line=dict(color=style.MEASURED_COLOR), showlegend=False,
        hovertemplate="d = %{x}<br>measured / √(2d/π) = %{y:.3f}<extra></extra>",
    ), row=2, col=1)
    _line_layout(figure, "Mean |q·k| of random standard-normal vectors grows like √d",
                 "mean |q·k|")
    figure.update_layout(height=style.LINE_PLOT_HEIGHT + style.RATIO_PANEL_PX,
                         margin=dict(b=style.NOTE_MARGIN_PX))
    figure.update_xaxes(type="log", gridcolor="#eeeeee")
    figure.update_xaxes(title=None, row=1, col=1)
    figure.update_xaxes(title="d (dimensions of q and k)", row=2, col=1)
    figure.update_yaxes(title="ratio", rangemode="normal", gridcolor="#eeeeee", row=2, col=1)
    figure.add_annotation(text=APPROXIMATION_NOTE, xref="paper", yref="paper", x=0, y=0,
                          yshift=-style.NOTE_MARGIN_PX + 10, yanchor="bottom",
                          showarrow=False, xanchor="left", align="left",
                          font=dict(size=style.SMALL_FONT_SIZE + 1))
    return figure


def softmax_bars_figure(dimension: int, *, unscaled_scores: np.ndarray,
                        unscaled_weights: np.ndarray, scaled_scores: np.ndarray,
                        scaled_weights: np.ndarray, entropies: tuple[float, float]) -> go.Figure:
    """The softmax of one row of scores, unscaled and scaled, as grouped bars per key.

    entropies: (unscaled, scaled) in bits.
    """
    keys = [f"key {j}" for j in range(len(scaled_weights))]
    figure = go.Figure()
    for name, weights, scores, color in (
        (f"unscaled: entropy {entropies[0]:.2f} bits", unscaled_weights, unscaled_scores,
         style.UNSCALED_COLOR),
        (f"scaled by 1/√{dimension}: entropy {entropies[1]:.2f} bits", scaled_weights,
         scaled_scores, style.SCALED_COLOR),
    ):
        figure.add_trace(go.Bar(
            x=keys, y=weights, name=name, marker_color=color, customdata=scores,
            hovertemplate="%{x}<br>score %{customdata:.2f}<br>weight %{y:.4f}<extra></extra>",
        ))
    figure.update_layout(
        title=dict(text=(f"One query against {len(keys)} keys, d_k = {dimension} "
                         f"(uniform would be {np.log2(len(keys)):.2f} bits)")),
        barmode="group", font=style.FONT, height=style.LINE_PLOT_HEIGHT,
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
        yaxis=dict(title="softmax weight", range=[0, 1.05], gridcolor="#eeeeee"),
    )
    return figure


def entropy_curve_figure(dimensions: np.ndarray, unscaled: np.ndarray, scaled: np.ndarray, *,
                         num_keys: int, highlight: int | None = None) -> go.Figure:
    """Mean softmax entropy (bits) against d: unscaled falls towards 0 (saturation), scaled stays."""
    maximum = float(np.log2(num_keys))
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=dimensions, y=np.full(len(dimensions), maximum), mode="lines",
        name=f"uniform over {num_keys} keys", line=dict(color="#999999", dash="dot"),
        hovertemplate="log2(N) = %{y:.2f} bits<extra></extra>",
    ))
    for name, values, color in (("unscaled", unscaled, style.UNSCALED_COLOR),
                                ("scaled by 1/√d", scaled, style.SCALED_COLOR)):
        figure.add_trace(go.Scatter(
            x=dimensions, y=values, mode="markers+lines", name=name,
            line=dict(color=color),
            hovertemplate="d = %{x}<br>mean entropy %{y:.2f} bits<extra></extra>",
        ))
    if highlight is not None:
        figure.add_trace(go.Scatter(
            x=[highlight, highlight], y=[0.0, maximum], mode="lines", name=f"your d_k = {highlight}",
            line=dict(color="#555555", dash="dot"), hoverinfo="skip",
        ))
    _line_layout(figure, "Average softmax entropy of a row: saturation as d grows",
                 "entropy (bits)")
    figure.update_layout(margin=dict(b=10))
    return figure

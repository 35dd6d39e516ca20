"""Figures for "why attention is scaled": |q . k| against d, and a softmax row saturating."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import style
from viz.labels import numbered_labels

SQRT_SCALE, LOG_LOG_SCALE, LINEAR_SCALE = "sqrt", "log-log", "linear"
X_SCALES = (SQRT_SCALE, LOG_LOG_SCALE, LINEAR_SCALE)
X_TITLES = {SQRT_SCALE: "d (dimensions of q and k), spaced by √d",
            LOG_LOG_SCALE: "d (dimensions of q and k), log scale",
            LINEAR_SCALE: "d (dimensions of q and k)"}
SCALE_NOTES = {
    SQRT_SCALE: "The x axis is spaced by √d: anything that grows like √d is a straight line "
                "through 0.",
    LOG_LOG_SCALE: "Both axes are logarithmic: d^p is a straight line of slope p, so √d = d^½ "
                   "climbs one decade for every two decades of d.",
    LINEAR_SCALE: "Both axes are linear: √d climbs fast at small d, then ever more slowly.",
}
SQRT_TICK_CANDIDATES = (0, 1, 10, 100, 500, 1000, 2500, 5000, 10_000, 25_000, 50_000, 100_000)
MIN_TICK_GAP = 0.06  # of the axis: closer √d ticks would print on top of each other
AXIS_PADDING = 1.03  # the √d axis ends a little after the largest d
LEGEND_LINE_HEIGHT = 1.5  # of the legend's font size, one entry a line
LEGEND_PADDING_PX = 12
TITLE_PAD_PX = 8  # the title at the figure's top, over the legend's room (not centred in it)

# In the figure, short (it keeps its height for its two rows) ...
APPROXIMATION_SHORT = "Dashed: √(2d/π), an approximation that holds for large d."
# ... and in full under it (the page's caption).
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


def _tick_dimensions(largest: float) -> list[int]:
    """Round values of d for a √d-spaced axis, none crowding the one before it."""
    kept: list[int] = []
    for d in SQRT_TICK_CANDIDATES:
        if d > largest:
            break
        if not kept or math.sqrt(d) - math.sqrt(kept[-1]) >= MIN_TICK_GAP * math.sqrt(largest):
            kept.append(d)
    return kept


def dot_product_figure(dimensions: np.ndarray, measured: np.ndarray, approximation: np.ndarray,
                       *, samples: int, highlight: tuple[int, float] | None = None,
                       x_scale: str = SQRT_SCALE) -> go.Figure:
    """Measured mean |q . k| against d, the normal approximation dashed, and below it their
    ratio, which approaches 1 as d grows.

    x_scale: SQRT_SCALE spaces d by √d (growth like √d is a straight line), LOG_LOG_SCALE puts
    both axes of the upper plot on a log scale (√d has slope ½), LINEAR_SCALE leaves d as it is.
    highlight: (d_k, measured mean |q . k| at d_k), drawn as a marker.
    """
    if x_scale not in X_SCALES:
        raise ValueError(f"unknown x scale {x_scale!r}; known: {X_SCALES}")
    dimensions = np.asarray(dimensions)

    def placed(d):  # where d sits on the x axis
        return np.sqrt(np.asarray(d, dtype=np.float64)) if x_scale == SQRT_SCALE else d

    ratio = measured / approximation  # (n,)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3],
                           vertical_spacing=0.06)
    figure.add_trace(go.Scatter(
        x=placed(dimensions), y=approximation, mode="lines", customdata=dimensions,
        name="√(2d/π) (approximation)", line=dict(color=style.APPROXIMATION_COLOR, dash="dash"),
        hovertemplate="d = %{customdata}<br>√(2d/π) = %{y:.3f}<extra></extra>",
    ), row=1, col=1)
    figure.add_trace(go.Scatter(
        x=placed(dimensions), y=measured, mode="markers+lines",
        name=f"measured (mean of {samples} pairs)",
        line=dict(color=style.MEASURED_COLOR),
        customdata=np.stack([dimensions, approximation, ratio], axis=-1),
        hovertemplate=("d = %{customdata[0]}<br>mean |q·k| = %{y:.3f}<br>"
                       "√(2d/π) = %{customdata[1]:.3f}<br>ratio = %{customdata[2]:.3f}"
                       "<extra></extra>"),
    ), row=1, col=1)
    if highlight is not None:
        figure.add_trace(go.Scatter(
            x=placed([highlight[0]]), y=[highlight[1]], mode="markers", customdata=[highlight[0]],
            name=f"your d_k = {highlight[0]:,}",
            marker=dict(color=style.UNSCALED_COLOR, size=14, symbol="diamond"),
            hovertemplate="d_k = %{customdata}<br>mean |q·k| = %{y:.3f}<extra></extra>",
        ), row=1, col=1)
    figure.add_trace(go.Scatter(
        x=placed(dimensions), y=np.ones(len(dimensions)), mode="lines", showlegend=False,
        line=dict(color=style.APPROXIMATION_COLOR, dash="dash"), hoverinfo="skip",
    ), row=2, col=1)
    figure.add_trace(go.Scatter(
        x=placed(dimensions), y=ratio, mode="markers+lines", name="measured / √(2d/π)",
        line=dict(color=style.MEASURED_COLOR), showlegend=False, customdata=dimensions,
        hovertemplate="d = %{customdata}<br>measured / √(2d/π) = %{y:.3f}<extra></extra>",
    ), row=2, col=1)
    _line_layout(figure, "Mean |q·k| of random standard-normal vectors grows like √d",
                 "mean |q·k|")
    figure.update_layout(height=style.LINE_PLOT_HEIGHT + style.RATIO_PANEL_PX,
                         margin=dict(b=style.NOTE_MARGIN_PX))
    largest = max(float(dimensions.max()), float(highlight[0]) if highlight else 0.0)
    if x_scale == SQRT_SCALE:
        ticks = _tick_dimensions(largest)
        figure.update_xaxes(type="linear", tickmode="array", tickvals=placed(ticks),
                            ticktext=[f"{d:,}" for d in ticks],
                            range=[0, math.sqrt(largest) * AXIS_PADDING])
    else:
        figure.update_xaxes(type="log" if x_scale == LOG_LOG_SCALE else "linear")
    figure.update_xaxes(gridcolor="#eeeeee")
    figure.update_xaxes(title=None, row=1, col=1)
    figure.update_xaxes(title=X_TITLES[x_scale], row=2, col=1)
    if x_scale == LOG_LOG_SCALE:
        figure.update_yaxes(type="log", rangemode="normal", row=1, col=1)
    figure.update_yaxes(title="ratio", rangemode="normal", gridcolor="#eeeeee", row=2, col=1)
    figure.add_annotation(text=SCALE_NOTES[x_scale] + "<br>" + APPROXIMATION_SHORT,
                          xref="paper", yref="paper", x=0, y=0,
                          yshift=-style.NOTE_MARGIN_PX + 10, yanchor="bottom",
                          showarrow=False, xanchor="left", align="left",
                          font=dict(size=style.SMALL_FONT_SIZE + 1))
    return figure


def legend_above_plot(figure: go.Figure, font_px: float) -> go.Figure:
    """The dot-product figure's legend in a narrow column: one entry a line, left, between the
    title and the plot, which moves down to make room (beside the plot there is none, and inside
    it the legend would hide the curves, which rise to the right)."""
    entries = sum(1 for trace in figure.data if trace.showlegend is not False)
    room = round(entries * font_px * LEGEND_LINE_HEIGHT + LEGEND_PADDING_PX)
    figure.update_layout(
        legend=dict(orientation="v", x=0.0, xanchor="left", y=1.0, yanchor="bottom",
                    font=dict(size=font_px)),
        margin=dict(t=figure.layout.margin.t + room), height=figure.layout.height + room,
        title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=TITLE_PAD_PX)))
    return figure


def softmax_bars_figure(dimension: int, *, unscaled_scores: np.ndarray,
                        unscaled_weights: np.ndarray, scaled_scores: np.ndarray,
                        scaled_weights: np.ndarray, entropies: tuple[float, float],
                        tokens: tuple[str, ...] | None = None) -> go.Figure:
    """The softmax of one row of scores, unscaled and scaled, as grouped bars per key.

    entropies: (unscaled, scaled) in bits. tokens: the row's keys as tokens (a real sentence's
    row), shown as words; without them the keys are numbered ("key 0").
    """
    keys = (numbered_labels(tokens) if tokens is not None
            else [f"key {j}" for j in range(len(scaled_weights))])
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

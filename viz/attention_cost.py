"""Figures of the n² cost: the chapter's FLOP count and the times and memory measured here, each
with the T² part (scores, softmax, weighted sum) beside the linear parts (projections, MLP)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import style

QUADRATIC_COLOUR = style.UNSCALED_COLOR
PROJECTIONS_COLOUR = style.SCALED_COLOR
FEED_FORWARD_COLOUR = "#2ca02c"
LINEAR_COLOUR = style.SCALED_COLOR
COST_PLOT_PX = 460


def _log_axes(figure: go.Figure, x_title: str, y_title: str, **where) -> None:
    figure.update_xaxes(type="log", title=x_title, gridcolor="#eeeeee", **where)
    figure.update_yaxes(type="log", title=y_title, gridcolor="#eeeeee", **where)


def _layout(figure: go.Figure, title: str) -> go.Figure:
    figure.update_layout(title=dict(text=title), font=style.FONT, height=COST_PLOT_PX,
                         plot_bgcolor="white", margin=dict(l=10, r=10, t=90, b=10),
                         legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left",
                                     x=0.0))
    return figure


def flops_figure(counts, crossover: int, shape_name: str) -> go.Figure:
    """FLOPs of one layer against tokens (log–log), from models.teaching.attention_cost.FlopCount
    values: the T² parts, the linear parts, and where they cross."""
    tokens = [c.tokens for c in counts]
    figure = go.Figure([
        go.Scatter(x=tokens, y=[c.quadratic for c in counts], mode="lines+markers",
                   name="attention's T² part",
                   line=dict(color=QUADRATIC_COLOUR, width=3)),
        go.Scatter(x=tokens, y=[c.linear for c in counts], mode="lines+markers",
                   name="linear parts (projections, MLP)",
                   line=dict(color=LINEAR_COLOUR, width=3)),
    ])
    # the label on its own: add_vline's would sit at x = crossover, which a log axis reads as
    # 10**crossover (off the figure)
    figure.add_vline(x=crossover, line=dict(color="#636363", dash="dot"))
    figure.add_annotation(x=math.log10(crossover), xref="x", y=1, yref="y domain",
                          text=f"equal at {crossover:,} tokens", showarrow=False,
                          xanchor="right", yanchor="top")
    _log_axes(figure, "tokens T (log scale)", "FLOPs in one layer (log scale)")
    # short legend entries on one row, and the title on two lines from the top of the figure: in
    # the page's figure column a longer legend wrapped up into the title
    figure = _layout(figure, f"The chapter's arithmetic:<br>one {shape_name} layer")
    # (Plotly centres a title's lines on its anchor: the pad holds the half line above it)
    figure.update_layout(title=dict(yref="container", y=1, yanchor="top", pad=dict(t=24)),
                         margin=dict(t=110))
    return figure


def measured_figure(measurement) -> go.Figure:
    """Time per part and memory against tokens, measured (a models.teaching.attention_cost.
    CostMeasurement)."""
    timings = measurement.timings
    tokens = [t.tokens for t in timings]
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                           subplot_titles=("time of each part (fastest run, ms)",
                                           "memory of its results (MiB)"))
    for name, values, colour in (
            ("attention's T² part", [t.attention_s * 1000 for t in timings], QUADRATIC_COLOUR),
            ("q, k, v and output projections", [t.projections_s * 1000 for t in timings],
             PROJECTIONS_COLOUR),
            ("MLP", [t.feed_forward_s * 1000 for t in timings], FEED_FORWARD_COLOUR)):
        figure.add_trace(go.Scatter(x=tokens, y=values, mode="lines+markers", name=name,
                                    line=dict(color=colour, width=3)), row=1, col=1)
    for name, values, colour in (
            ("scores and weights (H·T² numbers each)",
             [t.attention_mib for t in timings], QUADRATIC_COLOUR),
            ("q, k, v, output and MLP activations",
             [t.linear_mib for t in timings], LINEAR_COLOUR)):
        figure.add_trace(go.Scatter(x=tokens, y=values, mode="lines+markers", name=name,
                                    line=dict(color=colour, width=3, dash="dash")), row=1, col=2)
    _log_axes(figure, "tokens T (log scale)", "ms", row=1, col=1)
    _log_axes(figure, "tokens T (log scale)", "MiB", row=1, col=2)
    figure = _layout(figure, f"Measured on this machine: one {measurement.shape.name} layer, "
                             f"{measurement.threads} torch thread(s)")
    figure.update_layout(height=COST_PLOT_PX + 60, margin=dict(l=10, r=10, t=150, b=10),
                         legend=dict(y=1.25))
    return figure

"""Figures for masking: masked cells in grey (not a number), and maps side by side.

A masked score is not a very negative number a learner should read: it is "not allowed". So
masked cells are left empty (NaN) in the heatmap, drawn in a neutral grey that no number maps to,
say "masked" on hover, and the colour scale is computed from the allowed cells only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from models.hooks.record import AttentionRecord
from viz import style
from viz.heatmap import attention_heatmap, matrix_heatmap


# The shared heatmap's axes are categories of "token #position" labels: %{y} and %{x} name them.
MASKED_HOVER = "query: %{y}<br>key: %{x}<br>masked<extra></extra>"
ALLOWED_HOVER = "query: %{y}<br>key: %{x}<br>may attend<extra></extra>"


def _value_hover(value_title: str) -> str:
    return f"query: %{{y}}<br>key: %{{x}}<br>{value_title}: %{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>"


def allowed_range(matrix: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """(min, max) over the cells the mask allows; (0, 1) if none; widened if they are all equal."""
    values = np.asarray(matrix, dtype=np.float64)[np.asarray(mask, dtype=bool)]
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    if high - low < style.MIN_COLOR_RANGE:
        return low - style.MIN_COLOR_RANGE, high + style.MIN_COLOR_RANGE
    return low, high


def masked_heatmap(
    matrix: np.ndarray,
    mask: np.ndarray,
    tokens: tuple[str, ...],
    title: str,
    *,
    value_title: str = "score",
    zmin: float | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """The shared heatmap with the cells `mask` forbids (mask False) drawn as grey "masked" cells.

    The first trace holds the values with NaN in masked cells; the second paints those cells grey.
    Without zmin/zmax the colour scale spans the allowed cells only.
    """
    mask = np.asarray(mask, dtype=bool)
    shown = np.where(mask, np.asarray(matrix, dtype=np.float64), np.nan)  # (Q, K)
    low, high = allowed_range(matrix, mask)
    figure = matrix_heatmap(shown, tokens, title, zmin=low if zmin is None else zmin,
                            zmax=high if zmax is None else zmax, colorbar_title=value_title)
    figure.update_traces(hoverongaps=False, hovertemplate=_value_hover(value_title), selector=0)
    if not mask.all():
        figure.add_trace(go.Heatmap(
            z=np.where(mask, np.nan, 0.0), x=figure.data[0].x, y=figure.data[0].y,
            hovertemplate=MASKED_HOVER, hoverongaps=False,
            colorscale=[[0.0, style.MASKED_COLOR], [1.0, style.MASKED_COLOR]], showscale=False,
            name="masked",
        ))
    return figure


def mask_figure(mask: np.ndarray, tokens: tuple[str, ...], title: str) -> go.Figure:
    """The mask itself: allowed cells dark, masked cells grey."""
    mask = np.asarray(mask, dtype=bool)
    figure = masked_heatmap(np.ones(mask.shape), mask, tokens, title, value_title="may attend",
                            zmin=0.0, zmax=1.0)
    figure.update_traces(showscale=False, hovertemplate=ALLOWED_HOVER, selector=0)
    return figure


def mask_steps_figures(record: AttentionRecord, scores: np.ndarray, mask: np.ndarray,
                       head_size: int, layer: int, head: int) -> tuple[go.Figure, ...]:
    """The four steps for one head: mask, raw scores, masked scores, softmax weights.

    scores: that head's (Q, K) raw scores; mask: (Q, K) bool, True = may attend;
    record: the weights the model returned (step four).
    """
    tokens = record.tokens
    everywhere = np.ones_like(mask, dtype=bool)
    return (
        mask_figure(mask, tokens, "① Mask: which keys each query may see"),
        masked_heatmap(scores, everywhere, tokens, f"② Raw scores QKᵀ/√{head_size}"),
        masked_heatmap(scores, mask, tokens, "③ Masked scores (grey: set to −∞)"),
        attention_heatmap(record, layer, head).update_layout(
            title=dict(text="④ Softmax of ③: the attention weights")),
    )


def side_by_side(records: Sequence[AttentionRecord], layer: int, head: int,
                 titles: Sequence[str]) -> go.Figure:
    """One head of several records next to each other, on one shared [0, 1] colour scale."""
    if len(records) != len(titles) or not records:
        raise ValueError("give one title per record, and at least one record")
    figure = make_subplots(rows=1, cols=len(records), subplot_titles=list(titles),
                           horizontal_spacing=style.SIDE_BY_SIDE_SPACING)
    first_rows = None
    for column, record in enumerate(records, start=1):
        single = attention_heatmap(record, layer, head)
        rows = tuple(single.layout.yaxis.ticktext or ())
        first_rows = rows if first_rows is None else first_rows
        figure.add_trace(single.data[0].update(coloraxis="coloraxis"), row=1, col=column)
        source_x, source_y = single.layout.xaxis, single.layout.yaxis
        figure.update_xaxes(tickmode="array", tickvals=source_x.tickvals,
                            ticktext=source_x.ticktext, side="top", tickangle=-45,
                            showgrid=False, zeroline=False, row=1, col=column)
        anchor = "x" if column == 1 else f"x{column}"
        figure.update_yaxes(tickmode="array", tickvals=source_y.tickvals,
                            ticktext=source_y.ticktext, autorange="reversed",
                            scaleanchor=anchor, showgrid=False, zeroline=False,
                            # the same rows as the map on the left: named once, not over its edge
                            showticklabels=column == 1 or rows != first_rows,
                            # square maps leave room: keep them under their key labels
                            constrain="domain", constraintoward="top", row=1, col=column)
    figure.update_annotations(yshift=style.SIDE_BY_SIDE_TITLE_SHIFT)
    figure.update_layout(
        coloraxis=dict(colorscale=style.COLORSCALE, cmin=0.0, cmax=1.0,
                       colorbar=dict(title=dict(text="weight"), thickness=14)),
        font=style.FONT, height=style.SIDE_BY_SIDE_PX, plot_bgcolor="white",
        margin=dict(l=10, r=10, t=style.SIDE_BY_SIDE_TOP_MARGIN, b=10),
        title=style.top_title(f"Layer {layer} · Head {head}"),
    )
    return figure

"""The one attention heatmap builder every page uses, and small multiples of a layer's heads."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz import style
from viz.labels import numbered_labels, raw_differs, raw_hover, tick_labels

HOVER = f"query: %{{y}}<br>key: %{{x}}<br>weight: %{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>"
GRID_HOVER = (
    "query: %{customdata[0]}<br>key: %{customdata[1]}<br>"
    f"weight: %{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>"
)
# A token map whose tokens read differently as words also names them as the tokenizer wrote them.
RAW_HOVER = (f"query: %{{y}}<br>key: %{{x}}<br>weight: %{{z:.{style.HOVER_DECIMALS}f}}<br>"
             "as the tokenizer wrote them: %{customdata[0]} → %{customdata[1]}<extra></extra>")
POSITION_HOVER = f"query #%{{y}}<br>key #%{{x}}<br>weight: %{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>"


def _axis(tokens, step: int, categories: list[str] | None = None, **extra) -> dict:
    """Every `step`-th token labelled; on a category axis the ticks name categories."""
    positions = style.every_nth(len(tokens), step)
    labels = tick_labels(tokens)
    tickvals = positions if categories is None else [categories[p] for p in positions]
    kind = {} if categories is None else {"type": "category"}
    return dict(tickmode="array", tickvals=tickvals, ticktext=[labels[p] for p in positions],
                showgrid=False, zeroline=False, **kind, **extra)


def _plot_sides(columns: int, rows: int, width: int, height: int) -> tuple[float, float]:
    """Pixels the x and y axes of a square-celled map span inside a figure of this size."""
    margin = style.HEATMAP_MARGIN
    room_x = width - margin["l"] - margin["r"] - style.COLORBAR_ALLOWANCE_PX
    room_y = height - margin["t"] - margin["b"]
    cell = min(room_x / max(columns, 1), room_y / max(rows, 1))
    return cell * columns, cell * rows


def _hover(row_title: str, column_title: str, value_title: str) -> str:
    return (f"{row_title}: %{{customdata[0]}}<br>{column_title}: %{{customdata[1]}}<br>"
            f"{value_title}: %{{z:.{style.HOVER_DECIMALS}f}}<extra></extra>")


def _label_pairs(rows, columns) -> np.ndarray:
    """(R, C, 2) array of [row label, column label], escaped, for each cell's hover text."""
    row_labels = np.array(tick_labels(rows), dtype=object)
    column_labels = np.array(tick_labels(columns), dtype=object)
    return np.stack(np.broadcast_arrays(row_labels[:, None], column_labels[None, :]), axis=-1)


def matrix_heatmap(
    matrix: np.ndarray,
    tokens: tuple[str, ...],
    title: str,
    *,
    zmin: float = 0.0,
    zmax: float = 1.0,
    colorbar_title: str = "weight",
    row_tokens: tuple[str, ...] | None = None,
    axis_titles: tuple[str, str] = ("query", "key"),
    query_tokens: tuple[str, ...] | None = None,
    starts: tuple[int, int] = (0, 0),
) -> go.Figure:
    """A (Q, K) map with queries down and keys across, exact values on hover.

    `tokens` label the columns (keys). For a token map whose queries are other tokens than its
    keys (cross-attention), pass them as `query_tokens`. For a map whose rows are not tokens
    (e.g. layers x heads), pass `row_tokens` and `axis_titles` (rows, columns); the hover then
    shows the labels as given. `starts` (query, key) numbers a window's tokens from their
    positions in the whole input.
    """
    matrix = np.asarray(matrix)
    count = len(tokens)
    rows = query_tokens or (tokens if row_tokens is None else row_tokens)
    if query_tokens or (row_tokens is None and axis_titles == ("query", "key")):
        # Token maps: each axis is a category axis of distinct "token #position" labels, so the
        # hover names both tokens from T labels per axis instead of T x T per-cell strings.
        columns = numbered_labels(tokens, starts[1])
        row_labels = numbered_labels(rows, starts[0])
        trace = dict(x=columns, y=row_labels, hovertemplate=HOVER)
        if (raw_differs(tokens) or raw_differs(rows)) and max(count, len(rows)) <= \
                style.MAX_HOVER_TOKENS_IN_GRID:  # a cell's strings for every cell: short inputs
            raw_rows, raw_columns = (np.array(raw_hover(t), dtype=object) for t in (rows, tokens))
            trace.update(customdata=np.stack(np.broadcast_arrays(
                raw_rows[:, None], raw_columns[None, :]), axis=-1), hovertemplate=RAW_HOVER)
        x_categories, y_categories = columns, row_labels
    else:
        trace = dict(x=list(range(count)), y=list(range(len(rows))),
                     customdata=_label_pairs(rows, tokens),
                     hovertemplate=_hover(*axis_titles, colorbar_title))
        x_categories = y_categories = None
    figure = go.Figure(go.Heatmap(
        z=matrix, colorscale=style.COLORSCALE, zmin=zmin, zmax=zmax,
        colorbar=dict(title=dict(text=colorbar_title), thickness=14), **trace,
    ))
    size = style.heatmap_size(count)
    width = size + style.HEATMAP_EXTRA_WIDTH
    height = size if rows is tokens else style.heatmap_size(len(rows))
    # Label every n-th token, n as small as the axis allows without labels touching; the hover
    # names every cell's tokens in full.
    x_px, y_px = _plot_sides(count, len(rows), width, height)
    font_px = style.FONT["size"]
    angle = style.KEY_LABEL_ANGLE
    if style.label_step(count, x_px, style.label_pitch(font_px, angle)) > 1:
        angle = style.UPRIGHT_LABEL_ANGLE  # upright labels need less room each
    x_step = style.label_step(count, x_px, style.label_pitch(font_px, angle))
    y_step = style.label_step(len(rows), y_px, style.label_pitch(font_px))
    figure.update_layout(
        title=style.top_title(title),
        font=style.FONT, width=width,
        height=height, margin=style.HEATMAP_MARGIN, plot_bgcolor="white",
        xaxis=_axis(tokens, x_step, x_categories, side="top", tickangle=angle,
                    title=axis_titles[1], automargin=True),
        yaxis=_axis(rows, y_step, y_categories, autorange="reversed",
                    title=axis_titles[0], scaleanchor="x",
                    # square cells leave room above or below: keep the map under its key labels
                    constrain="domain", constraintoward="top"),
    )
    return figure


def fit_rows(figure: go.Figure, rows: int) -> go.Figure:
    """Rectangular cells for a map whose cells need not be square: the width the page gives,
    a height that grows with the rows (style.ROW_PX each, within ROWS_MIN_PX..ROWS_MAX_PX)."""
    height = style.ROWS_TOP_PX + style.ROW_PX * rows
    figure.update_layout(height=int(min(style.ROWS_MAX_PX, max(style.ROWS_MIN_PX, height))),
                         width=None)
    figure.update_yaxes(scaleanchor=None)
    return figure


def attention_heatmap(record: AttentionRecord, layer: int, head: int) -> go.Figure:
    """One head's attention: colour bar fixed to [0, 1]; queries down, the record's keys across
    (for cross-attention: the target's tokens down, the source's across)."""
    return matrix_heatmap(record.head(layer, head), record.keys, f"Layer {layer} · Head {head}",
                          query_tokens=record.tokens if record.is_rectangular else None)


def _numbered_pairs(rows: tuple[str, ...], columns: tuple[str, ...]) -> np.ndarray:
    """(Q, K, 2) array of ["token #i" of the query, "token #j" of the key] for each cell."""
    row_labels = np.array(numbered_labels(rows), dtype=object)
    column_labels = np.array(numbered_labels(columns), dtype=object)
    return np.stack(np.broadcast_arrays(row_labels[:, None], column_labels[None, :]), axis=-1)


def layer_heads_grid(record: AttentionRecord, layer: int) -> go.Figure:
    """Every head of one layer of a record as small multiples on one shared [0, 1] colour scale."""
    return heads_grid(record.layer(layer), layer, record.tokens, record.keys)


GRID_SPACING = (0.03, 0.06)  # (across, down) between small multiples, as fractions of the plot


def _axis_suffix(index: int) -> str:
    """Plotly's numbering of axes: x, x2, x3, ... (xaxis, xaxis2, ... in the layout)."""
    return "" if index == 0 else str(index + 1)


def _domains(count: int, spacing: float) -> list[tuple[float, float]]:
    """`count` equal spans of [0, 1] with `spacing` between neighbours, in order."""
    spacing = spacing if count > 1 else 0.0
    side = (1.0 - spacing * (count - 1)) / count
    return [(i * (side + spacing), i * (side + spacing) + side) for i in range(count)]


def _shared_axes(heads: int, rows: int, columns: int) -> dict:
    """Layout of small multiples with one x axis per column and one y axis per row (instead of
    two axes per map, as make_subplots makes: a 12-head grid then draws in Plotly about twice as
    fast), each map titled above its cell."""
    hidden = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="")
    across = _domains(columns, GRID_SPACING[0])
    down = _domains(rows, GRID_SPACING[1])[::-1]  # the first row on top
    layout = {f"xaxis{_axis_suffix(c)}": dict(domain=span, anchor="y", **hidden)
              for c, span in enumerate(across)}
    layout.update({f"yaxis{_axis_suffix(r)}": dict(domain=span, anchor="x",
                                                   autorange="reversed", **hidden)
                   for r, span in enumerate(down)})
    layout["annotations"] = [
        dict(text=f"Head {head}", xref="paper", yref="paper", showarrow=False,
             x=sum(across[head % columns]) / 2, y=down[head // columns][1],
             xanchor="center", yanchor="bottom")
        for head in range(heads)]
    return layout


def heads_grid(maps: np.ndarray, layer: int, tokens: tuple[str, ...] | None,
               keys: tuple[str, ...] | None = None, pooled_from: int | None = None) -> go.Figure:
    """(H, Q, K) maps of one layer as small multiples on one shared [0, 1] colour scale. With
    `tokens` (and `keys` for rectangular maps) the hover names them; for thumbnails max-pooled
    from a longer input, `tokens` is None and `pooled_from` is how many tokens they cover."""
    heads = maps.shape[0]
    columns = min(style.GRID_COLUMNS, heads)
    rows = math.ceil(heads / columns)
    keys = keys or tokens
    with_tokens = tokens is not None and \
        max(len(tokens), len(keys)) <= style.MAX_HOVER_TOKENS_IN_GRID
    customdata = _numbered_pairs(tokens, keys) if with_tokens else None
    figure = go.Figure()
    for head in range(heads):
        row, column = divmod(head, columns)
        figure.add_trace(go.Heatmap(
            z=np.round(maps[head], style.HOVER_DECIMALS),
            customdata=customdata, hovertemplate=GRID_HOVER if with_tokens else POSITION_HOVER,
            coloraxis="coloraxis", name=f"head {head}",
            xaxis=f"x{_axis_suffix(column)}", yaxis=f"y{_axis_suffix(row)}",
        ))
    figure.update_layout(_shared_axes(heads, rows, columns))
    title = f"All {heads} heads of layer {layer} (one shared colour scale)"
    if pooled_from is not None:
        title = (f"All {heads} heads of layer {layer}, {pooled_from:,} tokens max-pooled to "
                 f"{maps.shape[-1]}×{maps.shape[-1]} blocks")
    figure.update_layout(
        coloraxis=dict(colorscale=style.COLORSCALE, cmin=0.0, cmax=1.0,
                       colorbar=dict(title=dict(text="weight"), thickness=14)),
        font=style.FONT, height=rows * style.GRID_CELL_PX + 60,
        margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white",
        title=dict(text=title),
    )
    figure.update_annotations(font_size=style.SMALL_FONT_SIZE + 2)
    return figure

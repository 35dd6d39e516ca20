"""Every layer and head at once, light enough for 4,096 tokens.

All L x H thumbnails (models.analysis.thumbnails: each map max-pooled to at most THUMBNAIL_CELLS
blocks a side, queries and keys on their own, so a rectangular cross-attention map stays
rectangular; a block shows its largest weight, so thin diagonals stay visible) are tiled into
one mosaic heatmap, and weights travel as whole percents in one byte each. The exact values stay
in the record for the enlarged head. Layers run down and heads across, unless a model has more
layers than heads (SmolLM2: 30 x 9): then layers run across, so the mosaic is wider than tall and
fits a screen or a slide (down, 30 rows fitted to a projector's height were 11 px tiles).

Plotly does not report a click on a heatmap cell as a selection (plotly.js heatmaps have no
point selection; streamlit/streamlit#8760), so a second trace puts one invisible, clickable marker
on each tile: a click selects it, and `clicked_tile` reads its (layer, head) back.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.analysis.pooling import PooledMap
from viz import style

TILE_TRACE = "tiles"  # the name of the trace of clickable markers, one per tile
LABELLED_TILES = 16  # at most this many tiles a side are labelled each; more: every 2nd, 5th...
TILE_MARKER_SHARE = 0.5  # marker width / tile width: plus Plotly's 20 px hover reach, a click
#                          anywhere on the tile picks its marker, never a neighbour's


def tiled(pooled: np.ndarray) -> np.ndarray:
    """(L, H, q, k) pooled maps -> (L * q, H * k) uint8 percents: layer tiles down, heads across
    (pass (H, L, q, k) for heads down, layers across)."""
    layers, heads, rows, columns = pooled.shape
    tiled = pooled.transpose(0, 2, 1, 3).reshape(layers * rows, heads * columns)  # (L*q, H*k)
    return np.rint(tiled * 100).astype(np.uint8)


def layers_across(layers: int, heads: int) -> bool:
    """Whether the mosaic runs layers across and heads down: when there are more layers than
    heads, so it is wider than tall."""
    return layers > heads


def all_heads_figure(thumbnails: PooledMap, selected: tuple[int, int] | None = None,
                     per_tile: bool = False) -> go.Figure:
    """One mosaic of every head's thumbnail (L, H, q, k), outlined, on one colour scale, layers
    down and heads across (across and down when `layers_across`); `selected` is outlined in
    red. With `per_tile`, each map is coloured from 0 to its own top (`thumbnails.tops`): over
    thousands of keys most heads' weights are small, and on one 0-100 % scale their patterns
    are faint."""
    pooled = thumbnails.values
    num_tokens, num_keys = thumbnails.num_queries, thumbnails.num_keys
    if per_tile:
        pooled = np.minimum(pooled / thumbnails.tops[..., None, None], 1.0)
    layers, heads = pooled.shape[:2]
    across = layers_across(layers, heads)
    z = tiled(pooled.transpose(1, 0, 2, 3) if across else pooled)
    tile_rows, tile_columns = (heads, layers) if across else (layers, heads)
    tile_px = tile_size(tile_columns, style.OVERVIEW_WIDE_WIDTH_PX if across
                        else style.OVERVIEW_WIDTH_PX)
    side, width = z.shape[0] // tile_rows, z.shape[1] // tile_columns  # one tile: rows x columns

    def place(layer: int, head: int) -> tuple[int, int]:
        """(row, column) of the tile of (layer, head) in the mosaic."""
        return (head, layer) if across else (layer, head)

    def outline(layer: int, head: int, colour: str, line_width: int) -> dict:
        row, column = place(layer, head)
        return dict(type="rect", x0=column * width - 0.5, x1=(column + 1) * width - 0.5,
                    y0=row * side - 0.5, y1=(row + 1) * side - 0.5,
                    line=dict(color=colour, width=line_width))

    figure = go.Figure(go.Heatmap(
        z=z, colorscale=style.COLORSCALE, zmin=0, zmax=100,
        colorbar=dict(title=dict(text="% of the head's top" if per_tile else "weight %"),
                      thickness=14),
        hovertemplate=("≈ %{z}% of this head's top" if per_tile else "weight ≈ %{z}%")
                      + "<extra></extra>",
    ))
    shapes = [outline(l, h, style.TILE_OUTLINE, 1) for l in range(layers) for h in range(heads)]
    if selected is not None:
        shapes.append(outline(*selected, style.SELECTED_OUTLINE, 3))
    row_centres = [(i + 0.5) * side - 0.5 for i in range(tile_rows)]
    column_centres = [(i + 0.5) * width - 0.5 for i in range(tile_columns)]
    tile_layers, tile_heads = np.divmod(np.arange(layers * heads), heads)  # (L*H,), (L*H,)
    tile_rows_of, tile_columns_of = place(tile_layers, tile_heads)
    figure.add_trace(go.Scatter(
        x=np.array(column_centres)[tile_columns_of], y=np.array(row_centres)[tile_rows_of],
        mode="markers", name=TILE_TRACE, showlegend=False,
        customdata=np.stack([tile_layers, tile_heads], axis=-1),
        marker=dict(symbol="square", size=tile_px * TILE_MARKER_SHARE,
                    color="rgba(0, 0, 0, 0)"),
        hovertemplate="Layer %{customdata[0]} · Head %{customdata[1]}<br>click to open it below"
                      "<extra></extra>",
    ))
    layer_labels = [f"L{l}" for l in range(layers)]
    head_labels = [f"H{h}" for h in range(heads)]
    row_labels, column_labels = (head_labels, layer_labels) if across else (layer_labels,
                                                                            head_labels)
    pooled = side < num_tokens or width < num_keys
    figure.update_layout(
        shapes=shapes, font=style.FONT, plot_bgcolor="white", clickmode="event+select",
        width=tile_columns * tile_px + style.OVERVIEW_EXTRA_WIDTH_PX,
        height=tile_rows * tile_px + 110,
        margin=dict(l=10, r=10, t=80, b=10),
        title=dict(text=f"All {layers} layers × {heads} heads"
                        + (f" (each map max-pooled to {side}×{width})" if pooled else "")),
        xaxis=dict(tickmode="array", side="top", showgrid=False, zeroline=False,
                   constrain="domain", **labelled(column_centres, column_labels)),
        yaxis=dict(tickmode="array", autorange="reversed", showgrid=False, zeroline=False,
                   scaleanchor="x", **labelled(row_centres, row_labels)),
    )
    return figure


def labelled(centres: list[float], labels: list[str]) -> dict:
    """Tick values and texts for a side of the mosaic: every tile up to LABELLED_TILES, else
    every 2nd, 5th or 10th... (L0, L5, L10...): 30 labels side by side turn on end and run into
    the title; the hover names every tile."""
    step = next(step for step in (1, 2, 5, 10, 20, 50, 100, 1_000_000)
                if len(labels) <= LABELLED_TILES * step)
    return dict(tickvals=centres[::step], ticktext=labels[::step])


def tile_size(columns: int, width_px: int = style.OVERVIEW_WIDTH_PX) -> int:
    """A tile's side in px: as large as OVERVIEW_TILE_PX, as small as `columns` tiles across a
    mosaic `width_px` wide need (a mosaic with layers across has the page's width)."""
    fitting = (width_px - style.OVERVIEW_EXTRA_WIDTH_PX) // max(columns, 1)
    return int(min(style.OVERVIEW_TILE_PX, max(style.OVERVIEW_MIN_TILE_PX, fitting)))


def clicked_tile(points: list[dict], num_layers: int, num_heads: int) -> tuple[int, int] | None:
    """(layer, head) of the tile whose marker a click selected, read from the customdata
    [layer, head] of a Plotly selection's points (the browser sends a numpy-built pair as
    {"0": layer, "1": head}); None if no point is a tile of this mosaic."""
    for point in points:
        data = point.get("customdata")
        if isinstance(data, dict):
            data = [data.get("0"), data.get("1")]
        if not isinstance(data, (list, tuple)) or len(data) != 2:
            continue
        if not all(isinstance(value, (int, float)) and not isinstance(value, bool)
                   for value in data):
            continue
        layer, head = int(data[0]), int(data[1])
        if 0 <= layer < num_layers and 0 <= head < num_heads:
            return layer, head
    return None

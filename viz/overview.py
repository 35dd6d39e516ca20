"""Every layer and head at once, light enough for 512 tokens.

All L x H maps are tiled into one mosaic heatmap. Maps longer than THUMBNAIL_CELLS tokens are
max-pooled to THUMBNAIL_CELLS x THUMBNAIL_CELLS blocks (a block shows its largest weight, so thin
diagonals stay visible), and weights travel as whole percents in one byte each. The exact values
stay in the record for the enlarged head.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.record import AttentionRecord
from viz import style

THUMBNAIL_CELLS = 64


def block_edges(size: int, blocks: int) -> np.ndarray:
    """Start index of each of `blocks` near-equal blocks covering range(size)."""
    return np.linspace(0, size, blocks + 1).astype(int)[:-1]


def max_pool(maps: np.ndarray, cells: int) -> np.ndarray:
    """(..., Q, K) -> (..., c, c) with c = min(Q, cells): the maximum of each block."""
    size = maps.shape[-1]
    if size <= cells:
        return maps
    edges = block_edges(size, cells)
    pooled = np.maximum.reduceat(maps, edges, axis=-1)  # (..., Q, c)
    return np.maximum.reduceat(pooled, edges, axis=-2)  # (..., c, c)


def mosaic(record: AttentionRecord, cells: int = THUMBNAIL_CELLS) -> np.ndarray:
    """(L * c, H * c) uint8 percents: layer tiles down, head tiles across."""
    pooled = max_pool(record.weights, cells)  # (L, H, c, c)
    layers, heads, side, _ = pooled.shape
    tiled = pooled.transpose(0, 2, 1, 3).reshape(layers * side, heads * side)  # (L*c, H*c)
    return np.rint(tiled * 100).astype(np.uint8)


def all_heads_figure(record: AttentionRecord, selected: tuple[int, int] | None = None,
                     cells: int = THUMBNAIL_CELLS) -> go.Figure:
    """One mosaic of every head, outlined, on one colour scale; `selected` is outlined in red."""
    z = mosaic(record, cells)
    side = z.shape[0] // record.num_layers
    layers, heads = record.num_layers, record.num_heads
    figure = go.Figure(go.Heatmap(
        z=z, colorscale=style.COLORSCALE, zmin=0, zmax=100,
        colorbar=dict(title=dict(text="weight %"), thickness=14),
        hovertemplate="weight ≈ %{z}%<extra></extra>",
    ))
    shapes = [
        dict(type="rect", x0=h * side - 0.5, x1=(h + 1) * side - 0.5,
             y0=l * side - 0.5, y1=(l + 1) * side - 0.5,
             line=dict(color=style.TILE_OUTLINE, width=1))
        for l in range(layers) for h in range(heads)
    ]
    if selected is not None:
        l, h = selected
        shapes.append(dict(type="rect", x0=h * side - 0.5, x1=(h + 1) * side - 0.5,
                           y0=l * side - 0.5, y1=(l + 1) * side - 0.5,
                           line=dict(color=style.SELECTED_OUTLINE, width=3)))
    centres = [(i + 0.5) * side - 0.5 for i in range(max(layers, heads))]
    tile_px = style.OVERVIEW_TILE_PX
    figure.update_layout(
        shapes=shapes, font=style.FONT, plot_bgcolor="white",
        width=heads * tile_px + 160, height=layers * tile_px + 110,
        margin=dict(l=10, r=10, t=80, b=10),
        title=dict(text=f"All {layers} layers × {heads} heads"
                        + (f" (each map max-pooled to {side}×{side})" if side < record.num_tokens else "")),
        xaxis=dict(tickmode="array", tickvals=centres[:heads], ticktext=[f"H{h}" for h in range(heads)],
                   side="top", showgrid=False, zeroline=False, constrain="domain"),
        yaxis=dict(tickmode="array", tickvals=centres[:layers], ticktext=[f"L{l}" for l in range(layers)],
                   autorange="reversed", showgrid=False, zeroline=False, scaleanchor="x"),
    )
    return figure

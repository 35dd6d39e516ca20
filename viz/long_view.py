"""One head of a long input: the whole map pooled to a readable size, and an exact window.

A 4,096-token map has 16.7 million cells: far more than a browser can draw or an eye can read.
Both figures colour from 0 to a top read from the head itself (see colour_top). The whole map is
max-pooled to at most POOLED_CELLS blocks a side (a block shows its largest
weight, so thin diagonals and sink columns stay visible, and the hover names the block's token
ranges); a window of at most WINDOW_TOKENS tokens a side shows the exact weights with tokens.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz import style
from viz.heatmap import matrix_heatmap
from viz.overview import block_edges, max_pool

POOLED_CELLS = 256
TOP_PERCENTILE = 99
WINDOW_TOKENS = 64
POOLED_HOVER = ("queries %{customdata[0]}<br>keys %{customdata[1]}<br>"
                "largest weight %{z:.4f}<extra></extra>")


def _ranges(size: int, cells: int) -> list[str]:
    """"i–j" token ranges of the blocks that pool `size` positions into at most `cells`."""
    if size <= cells:
        return [str(i) for i in range(size)]
    starts = block_edges(size, cells).tolist()
    ends = [*starts[1:], size]
    return [f"{start}–{end - 1}" for start, end in zip(starts, ends)]


def pooled_head_figure(weights: np.ndarray, layer: int, head: int,
                       cells: int = POOLED_CELLS) -> go.Figure:
    """(Q, K) weights max-pooled to at most `cells` blocks a side, on the [0, 1] colour scale."""
    queries, keys = weights.shape
    pooled = max_pool(weights, cells)  # (q, k)
    rows, columns = _ranges(queries, cells), _ranges(keys, cells)
    customdata = np.stack(np.broadcast_arrays(np.array(rows, dtype=object)[:, None],
                                              np.array(columns, dtype=object)[None, :]), axis=-1)
    figure = go.Figure(go.Heatmap(
        z=pooled, customdata=customdata, hovertemplate=POOLED_HOVER,
        colorscale=style.COLORSCALE, zmin=0.0, zmax=colour_top(weights),
        colorbar=dict(title=dict(text="weight"), thickness=14),
    ))
    side = style.heatmap_size(min(max(queries, keys), cells))
    blocks = pooled.shape[0] < queries
    figure.update_layout(
        title=dict(text=f"Layer {layer} · Head {head}: all {queries} tokens"
                        + (f"<br><sup>each cell: the largest weight of a block of "
                           f"{queries / pooled.shape[0]:.0f} queries × keys</sup>"
                           if blocks else "")),
        font=style.FONT, width=side + style.HEATMAP_EXTRA_WIDTH, height=side,
        margin=style.HEATMAP_MARGIN, plot_bgcolor="white",
        xaxis=dict(title=None, side="top", showgrid=False, zeroline=False,
                   tickmode="array", tickvals=_tick_values(len(columns)),
                   ticktext=[columns[i].split("–")[0] for i in _tick_values(len(columns))]),
        yaxis=dict(title="query block", autorange="reversed", showgrid=False, zeroline=False,
                   scaleanchor="x", tickmode="array", tickvals=_tick_values(len(rows)),
                   ticktext=[rows[i].split("–")[0] for i in _tick_values(len(rows))]),
    )
    return figure


HALF_WIDTH_HEIGHT_PX = 520  # a map in half of the page at 1280 px: about as tall as it is wide


def fit_half_width(figure: go.Figure, height: int = HALF_WIDTH_HEIGHT_PX) -> go.Figure:
    """A square map made to stand in half of the page: no taller than the column is wide, and
    drawn at the top of its figure (under its title and key labels), not centred in it."""
    figure.update_layout(height=height)
    figure.update_yaxes(constrain="domain", constraintoward="top")
    return figure


def colour_top(weights: np.ndarray, cells: int = POOLED_CELLS) -> float:
    """The top of a long input's colour scale: the 99th percentile of the pooled map's non-zero
    blocks. Over thousands of keys a head's weights are small, and the first rows of a causal
    map (one key: weight 1) would set any maximum-based scale, so a spread-out head would look
    empty; blocks above this saturate. Both of a head's figures share it; hovers give exact
    values."""
    pooled = max_pool(weights, cells)
    seen = pooled[pooled > 0]
    return float(min(np.percentile(seen, TOP_PERCENTILE), 1.0)) if seen.size else 1.0


def _tick_values(count: int, labels: int = 9) -> list[int]:
    return sorted(set(np.linspace(0, count - 1, min(labels, count)).round().astype(int).tolist()))


def window_figure(weights: np.ndarray, tokens: tuple[str, ...], layer: int, head: int,
                  query_start: int, key_start: int, size: int = WINDOW_TOKENS) -> go.Figure:
    """The exact weights of queries [query_start, +size) over keys [key_start, +size)."""
    queries, keys = weights.shape
    q0 = int(np.clip(query_start, 0, max(queries - 1, 0)))
    k0 = int(np.clip(key_start, 0, max(keys - 1, 0)))
    q1, k1 = min(q0 + size, queries), min(k0 + size, keys)
    return matrix_heatmap(
        weights[q0:q1, k0:k1], tuple(tokens[k0:k1]),
        f"Exact · queries {q0}–{q1 - 1} × keys {k0}–{k1 - 1}",
        query_tokens=tuple(tokens[q0:q1]), starts=(q0, k0), zmax=colour_top(weights))

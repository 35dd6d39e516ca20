"""One head of a long input: the whole map pooled to a readable size, and an exact window.

A 4,096-token map has 16.7 million cells: far more than a browser can draw or an eye can read.
Both figures colour from 0 to a top read from the head itself (the pooled map's `tops`, see
models.analysis.pooling). The whole map comes max-pooled (a block shows its largest weight, so
thin diagonals and sink columns stay visible, and the hover names the block's token ranges); a
window of at most WINDOW_TOKENS tokens a side shows the exact weights with tokens.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.analysis.pooling import PooledMap
from viz import style
from viz.heatmap import matrix_heatmap

WINDOW_TOKENS = 64
POOLED_HOVER = ("queries %{customdata[0]}<br>keys %{customdata[1]}<br>"
                "largest weight %{z:.4f}<extra></extra>")


def block_ranges(starts: np.ndarray, size: int) -> list[str]:
    """"i–j" token ranges of blocks starting at `starts` over `size` positions (just "i" each
    when nothing was pooled)."""
    if len(starts) == size:
        return [str(i) for i in range(size)]
    ends = [*starts[1:].tolist(), size]
    return [f"{start}–{end - 1}" for start, end in zip(starts.tolist(), ends)]


def pooled_head_figure(pooled: PooledMap, layer: int, head: int, title: str | None = None,
                       colorbar_title: str = "weight") -> go.Figure:
    """One head's max-pooled (q, k) map, coloured from 0 to its top."""
    queries, keys = pooled.num_queries, pooled.num_keys
    rows = block_ranges(pooled.query_starts, queries)
    columns = block_ranges(pooled.key_starts, keys)
    customdata = np.stack(np.broadcast_arrays(np.array(rows, dtype=object)[:, None],
                                              np.array(columns, dtype=object)[None, :]), axis=-1)
    figure = go.Figure(go.Heatmap(
        z=pooled.values, customdata=customdata, hovertemplate=POOLED_HOVER,
        colorscale=style.COLORSCALE, zmin=0.0, zmax=float(pooled.tops),
        colorbar=dict(title=dict(text=colorbar_title), thickness=14),
    ))
    side = style.heatmap_size(max(pooled.values.shape))
    blocks = pooled.values.shape[0] < queries
    figure.update_layout(
        title=dict(text=(title or f"Layer {layer} · Head {head}: all {queries} tokens")
                        + (f"<br><sup>each cell: the largest weight of a block of "
                           f"{queries / pooled.values.shape[0]:.0f} queries × keys</sup>"
                           if blocks else "")),
        font=style.FONT, width=side + style.HEATMAP_EXTRA_WIDTH, height=side,
        margin=style.HEATMAP_MARGIN, plot_bgcolor="white",
        xaxis=dict(title=None, side="top", showgrid=False, zeroline=False,
                   tickmode="array", tickvals=spread_ticks(len(columns)),
                   ticktext=[columns[i].split("–")[0] for i in spread_ticks(len(columns))]),
        yaxis=dict(title="query block", autorange="reversed", showgrid=False, zeroline=False,
                   scaleanchor="x", tickmode="array", tickvals=spread_ticks(len(rows)),
                   ticktext=[rows[i].split("–")[0] for i in spread_ticks(len(rows))]),
    )
    return figure


HALF_WIDTH_HEIGHT_PX = 520  # a map in half of the page at 1280 px: about as tall as it is wide


def fit_half_width(figure: go.Figure, height: int = HALF_WIDTH_HEIGHT_PX) -> go.Figure:
    """A square map made to stand in half of the page: no taller than the column is wide, and
    drawn at the top of its figure (under its title and key labels), not centred in it."""
    figure.update_layout(height=height)
    figure.update_yaxes(constrain="domain", constraintoward="top")
    return figure


def spread_ticks(count: int, labels: int = 9) -> list[int]:
    """At most `labels` positions spread evenly over 0..count-1, the first and last included."""
    return sorted(set(np.linspace(0, count - 1, min(labels, count)).round().astype(int).tolist()))


def window_figure(weights: np.ndarray, tokens: tuple[str, ...], layer: int, head: int,
                  query_start: int, key_start: int, top: float = 1.0,
                  size: int = WINDOW_TOKENS) -> go.Figure:
    """The exact weights of queries [query_start, +size) over keys [key_start, +size), coloured
    from 0 to `top` (the head's pooled map's top, so both of its figures share one scale)."""
    queries, keys = weights.shape
    q0 = int(np.clip(query_start, 0, max(queries - 1, 0)))
    k0 = int(np.clip(key_start, 0, max(keys - 1, 0)))
    q1, k1 = min(q0 + size, queries), min(k0 + size, keys)
    return matrix_heatmap(
        weights[q0:q1, k0:k1], tuple(tokens[k0:k1]),
        f"Exact · queries {q0}–{q1 - 1} × keys {k0}–{k1 - 1}",
        query_tokens=tuple(tokens[q0:q1]), starts=(q0, k0), zmax=top)

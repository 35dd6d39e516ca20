"""Attention rollout drawn (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"):
the raw head-averaged attention of a layer beside the rollout up to it, exact for a short input,
max-pooled for a long one. The maths (and the reducer that computes it layer by layer) is
models.analysis.rollout's.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.analysis.pooling import PooledMap
from viz import style
from viz.heatmap import matrix_heatmap
from viz.labels import tick_labels
from viz.long_view import block_ranges, spread_ticks

# one short equation per line: a narrow text column beside the maps holds them at presenter size
FORMULA = (
    r"\begin{aligned}\bar{A}_l &= \tfrac{1}{H}\textstyle\sum_{h} A_{l,h} \\ "
    r"\hat{A}_l &= \operatorname{rownorm}\big(\tfrac{1}{2}(\bar{A}_l + I)\big) \\ "
    r"\tilde{A}_l &= \hat{A}_l\,\hat{A}_{l-1}\cdots\hat{A}_1\end{aligned}"
)
FORMULA_TEXT = (
    "Per layer l: average the H heads' maps, add the identity for the residual connection, "
    "halve and renormalise each row: Â_l = rownorm((mean_h A_l,h + I) / 2). "
    "Rollout up to layer l: Ã_l = Â_l · Â_(l-1) · … · Â_1. "
    "Row i of Ã_l says how much of position i's vector at layer l traces back to each input token."
)


ROLLOUT_HEIGHT_PX = 500  # one map above the other: the first one and its scale on one screen
ROLLOUT_TOP_MARGIN_PX = 170  # the title, then the key labels and "key" under it (large fonts too)


def rollout_figures(raw: np.ndarray, rolled: np.ndarray, tokens: tuple[str, ...],
                    layer: int) -> tuple[go.Figure, go.Figure]:
    """(raw head-averaged attention of `layer`, rollout up to `layer`), each (Q, K) exact, on one
    [0, 1] scale, made to stand one above the other in the page's figure column: short titles
    with room under them for the key labels, and the maps at the top of the figures."""
    figures = (
        matrix_heatmap(raw, tokens, f"Raw attention · layer {layer}"),
        matrix_heatmap(rolled, tokens, f"Rollout · layers 0 to {layer}"),
    )
    for figure in figures:
        figure.update_layout(height=min(figure.layout.height, ROLLOUT_HEIGHT_PX),
                             margin=dict(t=ROLLOUT_TOP_MARGIN_PX))
        figure.update_yaxes(constrain="domain", constraintoward="top")
    return figures


LONG_ROLLOUT_HEIGHT_PX = 520  # as tall as the map is wide, its colour bar under it

POOLED_ROLLOUT_HOVER = ("queries %{{customdata[0]}}<br>keys %{{customdata[1]}}<br>"
                        "largest {value} %{{z:.4g}}<extra></extra>")  # .format(value=...)


def _block_labels(pooled: PooledMap, tokens) -> list[str]:
    """Each block's token range and its first and last tokens (escaped), e.g. "16–31 (the … cat)"."""
    labels = tick_labels(tuple(tokens))
    named = []
    for block in block_ranges(pooled.query_starts, pooled.num_queries):
        first, _, last = block.partition("–")
        words = labels[int(first)] + (f" … {labels[int(last)]}" if last else "")
        named.append(f"{block} ({words})")
    return named


def _pooled_figure(pooled: PooledMap, tokens, title: str, value: str) -> go.Figure:
    """One pooled (c, c) map: block ranges on the axes and in the hover, coloured from 0 to the
    map's top."""
    num_tokens = pooled.num_queries
    cells = pooled.values.shape[0]
    blocks = _block_labels(pooled, tokens)
    names = np.array(blocks, dtype=object)
    customdata = np.stack(np.broadcast_arrays(names[:, None], names[None, :]), axis=-1)  # (c, c, 2)
    ticks = spread_ticks(cells)
    ticktext = [blocks[i].split("–")[0].split(" ")[0] for i in ticks]
    if cells < num_tokens:
        block = num_tokens / cells
        title += (f"<br><sup>max-pooled: each cell is the largest {value} of {block:.0f} × "
                  f"{block:.0f} tokens</sup>")
    figure = go.Figure(go.Heatmap(
        z=pooled.values, customdata=customdata,
        hovertemplate=POOLED_ROLLOUT_HOVER.format(value=value),
        colorscale=style.COLORSCALE, zmin=0.0, zmax=float(pooled.tops),
        # under the map: a bar beside it would take a third of the column's width
        colorbar=dict(title=dict(text=value, side="right"), orientation="h", thickness=12,
                      len=0.9, y=-0.02, yanchor="top"),
    ))
    side = style.heatmap_size(cells)
    figure.update_layout(
        title=dict(text=title), font=style.FONT,
        width=side, height=LONG_ROLLOUT_HEIGHT_PX,
        margin=dict(style.HEATMAP_MARGIN, b=60), plot_bgcolor="white",
        xaxis=dict(title=None, side="top", showgrid=False, zeroline=False,
                   tickmode="array", tickvals=ticks, ticktext=ticktext),
        yaxis=dict(title="query block", autorange="reversed", showgrid=False, zeroline=False,
                   scaleanchor="x", tickmode="array", tickvals=ticks, ticktext=ticktext,
                   constrain="domain", constraintoward="top"),
    )
    return figure


def long_rollout_figures(raw: PooledMap, rolled: PooledMap, layer: int,
                         tokens) -> tuple[go.Figure, go.Figure]:
    """(head-averaged attention of `layer`, rollout up to `layer`) of a long input, each from
    its max-pooled (c, c) map (models.analysis.rollout.RolloutMaps.pooled), sized to stand one
    above the other like `rollout_figures`; the hover names each block's tokens."""
    if len(tokens) != raw.num_queries:
        raise ValueError(f"{len(tokens)} tokens for an input of {raw.num_queries}")
    return (
        _pooled_figure(raw, tokens, f"Raw attention · layer {layer}", "weight"),
        _pooled_figure(rolled, tokens, f"Rollout · layers 0 to {layer}", "share"),
    )

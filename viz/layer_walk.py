"""Figures for the walk through one encoder layer: the steps top to bottom with their shapes,
the weight matrices as small pictures, and one head's attention map.

The walk object comes from models/teaching/layer_walk.py (read by attribute, not imported: viz/ takes
only records from models/): `.steps` (each with `.key`, `.title`, `.formula`, `.shape`,
`.model_shape`, `.difference`, `.reference`), `.matrices` (each with `.symbol`, `.name`,
`.matrix`, `.shape`), `.tokens`, `.lengths`, `.layer`, `.head_weights(item, head)`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import style
from viz.heatmap import matrix_heatmap

MAX_PICTURE_CELLS = 48  # a weight picture has at most this many cells per side
COLOUR_PERCENTILE = 99  # weight pictures: the colour scale ends at this percentile of |weight|
STEP_ROW_PX = 46
STAGE_COLOURS = {"embeddings": "#deebf7", "attention": "#c6dbef", "feed-forward": "#fde0c5",
                 "residual": "#e5f5e0"}
STAGES = {
    "tokens": "embeddings", "positions": "embeddings", "segments": "embeddings",
    "embedding_sum": "embeddings", "embeddings": "embeddings", "layer_input": "embeddings",
    "residual_1": "residual", "residual_2": "residual", "expanded": "feed-forward",
    "activated": "feed-forward", "contracted": "feed-forward",
}


def shape_text(shape: tuple[int, ...]) -> str:
    """(1, 7, 384) written as Python writes a tuple of ints."""
    return "(" + ", ".join(str(n) for n in shape) + (",)" if len(shape) == 1 else ")")


def _stage(key: str) -> str:
    if key in STAGES:
        return STAGES[key]
    if key.endswith("_norm"):
        return "residual"
    return "attention"


def steps_figure(walk) -> go.Figure:
    """The steps top to bottom: title and formula on the left, the live shape on the right."""
    steps = walk.steps
    count = len(steps)
    figure = go.Figure()
    # a step's tile and its arrow down to the next step, set on the layout at once (adding them
    # one by one re-validates every earlier one each time)
    tiles, arrows = [], []
    for row, step in enumerate(steps):
        y = count - 1 - row
        tiles.append(dict(type="rect", x0=0.0, x1=1.0, y0=y - 0.42, y1=y + 0.42, layer="below",
                          fillcolor=STAGE_COLOURS[_stage(step.key)],
                          line=dict(color=style.TILE_OUTLINE)))
        if row < count - 1:
            arrows.append(dict(x=0.5, y=y - 0.58, ax=0.5, ay=y - 0.42, xref="x", yref="y",
                               axref="x", ayref="y", showarrow=True, arrowhead=2,
                               arrowcolor="#636363", text=""))
    figure.update_layout(shapes=tiles, annotations=arrows)
    figure.add_trace(go.Scatter(
        x=[0.02] * count, y=[count - 1 - r for r in range(count)], mode="text",
        text=[f"<b>{i + 1}. {step.title}</b>   {step.formula}" for i, step in enumerate(steps)],
        textposition="middle right", hoverinfo="skip", showlegend=False,
    ))
    figure.add_trace(go.Scatter(
        x=[0.98] * count, y=[count - 1 - r for r in range(count)], mode="text",
        text=[f"<b>{shape_text(step.shape)}</b>" for step in steps],
        textposition="middle left", hoverinfo="skip", showlegend=False,
        textfont=dict(family="monospace", size=style.FONT["size"]),
    ))
    figure.update_layout(
        title=dict(text=f"One input through layer {walk.layer}, step by step (live shapes)"),
        font=style.FONT, height=count * STEP_ROW_PX + 70, margin=dict(l=10, r=10, t=50, b=10),
        plot_bgcolor="white", xaxis=dict(visible=False, range=[0, 1], fixedrange=True),
        yaxis=dict(visible=False, range=[-0.6, count - 0.4], fixedrange=True),
    )
    return figure


def steps_table(walk) -> pd.DataFrame:
    """One row per step: its shape, the model's own tensor's shape and the largest difference."""
    rows = []
    for i, step in enumerate(walk.steps):
        rows.append({
            "step": i + 1, "what": step.title, "formula": step.formula,
            "shape": shape_text(step.shape),
            "model's own shape": shape_text(step.model_shape) if step.model_shape else "—",
            "largest difference": step.difference,
            "checked against": step.reference or ("the model's own tensor"
                                                  if step.model_shape else "—"),
        })
    return pd.DataFrame(rows)


def pooled_picture(matrix: np.ndarray, cells: int = MAX_PICTURE_CELLS) -> np.ndarray:
    """At most `cells` x `cells`: each cell keeps the entry of largest size in its block (sign
    kept), so a large weight anywhere still shows. Small matrices are returned as they are."""
    rows, columns = matrix.shape
    row_edges = np.linspace(0, rows, min(rows, cells) + 1).round().astype(int)
    column_edges = np.linspace(0, columns, min(columns, cells) + 1).round().astype(int)
    picture = np.empty((len(row_edges) - 1, len(column_edges) - 1), dtype=np.float32)
    for i in range(len(row_edges) - 1):
        band = matrix[row_edges[i]:row_edges[i + 1]]
        for j in range(len(column_edges) - 1):
            block = band[:, column_edges[j]:column_edges[j + 1]]
            flat = block.ravel()
            picture[i, j] = flat[np.abs(flat).argmax()]
    return picture


def matrices_figure(matrices, title: str) -> go.Figure:
    """Weight matrices side by side on one diverging colour scale, each titled with its shape."""
    matrices = list(matrices)
    pictures = [pooled_picture(m.matrix) for m in matrices]
    magnitudes = np.abs(np.concatenate([p.ravel() for p in pictures]))
    # A few outlying weights would wash everything else out: the scale stops at a percentile.
    largest = float(np.percentile(magnitudes, COLOUR_PERCENTILE)) or style.MIN_COLOR_RANGE
    figure = make_subplots(
        rows=1, cols=len(matrices), horizontal_spacing=0.04,
        subplot_titles=[f"{m.symbol} {shape_text(m.shape)}" for m in matrices],
    )
    for column, (matrix, picture) in enumerate(zip(matrices, pictures), start=1):
        figure.add_trace(go.Heatmap(
            z=picture, coloraxis="coloraxis", name=matrix.symbol,
            hovertemplate=(f"{matrix.symbol} ({matrix.name}) {shape_text(matrix.shape)}"
                           "<br>value %{z:.3f}<extra></extra>"),
        ), row=1, col=column)
    figure.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, title_text="out")
    figure.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    figure.update_yaxes(title_text="in", row=1, col=1)
    figure.update_layout(
        title=dict(text=title), font=style.FONT, height=style.GRID_CELL_PX + 110,
        margin=dict(l=10, r=10, t=80, b=10), plot_bgcolor="white",
        coloraxis=dict(colorscale=style.DIVERGING_COLORSCALE, cmin=-largest, cmax=largest,
                       colorbar=dict(title=dict(text="weight"), thickness=14)),
    )
    return figure


def head_map(walk, item: int, head: int) -> go.Figure:
    """One head's softmax(QKᵀ/√d_k) for one sentence of the batch (padding included)."""
    tokens = walk.tokens[item]
    title = f"Layer {walk.layer} · head {head} · sentence {item} of the batch: softmax(QKᵀ/√d_k)"
    return matrix_heatmap(walk.head_weights(item, head), tokens, title)

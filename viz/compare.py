"""Two inputs compared, drawn: the layer x head map of the ranking's differences and one head's
map for each input. The ranking itself is models.analysis.compare's.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz.heatmap import matrix_heatmap

MIN_DIFFERENCE_SCALE = 0.01  # colour scale top when the two inputs are (almost) the same


def difference_heatmap(table: pd.DataFrame) -> go.Figure:
    """A layer x head map of the ranking's difference column (bits), scaled to its largest value."""
    grid = table.pivot(index="layer", columns="head", values="difference")  # (L, H)
    values = grid.to_numpy(dtype=float)
    return matrix_heatmap(
        values, tuple(str(h) for h in grid.columns),
        "How differently each head attends to the two inputs", zmin=0.0,
        zmax=max(float(values.max()), MIN_DIFFERENCE_SCALE),
        colorbar_title="difference (bits)", row_tokens=tuple(str(i) for i in grid.index),
        axis_titles=("layer", "head"),
    )


def side_by_side(first: AttentionRecord, second: AttentionRecord,
                 layer: int, head: int) -> tuple[go.Figure, go.Figure]:
    """The chosen head's map for each input, on the same [0, 1] scale."""
    return tuple(
        matrix_heatmap(record.head(layer, head), record.tokens,
                       f"{name} · layer {layer}, head {head}")
        for name, record in (("First input", first), ("Second input", second))
    )

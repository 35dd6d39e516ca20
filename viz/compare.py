"""Two inputs compared, drawn: the layer x head map of the ranking's differences and one head's
map for each input. The ranking itself is models.analysis.compare's.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz.head_analysis import layer_head_map
from viz.heatmap import matrix_heatmap

MIN_DIFFERENCE_SCALE = 0.01  # colour scale top when the two inputs are (almost) the same


def difference_heatmap(table: pd.DataFrame) -> go.Figure:
    """A layer x head map of the ranking's difference column (bits), scaled to its largest value."""
    grid = table.pivot(index="layer", columns="head", values="difference")  # (L, H)
    values = grid.to_numpy(dtype=float)
    return layer_head_map(values, "How differently each head attends to the two inputs",
                          "difference (bits)", zmin=0.0,
                          zmax=max(float(values.max()), MIN_DIFFERENCE_SCALE))


def side_by_side(first: AttentionRecord, second: AttentionRecord,
                 layer: int, head: int) -> tuple[go.Figure, go.Figure]:
    """The chosen head's map for each input, on the same [0, 1] scale."""
    return tuple(
        matrix_heatmap(record.head(layer, head), record.tokens,
                       f"{name} · layer {layer}, head {head}")
        for name, record in (("First input", first), ("Second input", second))
    )

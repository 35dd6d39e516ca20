"""The head statistics table drawn: a layer x head map of one column, and the table as CSV.

The statistics themselves (their definitions, the labels) are measured by
models.analysis.statistics; this module only draws them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.analysis.columns import NORM_COLUMNS, NUMERIC_COLUMNS, SHARE_COLUMNS
from viz.heatmap import fit_rows, matrix_heatmap


def statistic_heatmap(table: pd.DataFrame, column: str) -> go.Figure:
    """A layer x head map of one numeric column of `head_statistics`, the norm-based shares
    included when the table has them."""
    drawable = NUMERIC_COLUMNS + tuple(name for name in NORM_COLUMNS if name in table)
    if column not in drawable:
        raise ValueError(f"'{column}' is not one of {drawable}")
    grid = table.pivot(index="layer", columns="head", values=column)  # (L, H)
    values = grid.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]  # NaN where a statistic does not apply
    zmax = 1.0 if column in SHARE_COLUMNS + NORM_COLUMNS else max(float(finite.max(initial=0.0)), 1e-9)
    figure = matrix_heatmap(
        values, tuple(str(h) for h in grid.columns), f"{column} for every layer and head",
        zmin=0.0, zmax=zmax, colorbar_title=column,
        row_tokens=tuple(str(layer) for layer in grid.index), axis_titles=("layer", "head"),
    )
    # cells that need not be square fill the page's width (SmolLM2's 30 x 9 map of square
    # cells was a narrow strip whose head labels ran into each other)
    return fit_rows(figure, values.shape[0])


def statistics_csv(table: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV (no index column), ready for a download button."""
    return table.to_csv(index=False, float_format="%.6g").encode("utf-8")

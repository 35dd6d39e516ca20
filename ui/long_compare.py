"""Compare two inputs when one of them is long: both are ranked by the roles of their heads.

A long input's per-head role shares (how much weight goes to the first token, other special
tokens, itself, the previous and next tokens, other earlier and later tokens) are measured by the
one streamed forward of `long_inputs.overview`, layer by layer; a short input's come from its full
record. The position-aligned difference needs both inputs' maps of a layer at once, so a long
comparison always ranks by roles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from models.analysis.compare import compare_role_tables
from models.analysis.pooling import pool
from models.analysis.roles import role_distribution
from models.analysis.statistics import head_statistics
from models.loading.source import ModelSource
from ui import cache, long_inputs
from viz.heatmap import matrix_heatmap
from viz.long_view import fit_half_width, pooled_head_figure


@dataclass(frozen=True)
class Side:
    """One input of a comparison: its text, its token count, every head's role shares (L, H, R)
    and every head's label (ordered by layer, then head), and whether it was streamed."""

    text: str
    num_tokens: int
    roles: np.ndarray
    labels: pd.Series
    long: bool


def side(source: ModelSource, text: str, streamed: bool) -> Side:
    """A comparison's input, read whole layer by layer when `streamed`, else from its record."""
    if streamed:
        overview = long_inputs.overview(source, text, "")
        return Side(text, overview.streamed.num_tokens, overview.roles,
                    overview.statistics["label"].reset_index(drop=True), True)
    record = cache.record(source, text, "")
    return Side(text, record.num_tokens, role_distribution(record),
                head_statistics(record)["label"].reset_index(drop=True), False)


def role_table(first: Side, second: Side) -> pd.DataFrame:
    """The ranking of every head by the difference of its roles
    (models.analysis.compare.compare_role_tables)."""
    return compare_role_tables(first.roles, second.roles, first.labels, second.labels)


def head_figure(source: ModelSource, given: Side, name: str, layer: int, head: int) -> go.Figure:
    """The chosen head's map of one input: pooled over a long input (exact values per block on
    hover), exact for a short one."""
    if given.long:
        weights = long_inputs.head(source, given.text, "", layer, head)
        figure = pooled_head_figure(pool(weights), layer, head)
        figure.update_layout(title=dict(text=f"{name} · layer {layer}, head {head}: all "
                                             f"{given.num_tokens:,} tokens, max-pooled"))
        return fit_half_width(figure)
    record = cache.record(source, given.text, "")
    return matrix_heatmap(record.head(layer, head), record.tokens,
                          f"{name} · layer {layer}, head {head}")

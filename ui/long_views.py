"""Long inputs on the attention-maps and head-statistics pages (see ui/long_inputs.py).

The per-head statistics of a long input are measured by the one streamed forward of
`long_inputs.overview`: each layer's (H, T, T) maps go through the Statistics reducer
(models.analysis.statistics, the one `head_statistics` runs on a full record's layers) as soon
as the layer has computed them, and only the numbers are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from models.analysis.pooling import pool
from models.loading.source import ModelSource
from ui import charts, long_inputs
from viz.long_view import WINDOW_TOKENS, fit_half_width, window_figure


def read_all_text(long: long_inputs.LongCount) -> dict[str, str]:
    """The label and help of a page's "Read all N tokens" toggle (the toggle itself stays in the
    page, where links find its key)."""
    return dict(
        label=f"Read all {long.tokens:,} tokens, layer by layer",
        help=f"This view otherwise keeps the first {long.kept} tokens, with every map in full. "
             f"Turned on, it reads up to {long.limit:,} tokens: the model runs layer by layer "
             "and each layer's maps are measured and pooled as soon as they are computed, then "
             "let go; the head you pick is computed again, exactly, on its own. About 90 s "
             "at 4,096 tokens on this machine, once per text for everyone on the server (the "
             "pages that explore a model share it).")


def window_start(label: str, last: int, key: str, default: int, container) -> int:
    """A window's first position, 0..last, kept valid when the text changes."""
    value = st.session_state.get(key, default)
    st.session_state[key] = min(max(value if isinstance(value, int) else default, 0), last)
    return container.slider(label, 0, last, key=key) if last > 0 else 0


@dataclass(frozen=True)
class LongStatistics:
    """The per-head statistics table of a long input, and what it measured."""

    table: pd.DataFrame
    num_layers: int
    num_heads: int
    num_tokens: int


def window_last(tokens: tuple[str, ...]) -> int:
    """The last first position a window of a long input can have."""
    return max(len(tokens) - WINDOW_TOKENS, 0)


def exact_window(weights, tokens: tuple[str, ...], layer: int, head: int, prefix: str,
                 starts: tuple[int, int], picture, half_width: bool = False) -> None:
    """The exact weights of a window of a long input's head, with the tokens, in `picture`;
    `starts` are the window's first query and first key, from two `window_start` sliders that
    the page draws (so their keys are in the page's source, where links find them)."""
    query_start, key_start = starts
    figure = window_figure(weights, tokens, layer, head, query_start, key_start,
                           top=float(pool(weights).tops))
    charts.show(fit_half_width(figure) if half_width else figure, key=f"{prefix}_long_window",
                container=picture)


def statistics(source: ModelSource, text: str, pair: str) -> LongStatistics:
    """Every head's statistics over the whole long input (the same columns and labels as
    `head_statistics` of a full record), from the one streamed forward that also pools every
    head's thumbnail (ui.long_inputs.overview)."""
    overview = long_inputs.overview(source, text, pair)
    streamed = overview.streamed
    return LongStatistics(overview.statistics, streamed.num_layers, streamed.num_heads,
                          streamed.num_tokens)

"""The views several pages share, drawn from an attention access whatever the input's length.

A head of a few hundred tokens is drawn exactly, a cell per query and key with the tokens on the
axes; a longer one is drawn whole, max-pooled to a readable size, beside an exact window of
WINDOW_TOKENS tokens that two sliders move. Which one a page gets depends on the number of
tokens only, so a page calls `head_map` and never asks how the input was read.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from models.analysis.pooling import pool
from models.hooks.access import Attention
from models.limits import EXACT_MAP_TOKENS
from ui import charts
from ui.kept import head_key, kept_figure
from ui.downloads import export_buttons, long_export_buttons
from viz.head_analysis import norm_heatmap
from viz.heatmap import heads_grid, matrix_heatmap
from viz.rollout import long_rollout_figures
from viz.rollout import rollout_figures as exact_rollout_figures
from viz.long_view import WINDOW_TOKENS, fit_half_width, pooled_head_figure, window_figure


def window_start(label: str, last: int, key: str, default: int, container) -> int:
    """A window's first position, 0..last, kept valid when the text changes."""
    value = st.session_state.get(key, default)
    st.session_state[key] = min(max(value if isinstance(value, int) else default, 0), last)
    return container.slider(label, 0, last, key=key) if last > 0 else 0


def exact(attention: Attention) -> bool:
    """Whether a head of this input is drawn cell by cell (else pooled, with a window)."""
    return attention.num_tokens <= EXACT_MAP_TOKENS


def head_map(attention: Attention, layer: int, head: int, prefix: str, container=None,
             half_width: bool = False, name: str = "") -> np.ndarray:
    """One head drawn in `container` (the page by default): exactly, or pooled whole beside an
    exact window with its two sliders (keys `{prefix}_window_query` / `_key`, so links keep
    them); `name` starts its title (which input it is). Returns the head's (T, T) weights."""
    container = container or st.container()
    weights = attention.head(layer, head)
    title = f"{name} · layer {layer}, head {head}" if name else f"Layer {layer} · Head {head}"
    if exact(attention):
        def exact_map() -> go.Figure:
            figure = matrix_heatmap(weights, attention.tokens, title)
            return fit_half_width(figure) if half_width else figure
        charts.show(kept_figure(attention, head_key(layer, head, title, half_width), exact_map),
                    key=f"{prefix}_heatmap", container=container)
        return weights
    whole, window = (container, container) if half_width else container.columns(2, gap="medium")
    pooled = attention.remember(("pooled head", layer, head), lambda: pool(weights))
    whole_title = f"{title}: all {attention.num_tokens:,} tokens" if name else None
    charts.show(kept_figure(attention, ("pooled head", layer, head, whole_title),
                            lambda: fit_half_width(pooled_head_figure(pooled, layer, head,
                                                                      title=whole_title))),
                key=f"{prefix}_long_whole", container=whole)
    last = max(attention.num_tokens - WINDOW_TOKENS, 0)  # it starts on the diagonal at the end
    query = window_start("Window: first query", last, f"{prefix}_window_query", last, window)
    key = window_start("Window: first key", last, f"{prefix}_window_key", last, window)
    charts.show(kept_figure(attention, ("window", layer, head, query, key),
                            lambda: fit_half_width(window_figure(
                                weights, attention.tokens, layer, head, query, key,
                                top=float(pooled.tops)))),
                key=f"{prefix}_long_window", container=window)
    return weights


def norm_map(attention: Attention, layer: int, head: int, prefix: str, container=None) -> None:
    """One head's norm-based map ||alpha_ij f(x_j)|| (per model token): exact with its tokens
    for a short input, max-pooled whole for a long one."""
    container = container or st.container()
    def build() -> go.Figure:
        norms = attention.norm_head(layer, head)
        if exact(attention):
            return fit_half_width(norm_heatmap(attention.tokens, norms, layer, head))
        return fit_half_width(pooled_head_figure(
            pool(norms), layer, head, title=f"Layer {layer} · Head {head}: ‖α·f(x)‖, all "
                                            f"{attention.num_tokens} tokens",
            colorbar_title="‖α·f(x)‖"))
    charts.show(kept_figure(attention, ("norm", layer, head), build),
                key=f"{prefix}_norm_heatmap", container=container)


def layer_grid(attention: Attention, layer: int, prefix: str) -> None:
    """Every head of one layer as small multiples on one colour scale: exact for a short input,
    its thumbnails (max-pooled blocks) for a long one."""
    def build() -> go.Figure:
        if exact(attention):
            maps = np.stack([attention.head(layer, head) for head in range(attention.num_heads)])
            return heads_grid(maps, layer, attention.tokens)
        pooled = attention.summary().pooled[layer]  # (H, c, c)
        return heads_grid(pooled, layer, None, pooled_from=attention.num_tokens)
    charts.show(kept_figure(attention, ("grid", layer), build), key=f"{prefix}_grid")


def head_exports(attention: Attention, layer: int, head: int, prefix: str) -> None:
    """The downloads of one head and its input: every map when they are held in memory, else the
    head exactly and every head's thumbnail (every map of a long input would be gigabytes)."""
    if attention.whole:
        export_buttons(attention.record, layer, head, prefix)
    else:
        long_export_buttons(attention.head(layer, head), attention.summary().pooled,
                            attention.tokens, attention.label, layer, head, prefix)


def rollout_figures(attention: Attention, layer: int):
    """(head-averaged attention of `layer`, rollout up to it): exact with the tokens when the
    summary kept the maps whole, else max-pooled blocks whose hover names their tokens."""
    rollout = attention.summary().rollout
    if rollout.raw is not None:
        return exact_rollout_figures(*rollout.exact(layer), attention.tokens, layer)
    return long_rollout_figures(*rollout.pooled(layer), layer, attention.tokens)


@contextmanager
def progress_bar(message: str):
    """A progress bar for one slow step; yields the `progress(done, total)` callback."""
    bar = st.progress(0.0, text=f"{message}…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{message}: {done} of {total}…")
    try:
        yield progress
    finally:
        bar.empty()


def with_progress(message: str, work: Callable[[Callable[[int, int], None]], object]):
    """`work(progress)` with a progress bar for its steps."""
    with progress_bar(message) as progress:
        return work(progress)

"""Long inputs (beyond the full-record limit) on the all-heads page: streamed once per text.

A decoder's full trace is capped (models/limits.py) because it holds every layer's T x T maps.
A long input (up to models.limits.LONG_TOKENS) is read by one streamed forward that keeps only
each layer's max-pooled thumbnails (models/streaming.py), and one head's exact map is computed
on demand by a forward that stops after its layer. Both are kept in the server's byte-bounded
trace store; one long forward runs at a time on the server (each holds one layer's maps, about
600 MB at 4,096 tokens on SmolLM2, while it runs).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import streamlit as st

from models.errors import ModelLoadError
from models.source import ModelSource
from models.streaming import Streamed, exact_layer, long_limit, prepare, stream
from ui import cache
from viz.overview import THUMBNAIL_CELLS, max_pool

_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class LongOverview:
    """A long input's tokens and every head's thumbnail (L, H, q, k) float32."""

    streamed: Streamed
    pooled: np.ndarray

    @property
    def nbytes(self) -> int:
        ids = self.streamed.encoded.input_ids
        return self.pooled.nbytes + ids.numel() * 80 + 4096  # ids, tokens and their strings


@dataclass(frozen=True)
class LongHead:
    """One head's exact (Q, K) map of a long input."""

    weights: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.weights.nbytes + 4096


@dataclass(frozen=True)
class LongCount:
    """A long input's size: `tokens` read (at most `limit`), `kept` by the full trace."""

    tokens: int
    limit: int
    kept: int


def long_count(source: ModelSource, text: str, pair: str) -> LongCount | None:
    """The input's token count when it is longer than the full trace keeps and the model can
    read more; None otherwise, or when the model cannot load (the page's own path says why)."""
    if not text.strip():
        return None
    try:
        runner = cache.loaded(source)
    except (ModelLoadError, ValueError):
        return None
    limit = long_limit(runner)
    if limit <= runner.max_tokens:
        return None
    encoded, _ = prepare(runner, text, pair or None)  # tokenizing is cheap next to a forward
    count = len(encoded.tokens)
    return LongCount(count, limit, runner.max_tokens) if count > runner.max_tokens else None


def one_at_a_time(work):
    """Run `work` when no other long forward is running on the server."""
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        with st.spinner("Another long input is being read on this server; yours starts when it "
                        "finishes…"):
            _ONE_AT_A_TIME.acquire()
    try:
        return work()
    finally:
        _ONE_AT_A_TIME.release()


def overview(source: ModelSource, text: str, pair: str) -> LongOverview:
    """Every head's thumbnail for a long input, streamed once per server with a progress bar."""
    runner = cache.loaded(source)
    key = ("long-overview", source, runner.label, text, pair)

    def compute() -> LongOverview:
        bar = st.progress(0.0, text="Reading the long input layer by layer…")
        layers = runner.config.num_hidden_layers if hasattr(runner.config, "num_hidden_layers") \
            else None

        def reduce(index: int, maps: np.ndarray) -> np.ndarray:
            if layers:
                bar.progress(min((index + 1) / layers, 1.0),
                             text=f"Reading the long input: layer {index + 1} of {layers}…")
            return max_pool(maps, THUMBNAIL_CELLS).copy()  # (H, q, k), not a view of the maps

        try:
            streamed = one_at_a_time(lambda: stream(runner, text, pair or None, reduce))
        finally:
            bar.empty()
        return LongOverview(streamed, np.stack(streamed.summaries))

    return cache.kept_trace(key, compute)


def head(source: ModelSource, text: str, pair: str, layer: int, head_index: int) -> np.ndarray:
    """(Q, K) exact weights of one head of a long input (the layers before it run fused
    attention; see models.streaming.exact_layer)."""
    runner = cache.loaded(source)
    key = ("long-head", source, runner.label, text, pair, layer, head_index)

    def compute() -> LongHead:
        encoded, _ = prepare(runner, text, pair or None)
        with st.spinner(f"Computing layer {layer} on the whole input…"):
            maps = one_at_a_time(lambda: exact_layer(runner, encoded, layer, fast=True))
        return LongHead(maps[head_index].copy())  # the head alone: the layer's maps can go

    return cache.kept_trace(key, compute).weights

"""Exact rows of a long input, from its layers' kept inputs (models/hooks/long_rows.py): one query's
attention row with its q, k and v vectors for the arithmetic page, and a window of every layer's
maps for bertviz. Both are kept in the server's byte-bounded trace store."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models.hooks.long_rows import ExactRows, exact_rows, window_maps
from models.hooks.record import AttentionRecord
from models.loading.source import ModelSource
from models.store import stores
from models.store.keys import result_key
from ui import byte_caches, cache, long_inputs


def exact_row(source: ModelSource, text: str, pair: str, layer: int, query: int) -> ExactRows:
    """One query's exact row of every head of `layer`, with the vectors the model multiplied."""
    runner = cache.loaded(source)
    key = result_key("long-row", source, runner.label, text, pair, layer, query)

    def compute() -> ExactRows:
        overview, kept = long_inputs.kept_inputs(source, text, pair)
        rows = exact_rows(runner, overview.streamed.encoded, layer, range(query, query + 1), kept)
        return rows

    return byte_caches.kept(stores.TRACES, key, compute)


def window_record(source: ModelSource, text: str, pair: str, start: int,
                  size: int) -> AttentionRecord:
    """Every layer's exact maps of the window [start, start + size) of a long input (queries and
    keys both cut to it), as a record whose rows hold only the weights inside the window."""
    runner = cache.loaded(source)
    key = result_key("long-window", source, runner.label, text, pair, start, size)

    def compute() -> AttentionRecord:
        overview, kept = long_inputs.kept_inputs(source, text, pair)
        encoded = overview.streamed.encoded
        stop = min(start + size, len(encoded.tokens))
        bar = st.progress(0.0, text="Computing the window in every layer…")
        try:
            maps = window_maps(runner, encoded, start, stop, kept, progress=lambda done, total: (
                bar.progress(done / total, text=f"Computing the window: layer {done} of {total}…")))
        finally:
            bar.empty()
        special = tuple(p - start for p in encoded.special_positions if start <= p < stop)
        masks = ("causal", "window") if runner.causal else ("window",)
        return AttentionRecord(encoded.tokens[start:stop], weights=np.ascontiguousarray(maps),
                               source=runner.label, masks=masks, special_positions=special)

    return byte_caches.kept(stores.TRACES, key, compute)


def strongest_keys(weights: np.ndarray, candidates: list[int], count: int) -> list[int]:
    """The `count` candidate keys with the largest weights, in position order."""
    chosen = np.asarray(candidates, dtype=int)
    order = np.argsort(-weights[chosen], kind="stable")[:count]
    return sorted(chosen[order].tolist())

"""The head finder on a long input: the query word's rows of every layer, exactly.

The head finder needs one thing from the maps: the query's rows, in every layer and head. For a
long input they are computed from each layer's kept input (models.hooks.long_rows.rows_every_layer),
one layer at a time, so no (T, T) map is ever held: about 4 s at 4,096 tokens on SmolLM2, then
kept in the server's byte-bounded trace store (~13 MB for a three-piece word at 4,096 tokens).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from models.analysis.head_finder import TokenSpan
from models.hooks.long_rows import rows_every_layer
from models.loading.source import ModelSource
from models.store import stores
from models.store.keys import result_key
from ui import byte_caches, cache, long_inputs


def query_rows(source: ModelSource, text: str, pair: str, query: TokenSpan) -> np.ndarray:
    """(L, H, W, K) float32, read-only: every layer's exact rows of the query's W pieces over all
    the keys of a long input, computed once per server with a progress bar."""
    runner = cache.loaded(source)
    key = result_key("long-finder-rows", source, runner.label, text, pair, query.start,
                     query.stop)

    def compute() -> np.ndarray:
        overview, kept = long_inputs.kept_inputs(source, text, pair)
        bar = st.progress(0.0, text="Computing the query's rows in every layer…")
        try:
            rows = rows_every_layer(
                runner, overview.streamed.encoded, range(query.start, query.stop), kept,
                progress=lambda done, total: bar.progress(
                    done / total, text=f"Computing the query's rows: layer {done} of {total}…"))
        finally:
            bar.empty()
        rows.setflags(write=False)
        return rows

    return byte_caches.kept(stores.TRACES, key, compute)

"""A long decoder input's predictions, read whole (models/experiments/long_predictions.py): the last layer
and the head run again from the last layer's kept input (ui/long_inputs.py), and what they
predicted is kept in the server's byte-bounded trace store, once per text."""

from __future__ import annotations

import streamlit as st

from models.store.byte_cache import release_freed_memory
from models.experiments.long_predictions import long_predictions
from models.loading.source import ModelSource
from models.hooks.trace import Predictions
from models.store import stores
from models.store.keys import result_key
from ui import byte_caches, cache, long_inputs


def long_count(source: ModelSource, text: str, pair: str) -> long_inputs.LongCount | None:
    """long_inputs.long_count for a causal language model with a head; None for any other model
    (a long input's predictions are a next-token view)."""
    long = long_inputs.long_count(source, text, pair)
    if long is None:
        return None
    runner = cache.loaded(source)  # loaded by long_count already
    output_embeddings = getattr(runner.model, "get_output_embeddings", lambda: None)
    return long if runner.causal and output_embeddings() is not None else None


def predictions(source: ModelSource, text: str, pair: str) -> Predictions:
    """The next-token candidates after the whole long text and every position's prediction
    (the `Predictions` a short input's trace holds; it reports its own `nbytes`)."""
    runner = cache.loaded(source)
    key = result_key("long-predictions", source, runner.label, text, pair)

    def compute() -> Predictions:
        overview, kept = long_inputs.kept_inputs(source, text, pair)
        bar = st.progress(0.0, text="Predicting every next token from the last layer's input…")

        def progress(done: int, total: int) -> None:
            bar.progress(done / total, text=f"Predicting every next token: step {done} of "
                                            f"{total}…")

        try:
            return long_inputs.one_at_a_time(lambda: long_predictions(
                runner, overview.streamed.encoded, kept, progress=progress))
        finally:
            bar.empty()
            release_freed_memory()  # the last layer's maps (~1.2 GB at 4,096 tokens) are gone

    return byte_caches.kept(stores.TRACES, key, compute)


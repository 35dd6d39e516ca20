"""Thin cached wrappers around models.loading.source: models load once per server, traces once per input.

Loaded models are kept in bounded registries (models/loading/loaded_models.py) keyed by what a model is.
Traces (and the token-option views derived from
them) are immutable and kept in one byte-bounded cache shared by every session
(`models.limits.TRACE_CACHE_BYTES`): a decoder trace at its limit is ~200 MB while an encoder
trace of a sentence is a few hundred KB, so a count of entries would bound nothing.
"""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

from models.analysis.token_options import TokenView, apply_token_options
from models.store.byte_cache import ByteBudgetCache
from models.loading.decoder import DEFAULT_DECODER, load_decoder
from models.limits import LOADED_MODELS, SCRATCH_ENCODERS, TRACE_CACHE_BYTES
from models.loading.loaded_models import LoadedModels
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained, model_identity
from models.hooks.record import AttentionRecord
from models.loading.source import Kind, LoadedSource, ModelSource
from models.hooks.trace import Trace
from viz.bertviz_views import ViewChoice, view_html


@st.cache_resource
def _models() -> LoadedModels:
    """The Hugging Face models loaded on this server, keyed by what they are (however a name is
    spelled): the embedded defaults pinned, at most LOADED_MODELS others, least recent out."""
    return LoadedModels(LOADED_MODELS)


@st.cache_resource
def _scratch_encoders() -> LoadedModels:
    """From-scratch encoders (one per seed typed, or with weights copied in), bounded."""
    return LoadedModels(SCRATCH_ENCODERS)


def _embedded(name: str) -> bool:
    return name.strip() in (DEFAULT_MODEL, DEFAULT_DECODER)


def _kept(registry: LoadedModels, key: str, load, message: str, pinned: bool = False):
    """The registry's value for `key`; a spinner with `message` only while it loads."""
    if key in registry:
        return registry.get(key, load, pinned)
    with st.spinner(message):
        return registry.get(key, load, pinned)


def pretrained(name: str) -> LoadedModel:
    return _kept(_models(), f"encoder|{model_identity(name)}", lambda: load_pretrained(name),
                 "Loading the model (once per server)…", _embedded(name))


def decoder(name: str) -> LoadedModel:
    """A causal decoder. The embedded SmolLM2 must first be converted (ui.state does that,
    showing progress); the load here then reads the converted copy."""
    return _kept(_models(), f"decoder|{model_identity(name)}", lambda: load_decoder(name),
                 "Loading the decoder (once per server)…", _embedded(name))


def loaded(source: ModelSource) -> LoadedSource:
    """The runnable model for a choice. A pretrained kind wraps the kept Hugging Face model (no
    copy, so dropping it from the registry frees it); from-scratch encoders are kept apart."""
    if source.kind in (Kind.ENCODER, Kind.DECODER):
        return source.load(pretrained=pretrained, decoder=decoder)
    seed = source.seed if source.kind is Kind.SCRATCH_RANDOM else 0  # copied weights: no seed
    key = f"{source.kind.value}|{model_identity(source.name)}|{seed}"
    return _kept(_scratch_encoders(), key, lambda: source.load(pretrained=pretrained),
                 "Preparing the from-scratch encoder…")


def variant(source: ModelSource, name: str, build) -> LoadedSource:
    """A from-scratch model derived from `source` (e.g. its causal twin), kept in the same
    bounded registry as the from-scratch encoders."""
    key = f"{source.kind.value}|{model_identity(source.name)}|{source.seed}|{name}"
    return _kept(_scratch_encoders(), key, build, f"Building the {name} variant (same weights)…")


def kept_models_notice() -> str:
    return _models().notice()


def model_and_tokenizer(source: ModelSource) -> tuple[object, object, int]:
    """The torch module, tokenizer and token limit behind a model choice."""
    runner = loaded(source)
    return runner.model, runner.tokenizer, runner.max_tokens


@st.cache_resource
def _traces() -> ByteBudgetCache:
    """The one store of computed traces and token views for the whole server."""
    return ByteBudgetCache(TRACE_CACHE_BYTES)


def trace(source: ModelSource, text: str, pair: str) -> Trace:
    """The trace of one forward pass of `source` on the input, computed once per server."""
    return cached_trace(loaded(source), text, pair)


def cached_trace(runner: LoadedSource, text: str, pair: str) -> Trace:
    """The trace of `runner` on the input, computed once per server (keyed by source and label:
    a causal twin of the from-scratch encoder shares its source but not its label)."""
    with st.spinner("Running the model…"):
        return _traces().get(("trace", runner.source, runner.label, text, pair),
                             lambda: runner.run(text, pair or None))


def kept_trace(key: tuple, compute):
    """A value derived from one input (it reports its own `nbytes`), kept in the trace store."""
    return _traces().get(key, compute)


def record(source: ModelSource, text: str, pair: str) -> AttentionRecord:
    return trace(source, text, pair).record


def token_view(source: ModelSource, text: str, pair: str, merge_words: bool,
               hide_special: bool) -> TokenView:
    """The record after the sidebar's token options, computed once per input and options."""
    base = record(source, text, pair)

    def compute() -> Sized:
        view = apply_token_options(base, merge_words, hide_special)
        return Sized(view, view.record.nbytes)

    return _traces().get(("view", source, text, pair, merge_words, hide_special), compute).value


class Sized:
    """A value with its size in bytes, for the byte-bounded store."""

    def __init__(self, value, nbytes: int):
        self.value = value
        self.nbytes = nbytes + 4096


def copied_difference(name: str, text: str, pair: str) -> float:
    """Largest |attention difference| between the copied-weights encoder and the model itself."""
    ours = record(ModelSource(Kind.SCRATCH_COPIED, name), text, pair)
    reference = record(ModelSource(Kind.ENCODER, name), text, pair)
    return float(np.abs(ours.weights - reference.weights).max())


def bertviz_html(record: AttentionRecord, view: str | ViewChoice) -> str:
    """The same HTML for the same input, so the frame is not rebuilt and redrawn on every rerun.

    Keyed by the record's content (a digest of its weights), kept in the byte-bounded store."""
    digest = hashlib.blake2b(record.weights.tobytes(), digest_size=16).hexdigest()
    key = ("bertviz", view, record.source, record.tokens, record.masks, digest)

    def compute() -> Sized:
        html = view_html(record, view)
        return Sized(html, len(html))

    with st.spinner("Building bertviz's view…"):
        return _traces().get(key, compute).value

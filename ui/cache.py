"""Thin cached wrappers around models.loading.source: models load once per server, traces once per input.

Everything here is kept through ui.byte_caches.kept in the server's stores
(models/store/stores.py): Hugging Face models in `MODELS` keyed by what a model is (however its
name is spelled), the embedded ones pinned; from-scratch encoders in `SCRATCH_MODELS`; traces and
the views derived from them in `TRACES`, bounded in bytes (a decoder trace at its limit is
~200 MB while an encoder trace of a sentence is a few hundred KB, so a count would bound nothing).
"""

from __future__ import annotations

import hashlib

import numpy as np

from models.limits import LOADED_MODELS
from models.loading.decoder import DEFAULT_DECODER, load_decoder
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained, model_identity
from models.hooks.record import AttentionRecord
from models.loading.source import Kind, LoadedSource, ModelSource
from models.hooks.trace import Trace
from models.store import stores
from models.store.keys import result_key
from ui.byte_caches import kept
from viz.bertviz_views import ViewChoice, view_html
from viz.tokens import TokenView, apply_token_options


def _embedded(name: str) -> bool:
    return name.strip() in (DEFAULT_MODEL, DEFAULT_DECODER)


def pretrained(name: str) -> LoadedModel:
    return kept(stores.MODELS, result_key("encoder", model_identity(name)),
                lambda: load_pretrained(name), "Loading the model (once per server)…",
                pinned=_embedded(name))


def decoder(name: str) -> LoadedModel:
    """A causal decoder. The embedded SmolLM2 must first be converted (ui.state does that,
    showing progress); the load here then reads the converted copy."""
    return kept(stores.MODELS, result_key("decoder", model_identity(name)),
                lambda: load_decoder(name), "Loading the decoder (once per server)…",
                pinned=_embedded(name))


def loaded(source: ModelSource) -> LoadedSource:
    """The runnable model for a choice. A pretrained kind wraps the kept Hugging Face model (no
    copy, so dropping it from the store frees it); from-scratch encoders are kept apart."""
    if source.kind in (Kind.ENCODER, Kind.DECODER):
        return source.load(pretrained=pretrained, decoder=decoder)
    key = result_key(source.kind.value, model_identity(source.name), source.seed)
    return kept(stores.SCRATCH_MODELS, key, lambda: source.load(pretrained=pretrained),
                "Preparing the from-scratch encoder…")


def variant(source: ModelSource, name: str, build) -> LoadedSource:
    """A from-scratch model derived from `source` (e.g. its causal twin), kept in the same
    bounded store as the from-scratch encoders."""
    key = result_key(f"{source.kind.value} {name}", model_identity(source.name), source.seed)
    return kept(stores.SCRATCH_MODELS, key, build, f"Building the {name} variant (same weights)…")


def kept_models_notice() -> str:
    """One sentence for the sidebar: how many models the server keeps."""
    return (f"This server keeps at most {LOADED_MODELS} models loaded from the sidebar besides "
            "the built-in ones; loading another unloads the one used least recently.")


def model_and_tokenizer(source: ModelSource) -> tuple[object, object, int]:
    """The torch module, tokenizer and token limit behind a model choice."""
    runner = loaded(source)
    return runner.model, runner.tokenizer, runner.max_tokens


def trace(source: ModelSource, text: str, pair: str) -> Trace:
    """The trace of one forward pass of `source` on the input, computed once per server."""
    return cached_trace(loaded(source), text, pair)


def cached_trace(runner: LoadedSource, text: str, pair: str) -> Trace:
    """The trace of `runner` on the input, computed once per server (keyed by source and label:
    a causal twin of the from-scratch encoder shares its source but not its label)."""
    return kept(stores.TRACES, result_key("trace", runner.source, runner.label, text, pair),
                lambda: runner.run(text, pair or None), "Running the model…")


def record(source: ModelSource, text: str, pair: str) -> AttentionRecord:
    return trace(source, text, pair).record


def token_view(source: ModelSource, text: str, pair: str, merge_words: bool,
               hide_special: bool) -> TokenView:
    """The record after the sidebar's token options, computed once per input and options."""
    base = record(source, text, pair)
    return kept(stores.TRACES, result_key("view", source, text, pair, merge_words, hide_special),
                lambda: apply_token_options(base, merge_words, hide_special))


def copied_difference(name: str, text: str, pair: str) -> float:
    """Largest |attention difference| between the copied-weights encoder and the model itself."""
    ours = record(ModelSource(Kind.SCRATCH_COPIED, name), text, pair)
    reference = record(ModelSource(Kind.ENCODER, name), text, pair)
    return float(np.abs(ours.weights - reference.weights).max())


def bertviz_html(record: AttentionRecord, view: str | ViewChoice) -> str:
    """The same HTML for the same input, so the frame is not rebuilt and redrawn on every rerun.

    Keyed by the record's content (a digest of its weights), kept in the byte-bounded store."""
    digest = hashlib.blake2b(record.weights.tobytes(), digest_size=16).hexdigest()
    key = result_key("bertviz", view, record.source, record.tokens, record.masks, digest)
    return kept(stores.TRACES, key, lambda: view_html(record, view), "Building bertviz's view…")

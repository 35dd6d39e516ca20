"""Thin cached wrappers around models.loading.source: models load once per server, traces once per input.

Everything here is kept through ui.byte_caches.kept in the server's stores
(models/store/stores.py): Hugging Face models in `MODELS` (encoder–decoders in `SEQ2SEQ_MODELS`)
keyed by what a model is (however its name is spelled), the embedded ones pinned; models of a
kind built from scratch (models/loading/kinds/) in `SCRATCH_MODELS`; traces and
the views derived from them in `TRACES`, bounded in bytes (a decoder trace at its limit is
~200 MB while an encoder trace of a sentence is a few hundred KB, so a count would bound nothing).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from models.analysis.token_options import TokenView, apply_token_options
from models.limits import LOADED_MODELS
from models.loading.decoder import DEFAULT_DECODER, load_decoder
from models.loading.hf_seq2seq import load_seq2seq
from models.loading import kinds
from models.loading.kinds import DECODER_NAMES, Loaders
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained, model_identity
from models.hooks.record import AttentionRecord
from models.loading.source import LoadedSource, ModelSource
from models.hooks.trace import Trace
from models.store import stores
from models.store.keys import result_key
from ui.byte_caches import kept

if TYPE_CHECKING:
    from viz.bertviz_views import ViewChoice


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


def seq2seq(name: str) -> LoadedModel:
    """A Hugging Face encoder–decoder, kept by what it is."""
    return kept(stores.SEQ2SEQ_MODELS, result_key("seq2seq", model_identity(name)),
                lambda: load_seq2seq(name), "Loading the encoder–decoder (once per server)…")


def named(kind: str, name: str) -> LoadedModel:
    """The Hugging Face model a sidebar kind's name loads (the decoder's, or the encoder's)."""
    return (decoder if kinds.spec(kind).names == DECODER_NAMES else pretrained)(name)


KEPT = Loaders(pretrained=pretrained, decoder=decoder, seq2seq=seq2seq)


def loaded(source: ModelSource) -> LoadedSource:
    """The runnable model for a choice, loaded by its kind (models/loading/kinds/) from the
    models kept here. A kind loaded by name wraps the kept model (no copy, so dropping it from
    its store frees it); a kind built from scratch is kept whole, by source."""
    if not source.spec.from_scratch:
        return source.spec.load(source, KEPT)
    key = result_key(source.kind, model_identity(source.name), source.seed)
    return kept(stores.SCRATCH_MODELS, key, lambda: source.spec.load(source, KEPT),
                f"Preparing the {source.spec.title.lower()}…")


def variant(source: ModelSource, name: str, build) -> LoadedSource:
    """A from-scratch model derived from `source` (e.g. its causal twin), kept in the same
    bounded store as the from-scratch encoders."""
    key = result_key(f"{source.kind} {name}", model_identity(source.name), source.seed)
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


def copied_difference(source: ModelSource, text: str, pair: str) -> float:
    """Largest |attention difference| between a model whose kind reproduces another (weights
    copied in) and that model itself."""
    ours = record(source, text, pair)
    reference = record(ModelSource(source.spec.reproduces, source.name), text, pair)
    return float(np.abs(ours.weights - reference.weights).max())


def bertviz_html(record: AttentionRecord, view: str | ViewChoice) -> str:
    """The same HTML for the same input, so the frame is not rebuilt and redrawn on every rerun.

    Keyed by the record's content (a digest of its weights), kept in the byte-bounded store.
    bertviz (and IPython under it) is imported on the bertviz page's first use, not at start."""
    from viz.bertviz_views import view_html

    digest = hashlib.blake2b(record.weights.tobytes(), digest_size=16).hexdigest()
    key = result_key("bertviz", view, record.source, record.tokens, record.masks, digest)
    return kept(stores.TRACES, key, lambda: view_html(record, view), "Building bertviz's view…")

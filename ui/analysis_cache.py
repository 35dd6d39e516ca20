"""Cached model runs for the "which heads matter" pages: detectors, ablation, knockout, norms.

Each result is keyed by the sidebar's model source and the input and kept in one store bounded
in bytes (ui.byte_caches.analyses, `models.limits.ANALYSIS_CACHE_BYTES`): a comparison keeps two
full records, ~270 MB for a decoder at its token limit, so a count of entries would bound nothing.
Models come from ui.cache, so they load once per server.

Ablation and knockout also run on a classifier fine-tuned on this server (ui.finetune_cache):
`FineTuned` names it in the place of a model source, and its target is a class index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import streamlit as st

from models.experiments import ablation
from models.experiments.ablation import Comparison, PreparedInput, Target
from models.analysis.repeated_tokens import repeated_tokens_record
from models.hooks.record import AttentionRecord
from models.loading.source import ModelSource
from ui import byte_caches, cache, finetune_cache
from ui.links import shared_params


@dataclass(frozen=True)
class FineTuned:
    """A classifier fine-tuned on this server (its training key), from the sidebar's encoder."""

    key: str
    encoder_name: str
    label: str  # names the classifier in its records

    causal = False


Subject = ModelSource | FineTuned  # what the experiments run on
Value = TypeVar("Value")


def classifier_of(encoder_name: str, finished: finetune_cache.Finished) -> FineTuned:
    return FineTuned(finished.key, encoder_name, finished.description)


def _classifier(subject: FineTuned) -> finetune_cache.FinetuneResult:
    result = finetune_cache.store().get(subject.key)
    if result is None:
        raise ValueError("This fine-tuned classifier is no longer kept on the server: train it "
                         "again on the Fine-tuning page.")
    return result


def _model(subject: Subject) -> tuple[object, object, int, object]:
    """The module, its tokenizer, its token limit, and what names its outputs (the tokenizer,
    or a classifier's ClassLabels)."""
    if isinstance(subject, FineTuned):
        result = _classifier(subject)
        tokenizer = cache.pretrained(subject.encoder_name).tokenizer
        return (ablation.capturable(result.classifier), tokenizer, result.settings.max_tokens,
                ablation.ClassLabels(result.class_names))
    model, tokenizer, limit = cache.model_and_tokenizer(subject)
    return model, tokenizer, limit, tokenizer


def class_names(subject: FineTuned) -> tuple[str, ...]:
    return _classifier(subject).class_names


def prediction_kind(source: Subject) -> str | None:
    """ablation.NEXT_TOKEN, ablation.MASKED_WORD, ablation.CLASS_PROBABILITY, or None when the
    model predicts no token."""
    model, tokenizer, _, _ = _model(source)
    return ablation.prediction_kind(model, tokenizer, source.causal)


def prepared(source: Subject, text: str, pair: str) -> PreparedInput:
    """The model's inputs; a classifier reads the first sentence only, as it was trained."""
    model, tokenizer, limit, _ = _model(source)
    if isinstance(source, FineTuned):
        return ablation.prepare(model, tokenizer, limit, text, False, source.label)
    return ablation.prepare(model, tokenizer, limit, text, source.causal, source.label, pair)


def masked(source: ModelSource, text: str, pair: str,
           position: int) -> tuple[PreparedInput, Target]:
    """For a masked LM: the input with the token at `position` masked, and that word as target."""
    _, tokenizer, _ = cache.model_and_tokenizer(source)
    return ablation.with_mask(prepared(source, text, pair), tokenizer, position)


def _input_and_target(source: Subject, text: str, pair: str, mask_position: int | None,
                      target_id: int | None) -> tuple[PreparedInput, Target]:
    _, tokenizer, _, outputs = _model(source)
    if isinstance(source, FineTuned):
        return prepared(source, text, pair), ablation.class_target(outputs, target_id)
    if mask_position is not None:
        return masked(source, text, pair, mask_position)
    given = prepared(source, text, pair)
    return given, ablation.next_token_target(given, tokenizer, target_id)


def _kept(key: tuple, compute: Callable[[], Value], message: str | None) -> Value:
    return byte_caches.kept(byte_caches.analyses(), key, compute, message)


def baseline(source: Subject, text: str, pair: str, mask_position: int | None,
             target_id: int | None = None) -> ablation.Outcome:
    """The plain run's prediction. A causal LM without a target takes its own top next token, a
    classifier its predicted class; a classifier's outcome keeps its attention record (its
    input is at most its training length, 64 tokens by default)."""
    def compute() -> ablation.Outcome:
        model, _, _, outputs = _model(source)
        keep = isinstance(source, FineTuned)
        if mask_position is None and target_id is None:
            return ablation.predict(model, prepared(source, text, pair), outputs, keep_record=keep)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.predict(model, given, outputs, target, keep_record=keep)

    return _kept(("baseline", source, text, pair, mask_position, target_id), compute,
                 "Running the model…")


def target_id_of(source: ModelSource, text: str, pair: str, word: str) -> int:
    """The token id of `word` as the next token (ValueError with one sentence when it has none)."""
    _, tokenizer, _, _ = _model(source)
    return ablation.target_from_text(prepared(source, text, pair), tokenizer, word).token_id


def head_ablation(source: Subject, text: str, pair: str, mask_position: int | None,
                  target_id: int | None, heads: tuple[tuple[int, int], ...],
                  mode: str) -> Comparison:
    def compute() -> Comparison:
        model, _, _, outputs = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.ablate_heads(model, given, outputs, target, heads, mode)

    return _kept(("head_ablation", source, text, pair, mask_position, target_id, heads, mode),
                 compute, "Running the model with the heads ablated…")


def importance(source: Subject, text: str, pair: str, mask_position: int | None,
               target_id: int | None, mode: str,
               _progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(L, H) change of the target's log-probability with each head ablated alone; `_progress`
    (not part of the key) hears each batch while it is computed."""
    def compute() -> np.ndarray:
        model, _, _, _ = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.importance_grid(model, given, target, mode, progress=_progress).numpy()

    return _kept(("importance", source, text, pair, mask_position, target_id, mode), compute,
                 None)


def knockout(source: Subject, text: str, pair: str, mask_position: int | None,
             target_id: int | None, query: int, keys: tuple[int, ...],
             layers: tuple[int, ...]) -> Comparison:
    def compute() -> Comparison:
        model, _, _, outputs = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.knockout(model, given, outputs, target, query, keys, layers,
                                 keep_records=False)

    return _kept(("knockout", source, text, pair, mask_position, target_id, query, keys, layers),
                 compute, "Running the model with the edges blocked…")


def repeated_tokens(source: ModelSource, count: int, seed: int) -> AttentionRecord:
    def compute() -> AttentionRecord:
        model, tokenizer, limit = cache.model_and_tokenizer(source)
        return repeated_tokens_record(model, tokenizer, limit, source.causal, source.label, count,
                                      seed)

    return _kept(("repeated_tokens", source, count, seed), compute,
                 "Running the model on random tokens repeated twice…")


def norm_maps(source: ModelSource, text: str, pair: str) -> np.ndarray:
    """(L, H, Q, K) ||alpha f(x)|| of every head for the sidebar's input (model tokens), from the
    sidebar trace's own value norms: no extra model run."""
    trace = cache.trace(source, text, pair)
    return np.stack([trace.norm_weights(layer) for layer in range(trace.record.num_layers)])


def model_tokens(source: ModelSource, text: str, pair: str) -> tuple[str, ...]:
    """The sidebar input's tokens as the model reads them (no token options applied)."""
    return cache.trace(source, text, pair).record.tokens


MAPS_PAGE = "pages/attention_maps.py"
OPEN_REQUEST = "analysis_open_head"  # session key: a head button was clicked


def _request_open(layer: int, head: int) -> None:
    """Button callback: remember the head; the page then switches (callbacks cannot)."""
    st.session_state["maps_layer"] = int(layer)
    st.session_state["maps_head"] = int(head)
    st.session_state[OPEN_REQUEST] = True


def open_head_buttons(heads: list[tuple[int, int, str]], key: str, long: bool = False) -> None:
    """One button per (layer, head, note): a click opens that head on the attention-maps page
    (reading the whole long input there too when `long`).

    The switch carries the whole view as a link (ui.links): st.switch_page starts the new page
    without the browser's widget values, so the sidebar's input travels in the link.
    """
    if st.session_state.pop(OPEN_REQUEST, False):
        st.switch_page(MAPS_PAGE, query_params={
            **shared_params(), "layer": str(st.session_state["maps_layer"]),
            "head": str(st.session_state["maps_head"]), **({"long": "true"} if long else {})})
    columns = st.columns(len(heads)) if heads else []
    for column, (layer, head, note) in zip(columns, heads):
        column.button(f"Open layer {layer} · head {head}", key=f"{key}_{layer}_{head}",
                      help=note or None, on_click=_request_open, args=(layer, head))

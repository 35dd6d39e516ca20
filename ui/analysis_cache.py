"""Cached model runs for the "which heads matter" pages: detectors, ablation, knockout, norms.

Each result is keyed by the sidebar's model source and the input and kept in one store bounded
in bytes (models.store.stores.ANALYSES, `models.limits.ANALYSIS_CACHE_BYTES`): a comparison keeps
two full records, ~270 MB for a decoder at its token limit, so a count of entries would bound
nothing. Models come from ui.cache, so they load once per server.

Ablation and knockout also run on a classifier fine-tuned on this server (ui.finetune_cache): a
model source of the classifier kind (models/loading/kinds/classifier.py) names it by its
training key, and its target is a class index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import streamlit as st

from models.experiments import ablation, targets
from models.experiments.ablation import Comparison
from models.experiments.targets import PreparedInput, Target
from models.analysis.repeated_tokens import repeated_tokens_record
from models.hooks.record import AttentionRecord
from models.loading.kinds import CLASSIFIER
from models.loading.source import ModelSource
from models.store import stores
from models.store.keys import ResultKey, result_key
from ui import cache, finetune_cache
from ui.byte_caches import kept
from ui.links import shared_params


Value = TypeVar("Value")


def classifier_of(finished: finetune_cache.Finished) -> ModelSource:
    """The model source of a classifier trained on this server."""
    return ModelSource(CLASSIFIER, finished.key)


def class_names(source: ModelSource) -> tuple[str, ...]:
    """A classifier's classes (its kind classifies; its name is its training key)."""
    return CLASSIFIER.trained(source).class_names


def _model(source: ModelSource) -> tuple[object, object, int, object]:
    """The module, its tokenizer, its token limit, and what names its outputs (the tokenizer,
    or a classifier's ClassLabels)."""
    model, tokenizer, limit = cache.model_and_tokenizer(source)
    outputs = targets.ClassLabels(class_names(source)) if source.spec.classifies else tokenizer
    return model, tokenizer, limit, outputs


def prediction_kind(source: ModelSource) -> str | None:
    """targets.NEXT_TOKEN, targets.MASKED_WORD, targets.CLASS_PROBABILITY, or None when the
    model predicts no token."""
    model, tokenizer, _, _ = _model(source)
    return targets.prediction_kind(model, tokenizer, source.causal)


def prepared(source: ModelSource, text: str, pair: str) -> PreparedInput:
    """The model's inputs; a classifier reads the first sentence only, as it was trained."""
    model, tokenizer, limit, _ = _model(source)
    if source.spec.classifies:
        return targets.prepare(model, tokenizer, limit, text, False, source.label)
    return targets.prepare(model, tokenizer, limit, text, source.causal, source.label, pair)


def masked(source: ModelSource, text: str, pair: str,
           position: int) -> tuple[PreparedInput, Target]:
    """For a masked LM: the input with the token at `position` masked, and that word as target."""
    _, tokenizer, _ = cache.model_and_tokenizer(source)
    return targets.with_mask(prepared(source, text, pair), tokenizer, position)


def _input_and_target(source: ModelSource, text: str, pair: str, mask_position: int | None,
                      target_id: int | None) -> tuple[PreparedInput, Target]:
    _, tokenizer, _, outputs = _model(source)
    if source.spec.classifies:
        return prepared(source, text, pair), targets.class_target(outputs, target_id)
    if mask_position is not None:
        return masked(source, text, pair, mask_position)
    given = prepared(source, text, pair)
    return given, targets.next_token_target(given, tokenizer, target_id)


def _kept(key: ResultKey, compute: Callable[[], Value], message: str | None) -> Value:
    return kept(stores.ANALYSES, key, compute, message)


def baseline(source: ModelSource, text: str, pair: str, mask_position: int | None,
             target_id: int | None = None) -> ablation.Outcome:
    """The plain run's prediction. A causal LM without a target takes its own top next token, a
    classifier its predicted class; a classifier's outcome keeps its attention record (its
    input is at most its training length, 64 tokens by default)."""
    def compute() -> ablation.Outcome:
        model, _, _, outputs = _model(source)
        keep = source.spec.classifies
        if mask_position is None and target_id is None:
            return ablation.predict(model, prepared(source, text, pair), outputs, keep_record=keep)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.predict(model, given, outputs, target, keep_record=keep)

    key = result_key("baseline", source, text, pair, mask_position, target_id)
    return _kept(key, compute, "Running the model…")


def target_id_of(source: ModelSource, text: str, pair: str, word: str) -> int:
    """The token id of `word` as the next token (ValueError with one sentence when it has none)."""
    _, tokenizer, _, _ = _model(source)
    return targets.target_from_text(prepared(source, text, pair), tokenizer, word).token_id


def head_ablation(source: ModelSource, text: str, pair: str, mask_position: int | None,
                  target_id: int | None, heads: tuple[tuple[int, int], ...],
                  mode: str) -> Comparison:
    def compute() -> Comparison:
        model, _, _, outputs = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.ablate_heads(model, given, outputs, target, heads, mode)

    key = result_key("head_ablation", source, text, pair, mask_position, target_id, heads, mode)
    return _kept(key, compute, "Running the model with the heads ablated…")


def importance(source: ModelSource, text: str, pair: str, mask_position: int | None,
               target_id: int | None, mode: str,
               _progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(L, H) change of the target's log-probability with each head ablated alone; `_progress`
    (not part of the key) hears each batch while it is computed."""
    def compute() -> np.ndarray:
        model, _, _, _ = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.importance_grid(model, given, target, mode, progress=_progress).numpy()

    key = result_key("importance", source, text, pair, mask_position, target_id, mode)
    return _kept(key, compute, None)


def knockout(source: ModelSource, text: str, pair: str, mask_position: int | None,
             target_id: int | None, query: int, keys: tuple[int, ...],
             layers: tuple[int, ...]) -> Comparison:
    def compute() -> Comparison:
        model, _, _, outputs = _model(source)
        given, target = _input_and_target(source, text, pair, mask_position, target_id)
        return ablation.knockout(model, given, outputs, target, query, keys, layers,
                                 keep_records=False)

    key = result_key("knockout", source, text, pair, mask_position, target_id, query, keys,
                     layers)
    return _kept(key, compute, "Running the model with the edges blocked…")


def repeated_tokens(source: ModelSource, count: int, seed: int) -> AttentionRecord:
    def compute() -> AttentionRecord:
        model, tokenizer, limit = cache.model_and_tokenizer(source)
        return repeated_tokens_record(model, tokenizer, limit, source.causal, source.label, count,
                                      seed)

    return _kept(result_key("repeated_tokens", source, count, seed), compute,
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


def open_head_buttons(heads: list[tuple[int, int, str]], key: str, container=None) -> None:
    """One button per (layer, head, note): a click opens that head on the attention-maps page
    (the sidebar's input goes with it, read the same way). Side by side across the page, or one
    under another in `container` (a narrow column).

    The switch carries the whole view as a link (ui.links): st.switch_page starts the new page
    without the browser's widget values, so the sidebar's input travels in the link.
    """
    if st.session_state.pop(OPEN_REQUEST, False):
        st.switch_page(MAPS_PAGE, query_params={
            **shared_params(), "layer": str(st.session_state["maps_layer"]),
            "head": str(st.session_state["maps_head"])})
    if container is not None:
        columns = [container] * len(heads)
    else:
        columns = st.columns(len(heads)) if heads else []
    for column, (layer, head, note) in zip(columns, heads):
        column.button(f"Open layer {layer} · head {head}", key=f"{key}_{layer}_{head}",
                      help=note or None, on_click=_request_open, args=(layer, head))

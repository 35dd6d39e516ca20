"""Cached resources of the encoder–decoder page.

The toy translator is trained once per machine (the disk cache,
models/teaching/trained_translator.py) and loaded once per server (pinned in
models.store.stores.SEQ2SEQ_MODELS: one fixed model), so thirty students share one training.
Hugging Face encoder–decoders are a model kind (models/loading/kinds/seq2seq.py) loaded through
ui.cache.loaded and kept there by what they are (however the name is spelled), at most
`models.limits.SEQ2SEQ_MODELS` at once, least recently used unloaded. Translations and bertviz
pages are kept per input in the byte-bounded store shared with the other pages
(models.store.stores.RESULTS). "Retrain and watch" runs for one session at a time.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace

from models.limits import MAX_RETRAIN_STEPS, MIN_RETRAIN_STEPS
from models.loading.hf_seq2seq import Seq2SeqRun, run_seq2seq
from models.loading.kinds import SEQ2SEQ
from models.loading.pretrained import model_identity
from models.loading.source import LoadedSource, ModelSource
from models.hooks.record import AttentionRecord
from models.teaching.seq2seq_training import load_or_train, train, translate
from models.teaching.trained_translator import (Progress, Snapshot, TrainedTranslator, TrainingSettings,
                                       Translation, is_cached)
from models.store import stores
from models.store.keys import result_key
from ui import cache
from ui.byte_caches import kept
from viz.bertviz_views import encoder_decoder_html

TOY_SETTINGS = TrainingSettings()

_RETRAINING = threading.Lock()


def toy_is_trained() -> bool:
    """Whether this machine already has the trained toy model on disk."""
    return is_cached(TOY_SETTINGS)


def train_toy(progress: Progress) -> None:
    """Train the toy model into the disk cache (a session that finds another one training waits
    for it, then reads its result)."""
    load_or_train(TOY_SETTINGS, progress)


def toy_translator() -> TrainedTranslator:
    """One fixed model per server (pinned: not keyed by anything a student types)."""
    return kept(stores.SEQ2SEQ_MODELS, result_key("toy translator", TOY_SETTINGS),
                lambda: load_or_train(TOY_SETTINGS),
                "Loading the toy translator (once per server)…", pinned=True)


def toy_translation(text: str) -> Translation:
    return kept(stores.RESULTS, result_key("toy_translation", text),
                lambda: translate(toy_translator(), text))


def hf_model(name: str) -> LoadedSource:
    """The encoder–decoder `name` names, through its kind; a spinner only while it loads."""
    return cache.loaded(ModelSource(SEQ2SEQ, name))


def hf_run(name: str, source: str, target: str, max_new_tokens: int) -> Seq2SeqRun:
    key = result_key("hf_run", model_identity(name), source, target, max_new_tokens)
    return kept(stores.RESULTS, key,
                lambda: run_seq2seq(hf_model(name), source, target or None, max_new_tokens),
                "Running the model…")


def bertviz_html(encoder: AttentionRecord, decoder: AttentionRecord, cross: AttentionRecord,
                 view: str) -> str:
    """The same page for the same records (keyed by their content, as ui.cache's bertviz pages)."""
    key = result_key("bertviz", *(_content(record) for record in (encoder, decoder, cross)), view)
    return kept(stores.RESULTS, key, lambda: encoder_decoder_html(encoder, decoder, cross, view),
                "Building bertviz's view…")


def _content(record: AttentionRecord) -> tuple:
    digest = hashlib.blake2b(record.weights.tobytes(), digest_size=16).hexdigest()
    return (record.source, record.tokens, record.key_tokens, record.masks, digest)


def retrain_settings(steps: int) -> TrainingSettings:
    """The toy model's settings with another number of steps (warm-up scaled to fit)."""
    steps = max(MIN_RETRAIN_STEPS, min(MAX_RETRAIN_STEPS, int(steps)))
    return replace(TOY_SETTINGS, steps=steps, warmup_steps=min(TOY_SETTINGS.warmup_steps, steps // 5))


def retrain(steps: int, progress: Progress, on_snapshot) -> TrainedTranslator | None:
    """Train a fresh toy model for this session while reporting; None when another session
    is retraining right now (one at a time, so a class cannot stall the server)."""
    if not _RETRAINING.acquire(blocking=False):
        return None
    try:
        return train(retrain_settings(steps), progress, on_snapshot)
    finally:
        _RETRAINING.release()


def snapshot_steps(snapshots: tuple[Snapshot, ...]) -> tuple[int, ...]:
    return tuple(s.step for s in snapshots)

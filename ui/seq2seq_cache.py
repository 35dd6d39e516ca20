"""Cached resources of the encoder–decoder page.

The toy translator is trained once per machine (the disk cache, models/seq2seq_training.py) and
loaded once per server (st.cache_resource), so thirty students share one training. Loaded
Hugging Face encoder–decoders are kept once per server too; translations are kept per input,
bounded in number and age. "Retrain and watch" runs for one session at a time.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import streamlit as st

from models.hf_seq2seq import Seq2SeqRun, load_seq2seq, run_seq2seq
from models.pretrained import LoadedModel
from models.record import AttentionRecord
from models.seq2seq_training import (Progress, Snapshot, TrainedTranslator, TrainingSettings,
                                     Translation, is_cached, load_or_train, train, translate)
from viz.bertviz_views import encoder_decoder_html

TOY_SETTINGS = TrainingSettings()
MAX_RUNS = 32
RUN_TTL_SECONDS = 3600
MIN_RETRAIN_STEPS = 20
MAX_RETRAIN_STEPS = 600  # about a minute on two cores

_RETRAINING = threading.Lock()


def toy_is_trained() -> bool:
    """Whether this machine already has the trained toy model on disk."""
    return is_cached(TOY_SETTINGS)


def train_toy(progress: Progress) -> None:
    """Train the toy model into the disk cache (a session that finds another one training waits
    for it, then reads its result)."""
    load_or_train(TOY_SETTINGS, progress)


@st.cache_resource(show_spinner="Loading the toy translator (once per server)…")
def toy_translator() -> TrainedTranslator:
    return load_or_train(TOY_SETTINGS)


@st.cache_resource(max_entries=MAX_RUNS, ttl=RUN_TTL_SECONDS, show_spinner=False)
def toy_translation(text: str) -> Translation:
    return translate(toy_translator(), text)


@st.cache_resource(show_spinner="Loading the encoder–decoder (once per server)…")
def hf_model(name: str) -> LoadedModel:
    return load_seq2seq(name)


@st.cache_resource(max_entries=MAX_RUNS, ttl=RUN_TTL_SECONDS, show_spinner="Running the model…")
def hf_run(name: str, source: str, target: str, max_new_tokens: int) -> Seq2SeqRun:
    return run_seq2seq(hf_model(name), source, target or None, max_new_tokens)


@st.cache_data(max_entries=4, show_spinner="Building bertviz's view…")
def bertviz_html(encoder: AttentionRecord, decoder: AttentionRecord, cross: AttentionRecord,
                 view: str) -> str:
    return encoder_decoder_html(encoder, decoder, cross, view)


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

"""Cached results for the teaching pages (masks, scaling, positions), built on ui.cache's models."""

from __future__ import annotations

import streamlit as st

from dataclasses import replace

from models.encoder import Encoder
from models.masks import PaddedBatch, padded_batch, with_mask_style
from models.positions import (cosine_similarity, learned_position_count, learned_positions,
                              sinusoidal_encoding)
from models.scaling import (DotProductExperiment, EntropyCurve, SoftmaxRow, dot_product_experiment,
                            entropy_curve, experiment_dimensions, softmax_row)
from models.rotary import rotary_angles, rotary_module
from models.source import Kind, LoadedSource, ModelSource
from models.trace import Trace
from ui import cache

MAX_ENTRIES = 32
TTL_SECONDS = 3600
EXPERIMENT_SAMPLES = 2000  # pairs per dimension: about 1.7 % standard error on the mean
ENTROPY_ROWS = 200
ENTROPY_LARGEST_DIMENSION = 4096


def scratch_source(name: str, seed: int, copied: bool) -> ModelSource:
    return ModelSource(Kind.SCRATCH_COPIED if copied else Kind.SCRATCH_RANDOM, name, seed)


def _encoder(name: str, seed: int, copied: bool) -> Encoder:
    return cache.loaded(scratch_source(name, seed, copied)).model


def scratch_runner(name: str, seed: int, copied: bool, causal: bool) -> LoadedSource:
    """The from-scratch encoder, or a twin with the same weights whose attention is causal
    (kept in the same bounded registry as the encoders themselves)."""
    source = scratch_source(name, seed, copied)
    runner = cache.loaded(source)
    label = f"{runner.label}, {'causal' if causal else 'bidirectional'}"
    if not causal:
        return replace(runner, title=label)
    return cache.variant(source, "causal", lambda: replace(
        runner, model=with_mask_style(runner.model, causal=True), title=label))


def steps(name: str, seed: int, copied: bool, causal: bool, text: str, pair: str) -> Trace:
    """The trace of the from-scratch encoder (or its causal twin) on the input."""
    return cache.cached_trace(scratch_runner(name, seed, copied, causal), text, pair)


@st.cache_resource(max_entries=MAX_ENTRIES, ttl=TTL_SECONDS, show_spinner="Running the batch…")
def batch(name: str, seed: int, copied: bool, first: str, second: str) -> PaddedBatch:
    runner = scratch_runner(name, seed, copied, causal=False)
    return padded_batch(runner.model, runner.tokenizer, (first, second), runner.label)


@st.cache_resource(show_spinner="Multiplying random vectors (once per server)…")
def dot_products(seed: int) -> DotProductExperiment:
    return dot_product_experiment(experiment_dimensions(), EXPERIMENT_SAMPLES, seed)


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner=False)
def dot_products_at(dimension: int, seed: int) -> DotProductExperiment:
    return dot_product_experiment([dimension], EXPERIMENT_SAMPLES, seed)


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner=False)
def row(dimension: int, num_keys: int, seed: int) -> SoftmaxRow:
    return softmax_row(dimension, num_keys, seed)


@st.cache_resource(max_entries=MAX_ENTRIES, show_spinner="Averaging over random rows…")
def entropies(num_keys: int, seed: int) -> EntropyCurve:
    dimensions = experiment_dimensions(13, ENTROPY_LARGEST_DIMENSION)
    return entropy_curve(dimensions, num_keys, ENTROPY_ROWS, seed)


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def sinusoid(num_positions: int, dim: int):
    return sinusoidal_encoding(num_positions, dim)


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def sinusoid_similarity(num_positions: int, dim: int):
    return cosine_similarity(sinusoidal_encoding(num_positions, dim))


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def learned_similarity(name: str, num_positions: int):
    """Cosine similarity of the pretrained model's learned position embeddings (ValueError if none)."""
    return cosine_similarity(learned_positions(cache.pretrained(name).model, num_positions))


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def learned_count(name: str) -> int:
    """How many learned positions the pretrained model has (0 if it has no learned table)."""
    return learned_position_count(cache.pretrained(name).model)


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def rotary(name: str, num_positions: int):
    """The causal decoder's rotary angles (P, Dh/2), or None when it has no rotary module."""
    model = cache.decoder(name).model
    return rotary_angles(model, num_positions) if rotary_module(model) is not None else None

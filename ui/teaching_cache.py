"""Cached results for the teaching pages (masks, scaling, positions), built on ui.cache's models."""

from __future__ import annotations

import streamlit as st

from models.encoder import Encoder
from models.inspect import MaskSteps, mask_steps
from models.masks import PaddedBatch, padded_batch, with_mask_style
from models.positions import (cosine_similarity, learned_position_count, learned_positions,
                              sinusoidal_encoding)
from models.scaling import (DotProductExperiment, EntropyCurve, SoftmaxRow, dot_product_experiment,
                            entropy_curve, experiment_dimensions, softmax_row)
from ui import cache

MAX_ENTRIES = 32
TTL_SECONDS = 3600
EXPERIMENT_SAMPLES = 2000  # pairs per dimension: about 1.7 % standard error on the mean
ENTROPY_ROWS = 200
ENTROPY_LARGEST_DIMENSION = 4096


def _encoder(name: str, seed: int, copied: bool) -> Encoder:
    return cache.copied_encoder(name) if copied else cache.seeded_encoder(name, seed)


def _label(name: str, seed: int, copied: bool, causal: bool) -> str:
    kind = cache.SCRATCH_COPIED if copied else cache.SCRATCH_RANDOM
    return f"{cache.source_label(kind, name, seed)}, {'causal' if causal else 'bidirectional'}"


@st.cache_resource(show_spinner="Building the causal twin (same weights)…")
def causal_twin(name: str, seed: int, copied: bool) -> Encoder:
    """The from-scratch encoder's weights in an encoder whose attention is causal."""
    return with_mask_style(_encoder(name, seed, copied), causal=True)


@st.cache_resource(max_entries=MAX_ENTRIES, ttl=TTL_SECONDS, show_spinner="Running the encoder…")
def steps(name: str, seed: int, copied: bool, causal: bool, text: str, pair: str) -> MaskSteps:
    encoder = causal_twin(name, seed, copied) if causal else _encoder(name, seed, copied)
    return mask_steps(encoder, cache.pretrained(name).tokenizer, text, pair or None,
                      _label(name, seed, copied, causal))


@st.cache_resource(max_entries=MAX_ENTRIES, ttl=TTL_SECONDS, show_spinner="Running the batch…")
def batch(name: str, seed: int, copied: bool, first: str, second: str) -> PaddedBatch:
    return padded_batch(_encoder(name, seed, copied), cache.pretrained(name).tokenizer,
                        (first, second), _label(name, seed, copied, causal=False))


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

"""Cached results for the teaching pages (masks, scaling, positions), built on ui.cache's models.

Results keyed by what a student types or chooses are kept in the byte-bounded store shared with
the other pages (models.store.stores.RESULTS, `models.limits.RESULT_CACHE_BYTES`); the
from-scratch encoders and traces are kept by ui.cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import numpy as np

from models.teaching.masks import PaddedBatch, padded_batch, with_mask_style
from models.teaching.positions import (cosine_similarity, learned_position_count, learned_positions,
                              sinusoidal_encoding)
from models.teaching.scaling import (DotProductExperiment, EntropyCurve, SoftmaxRow, dot_product_experiment,
                            entropy_curve, experiment_dimensions, softmax_row)
from models.teaching.rotary import rotary_angles, rotary_module
from models.loading.kinds import SCRATCH_COPIED, SCRATCH_RANDOM
from models.loading.source import LoadedSource, ModelSource
from models.hooks.trace import Trace
from models.store import stores
from models.store.keys import ResultKey, result_key
from ui import cache
from ui.byte_caches import kept

Value = TypeVar("Value")
EXPERIMENT_SAMPLES = 2000  # pairs per dimension: about 1.7 % standard error on the mean
ENTROPY_ROWS = 200
ENTROPY_LARGEST_DIMENSION = 4096


def scratch_source(name: str, seed: int, copied: bool) -> ModelSource:
    return ModelSource(SCRATCH_COPIED if copied else SCRATCH_RANDOM, name, seed)


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


def _kept(key: ResultKey, compute: Callable[[], Value], message: str | None = None) -> Value:
    return kept(stores.RESULTS, key, compute, message)


def batch(name: str, seed: int, copied: bool, first: str, second: str) -> PaddedBatch:
    def compute() -> PaddedBatch:
        runner = scratch_runner(name, seed, copied, causal=False)
        return padded_batch(runner.model, runner.tokenizer, (first, second), runner.label)

    return _kept(result_key("batch", name, seed, copied, first, second), compute,
                 "Running the batch…")


def dot_products(seed: int) -> DotProductExperiment:
    """One fixed experiment per server (the pages ask for one constant seed each): pinned, as no
    student's choice makes another."""
    return kept(stores.RESULTS, result_key("dot_products", seed),
                lambda: dot_product_experiment(experiment_dimensions(), EXPERIMENT_SAMPLES, seed),
                "Multiplying random vectors (once per server)…", pinned=True)


def dot_products_at(dimension: int, seed: int) -> DotProductExperiment:
    return _kept(result_key("dot_products_at", dimension, seed),
                 lambda: dot_product_experiment([dimension], EXPERIMENT_SAMPLES, seed))


def row(dimension: int, num_keys: int, seed: int) -> SoftmaxRow:
    return _kept(result_key("row", dimension, num_keys, seed),
                 lambda: softmax_row(dimension, num_keys, seed))


def entropies(num_keys: int, seed: int) -> EntropyCurve:
    def compute() -> EntropyCurve:
        dimensions = experiment_dimensions(13, ENTROPY_LARGEST_DIMENSION)
        return entropy_curve(dimensions, num_keys, ENTROPY_ROWS, seed)

    return _kept(result_key("entropies", num_keys, seed), compute, "Averaging over random rows…")


def _read_only(array: np.ndarray) -> np.ndarray:
    """A shared array no caller may change (every session reads the same one)."""
    array = np.asarray(array)
    array.setflags(write=False)
    return array


def sinusoid(num_positions: int, dim: int) -> np.ndarray:
    return _kept(result_key("sinusoid", num_positions, dim),
                 lambda: _read_only(sinusoidal_encoding(num_positions, dim)))


def sinusoid_similarity(num_positions: int, dim: int) -> np.ndarray:
    return _kept(result_key("sinusoid_similarity", num_positions, dim),
                 lambda: _read_only(cosine_similarity(sinusoidal_encoding(num_positions, dim))))


def learned_similarity(name: str, num_positions: int) -> np.ndarray:
    """Cosine similarity of the pretrained model's learned position embeddings (ValueError if none)."""
    return _kept(result_key("learned_similarity", name, num_positions),
                 lambda: _read_only(cosine_similarity(
                     learned_positions(cache.pretrained(name).model, num_positions))))


def learned_count(name: str) -> int:
    """How many learned positions the pretrained model has (0 if it has no learned table)."""
    return _kept(result_key("learned_count", name),
                 lambda: learned_position_count(cache.pretrained(name).model))


def rotary(name: str, num_positions: int) -> np.ndarray | None:
    """The causal decoder's rotary angles (P, Dh/2), or None when it has no rotary module."""
    def compute() -> np.ndarray | None:
        model = cache.decoder(name).model
        if rotary_module(model) is None:
            return None
        return _read_only(rotary_angles(model, num_positions))

    return _kept(result_key("rotary", name, num_positions), compute)

"""Why attention divides its scores by sqrt(d_k): two experiments on random vectors.

1. The mean |q . k| of standard-normal q and k grows like sqrt(d). For large d, q . k is close to
   normal with variance d, whose mean absolute value is sqrt(2d / pi): an approximation that is
   poor for tiny d (at d = 1 the exact value is 2 / pi) and improves as d grows.
2. A softmax over such scores saturates (nearly all weight on one key, entropy near 0) unless the
   scores are divided by sqrt(d_k).

S samples, N keys, d dimensions. Every draw comes from a seeded generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_DIMENSION = 10_000
CHAPTER_DIMENSIONS = (10, 10_000)  # the textbook's own dot-product experiment
# d_k a learner can pick: powers of two (head sizes real models use) and of ten (the chapter's)
DIMENSION_CHOICES = tuple(sorted({2 ** power for power in range(13)}
                                 | {10 ** power for power in range(5)}))
SAMPLE_CHUNK = 100  # rows drawn at once, to bound memory at large d
ENTROPY_CHUNK = 16  # query rows drawn at once (each with N keys)


def experiment_dimensions(count: int = 25, largest: int = MAX_DIMENSION) -> np.ndarray:
    """Dimensions from 1 to `largest`, evenly spaced on a log scale, without repeats."""
    if count < 2 or largest < 2:
        raise ValueError("need at least two dimensions, up to at least 2")
    return np.unique(np.round(np.logspace(0, math.log10(largest), count)).astype(int))


def normal_approximation(dimension: np.ndarray | int) -> np.ndarray:
    """sqrt(2d / pi): the mean |X| of X ~ Normal(0, d)."""
    return np.sqrt(2.0 * np.asarray(dimension, dtype=np.float64) / math.pi)


def mean_abs_dot(dimension: int, samples: int, rng: np.random.Generator) -> float:
    """Mean |q . k| over `samples` pairs of standard-normal vectors of size `dimension`."""
    if dimension < 1 or samples < 1:
        raise ValueError(f"dimension and samples must be positive, got {dimension}, {samples}")
    total = 0.0
    for start in range(0, samples, SAMPLE_CHUNK):
        rows = min(SAMPLE_CHUNK, samples - start)
        query = rng.standard_normal((rows, dimension))  # (S, d)
        key = rng.standard_normal((rows, dimension))  # (S, d)
        total += float(np.abs(np.einsum("sd,sd->s", query, key)).sum())  # (S,) dot products
    return total / samples


@dataclass(frozen=True)
class DotProductExperiment:
    dimensions: np.ndarray  # (n,)
    mean_abs: np.ndarray  # (n,) measured mean |q . k|
    approximation: np.ndarray  # (n,) sqrt(2d / pi)
    samples: int

    @property
    def ratio(self) -> np.ndarray:
        """Measured / approximation: about 0.80 at d = 1, approaching 1 as d grows."""
        return self.mean_abs / self.approximation


def dot_product_experiment(dimensions: np.ndarray, samples: int, seed: int) -> DotProductExperiment:
    rng = np.random.default_rng(seed)
    dimensions = np.asarray(dimensions, dtype=int)
    measured = np.array([mean_abs_dot(int(d), samples, rng) for d in dimensions])
    return DotProductExperiment(dimensions, measured, normal_approximation(dimensions), samples)


def softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum so large scores do not overflow."""
    shifted = scores - scores.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """Entropy over the last axis in bits; 0 log 0 counts as 0. Uniform over N keys = log2(N)."""
    weights = np.asarray(weights, dtype=np.float64)
    logs = np.log2(np.where(weights > 0, weights, 1.0))
    return -(weights * logs).sum(axis=-1)


@dataclass(frozen=True)
class SoftmaxRow:
    """One query's scores against N keys, unscaled and divided by sqrt(d_k), and their softmax."""

    dimension: int
    unscaled_scores: np.ndarray  # (N,) q . k_j
    scaled_scores: np.ndarray  # (N,) q . k_j / sqrt(d_k)
    unscaled_weights: np.ndarray  # (N,)
    scaled_weights: np.ndarray  # (N,)

    @property
    def unscaled_entropy(self) -> float:
        return float(entropy_bits(self.unscaled_weights))

    @property
    def scaled_entropy(self) -> float:
        return float(entropy_bits(self.scaled_weights))

    @property
    def max_entropy(self) -> float:
        return math.log2(len(self.scaled_weights))


def softmax_row(dimension: int, num_keys: int, seed: int) -> SoftmaxRow:
    """Draw one standard-normal query and `num_keys` keys of size `dimension`; score and softmax."""
    if dimension < 1 or num_keys < 2:
        raise ValueError(f"need dimension >= 1 and at least two keys, got {dimension}, {num_keys}")
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(dimension)  # (d,)
    keys = rng.standard_normal((num_keys, dimension))  # (N, d)
    scores = keys @ query  # (N,)
    scaled = scores / math.sqrt(dimension)  # (N,)
    return SoftmaxRow(dimension, scores, scaled, softmax(scores), softmax(scaled))


@dataclass(frozen=True)
class EntropyCurve:
    dimensions: np.ndarray  # (n,)
    unscaled: np.ndarray  # (n,) mean entropy in bits, unscaled scores
    scaled: np.ndarray  # (n,) mean entropy in bits, scores / sqrt(d)
    num_keys: int


def _mean_entropies(dimension: int, num_keys: int, rows: int,
                    rng: np.random.Generator) -> tuple[float, float]:
    unscaled = scaled = 0.0
    for start in range(0, rows, ENTROPY_CHUNK):
        count = min(ENTROPY_CHUNK, rows - start)
        query = rng.standard_normal((count, dimension))  # (S, d)
        keys = rng.standard_normal((count, num_keys, dimension))  # (S, N, d)
        scores = np.einsum("snd,sd->sn", keys, query)  # (S, N)
        unscaled += float(entropy_bits(softmax(scores)).sum())
        scaled += float(entropy_bits(softmax(scores / math.sqrt(dimension))).sum())
    return unscaled / rows, scaled / rows


def entropy_curve(dimensions: np.ndarray, num_keys: int, rows: int, seed: int) -> EntropyCurve:
    """Mean softmax entropy over `rows` random queries, each against `num_keys` random keys."""
    if num_keys < 2 or rows < 1:
        raise ValueError(f"need at least two keys and one row, got {num_keys}, {rows}")
    rng = np.random.default_rng(seed)
    dimensions = np.asarray(dimensions, dtype=int)
    means = np.array([_mean_entropies(int(d), num_keys, rows, rng) for d in dimensions])  # (n, 2)
    return EntropyCurve(dimensions, means[:, 0], means[:, 1], num_keys)

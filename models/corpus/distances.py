"""How alike two heads attend, over a corpus (after Clark et al. 2019, section 6).

For one passage, the distance between heads a and b (any layers) is the mean, over some of its
query rows, of the Jensen–Shannon distance between a's and b's attention rows for that query:
sqrt(JSD) with JSD = H((p + q) / 2) - (H(p) + H(q)) / 2 in bits, so it lies in [0, 1], is 0 for
heads that attend identically and 1 for heads that never look at the same key. The corpus
distance is its mean over the passages compared. Each passage keeps DISTANCE_ROWS query rows
(evenly spaced over its tokens) of every head until its last layer is in; the heads are then
compared pairwise. Which passages are compared is decided per passage (models.corpus.sampling),
so a corpus of any size costs at most about CORPUS_DISTANCE_PASSAGES passages' comparisons.

Dimensions: B batch, L layers, H heads, N = L x H every head, R rows kept, Q/K positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.analysis.reducer import Reducer
from models.analysis.token_batch import TokenBatch
from models.limits import CORPUS_DISTANCE_CHUNK_BYTES

DISTANCE_ROWS = 8  # query rows of a passage compared across heads
_TINY = torch.finfo(torch.float32).tiny


@dataclass(frozen=True)
class DistanceSum:
    """The sum over `passages` compared passages of each (N, N) head-to-head distance."""

    total: np.ndarray  # (N, N) float64
    passages: int

    def __add__(self, other: DistanceSum) -> DistanceSum:
        return DistanceSum(self.total + other.total, self.passages + other.passages)

    def mean(self) -> np.ndarray:
        """(N, N) the mean distance (NaN when no passage was compared)."""
        if self.passages == 0:
            return np.full_like(self.total, np.nan)
        return self.total / self.passages


def spaced_rows(count: int, rows: int = DISTANCE_ROWS) -> np.ndarray:
    """(R,) up to `rows` query positions evenly spaced over 0..count-1 (every one when fewer)."""
    return np.unique(np.linspace(0, count - 1, min(rows, count)).round().astype(np.int64))


def passage_distances(rows: np.ndarray) -> np.ndarray:
    """(N, N) float64: the mean over R rows of the Jensen–Shannon distance between every two of
    N heads' rows, from (N, R, K) float32 rows that sum to 1. The distance is symmetric: each
    slice of heads is mixed with itself and the heads after it only (the upper triangle), each
    slice's mixtures within CORPUS_DISTANCE_CHUNK_BYTES (small enough to stay in the processor's
    cache while their entropies are taken, in memory reused slice after slice), and the lower
    triangle is its mirror.

    Every weight is lifted by twice the smallest normal float (a weight of 1e-30 or more is
    unchanged; a zero's term, and the change, are below 1e-36), so no logarithm is of zero and
    no clamp is needed; the mixture (p + q) / 2 is the sum of the halved rows (halving is
    exact), and two heads that attend identically mix to their own rows exactly: distance 0."""
    weights = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))  # (N, R, K)
    lifted = weights + 2 * _TINY  # (N, R, K)
    half = lifted * 0.5  # (N, R, K)
    count, size = lifted.size(0), lifted[0].numel()
    own = _weighted_logs(lifted, torch.log(lifted))  # (N, R) sum w ln w
    step = max(1, CORPUS_DISTANCE_CHUNK_BYTES // max(1, lifted.numel() * lifted.element_size()))
    mixed_memory = torch.empty(min(step, count) * count * size)  # one slice's mixtures
    log_memory = torch.empty_like(mixed_memory)  # ... and their logarithms
    mixed_terms = torch.zeros(count, count, lifted.size(1))  # (N, N, R) upper triangle
    for start in range(0, count, step):
        end = min(start + step, count)
        shape = (end - start, count - start, *lifted.shape[1:])  # (c, N - start, R, K)
        used = shape[0] * shape[1] * size
        mixed = torch.add(half[start:end, None], half[None, start:],
                          out=mixed_memory[:used].view(shape))
        mixed_terms[start:end, start:] = _weighted_logs(
            mixed, torch.log(mixed, out=log_memory[:used].view(shape)))
    divergence = (0.5 * (own[:, None] + own[None]) - mixed_terms) / np.log(2.0)  # (N, N, R) bits
    distances = divergence.clamp(0.0, 1.0).sqrt().double().mean(-1).numpy()  # (N, N)
    upper = np.triu(distances, 1)  # a head against itself: 0, not float32's rounding
    return upper + upper.T


def _weighted_logs(weights: torch.Tensor, logs: torch.Tensor) -> torch.Tensor:
    """(...,) sum_k w ln w over the last axis, from the weights and their logarithms (`logs` is
    overwritten)."""
    return logs.mul_(weights).sum(-1)


class HeadDistances(Reducer):
    """Head-to-head Jensen–Shannon distances of the batch's passages marked in `chosen` (B,);
    `result()` is their DistanceSum. Square maps only."""

    def __init__(self, chosen: np.ndarray):
        self.chosen = np.asarray(chosen, dtype=bool)
        self._rows: dict[int, list[np.ndarray]] = {int(b): [] for b in np.flatnonzero(chosen)}
        self._spaced: dict[int, np.ndarray] = {}  # each passage's rows, from its first layer
        self._heads = 0  # L x H, counted as the layers come

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        tokens.check(maps)
        if tokens.rectangular:
            raise ValueError("head distances need square maps (self-attention)")
        if len(self.chosen) != tokens.batch_size:
            raise ValueError(f"{len(self.chosen)} passages chosen for a batch of "
                             f"{tokens.batch_size}")
        self._heads = (layer + 1) * maps.shape[1]
        for index, kept in self._rows.items():
            if len(kept) != layer:
                raise ValueError(f"layer {layer} after {len(kept)} layers: a batch's layers are "
                                 "added in order, from layer 0")
            item = tokens.cut(maps, index)  # (H, Q, K)
            if index not in self._spaced:
                self._spaced[index] = spaced_rows(item.shape[1])  # (R,)
            kept.append(item[:, self._spaced[index]].copy())  # (H, R, K)

    def result(self) -> DistanceSum:
        total = np.zeros((self._heads, self._heads))
        for kept in self._rows.values():
            total += passage_distances(np.concatenate(kept))  # rows (L*H, R, K), layer by layer
        return DistanceSum(total, len(self._rows))

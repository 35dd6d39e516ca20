"""Which passages and tokens a corpus job samples, decided per passage so that any batching, any
engine and any resume sample the same ones.

Each passage draws from its own random generator, seeded by the job's seed and the passage's
number: first whether its heads are compared (models.corpus.distances), then, token by token,
whether its queries and keys go into the embedding (models.corpus.embedding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.corpus.plan import ModelShape, Plan
from models.limits import CORPUS_DISTANCE_PASSAGES, CORPUS_EMBEDDING_BYTES

HALF_BYTES = 2  # a sampled vector is kept as float16


@dataclass(frozen=True)
class Sampling:
    """The share of passages compared head to head, the share of tokens embedded, the seed."""

    distance_share: float
    embedding_share: float
    seed: int = 0

    def draws(self, passage: int, tokens: int) -> tuple[bool, np.ndarray]:
        """Whether passage `passage` is compared, and (P,) its embedded token positions."""
        generator = np.random.default_rng([self.seed, passage])
        compared = bool(generator.random() < self.distance_share)
        positions = np.flatnonzero(generator.random(tokens) < self.embedding_share)
        return compared, positions


def token_bytes(shape: ModelShape) -> int:
    """Bytes one embedded token keeps: its query in every head and its key in every key head."""
    return shape.layers * (shape.heads + shape.kv_heads) * shape.head_width * HALF_BYTES


def embedding_tokens(shape: ModelShape) -> int:
    """How many tokens the embedding keeps at most (CORPUS_EMBEDDING_BYTES of vectors)."""
    return max(1, CORPUS_EMBEDDING_BYTES // token_bytes(shape))


def sampling_for(plan: Plan, seed: int = 0) -> Sampling:
    """About CORPUS_DISTANCE_PASSAGES passages compared and embedding_tokens() tokens embedded."""
    return Sampling(distance_share=min(1.0, CORPUS_DISTANCE_PASSAGES / plan.passages),
                    embedding_share=min(1.0, embedding_tokens(plan.shape) / plan.tokens),
                    seed=seed)

"""The queries and keys of sampled tokens, for a joint query-key embedding of each head
(AttentionViz, Yeh et al. 2023).

For each sampled token (models.corpus.sampling) the job keeps its query vector in every head and
its key vector in every key/value head, every layer, as float16. A head's queries and keys are
read back together and laid out in 2-D by models.corpus.layout.

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Dh head width,
S sampled tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class EmbeddingPoints:
    """S sampled tokens: which passage, which position, which token, and their vectors."""

    passage: np.ndarray  # (S,) int64
    position: np.ndarray  # (S,) int32
    token: tuple[str, ...]  # S tokens
    queries: np.ndarray  # (S, L, H, Dh) float16
    keys: np.ndarray  # (S, L, Hkv, Dh) float16

    @property
    def count(self) -> int:
        return len(self.passage)

    @classmethod
    def concatenate(cls, parts: list[EmbeddingPoints]) -> EmbeddingPoints:
        return cls(passage=np.concatenate([p.passage for p in parts]),
                   position=np.concatenate([p.position for p in parts]),
                   token=tuple(t for p in parts for t in p.token),
                   queries=np.concatenate([p.queries for p in parts]),
                   keys=np.concatenate([p.keys for p in parts]))


class EmbeddingSampler:
    """Collects, layer by layer, the query and key vectors of each passage's sampled positions.

    positions: per passage of the batch, (P_b,) its sampled token positions."""

    def __init__(self, positions: list[np.ndarray]):
        self.positions = [np.asarray(p, dtype=np.int64) for p in positions]
        self._items = torch.tensor(np.concatenate(
            [np.full(len(p), b) for b, p in enumerate(self.positions)] or [np.zeros(0)]),
            dtype=torch.long)  # (S,) which batch item
        self._tokens = torch.from_numpy(np.concatenate(self.positions or [np.zeros(0, int)]))
        self._queries: list[np.ndarray] = []
        self._keys: list[np.ndarray] = []

    def add(self, layer: int, query: torch.Tensor, key: torch.Tensor) -> None:
        """query (B, H, T, Dh), key (B, Hkv, T, Dh) of layer `layer` (layers in order)."""
        if layer != len(self._queries):
            raise ValueError(f"layer {layer} after {len(self._queries)} layers: layers are "
                             "added in order, from layer 0")
        self._queries.append(self._sampled(query))
        self._keys.append(self._sampled(key))

    def _sampled(self, vectors: torch.Tensor) -> np.ndarray:
        """(S, H, Dh) float16 the sampled tokens' vectors of (B, H, T, Dh) `vectors`: rows of
        its (B x T, H, Dh) token-major view (the projection's own layout: no copy), gathered."""
        batch, heads, tokens, width = vectors.shape
        rows = vectors.transpose(1, 2).reshape(batch * tokens, heads, width)  # (B*T, H, Dh)
        return rows.index_select(0, self._rows(tokens)).to(torch.float16).numpy()

    def _rows(self, tokens: int) -> torch.Tensor:
        """(S,) each sampled token's row in a (B x T) token-major view."""
        return self._items * tokens + self._tokens

    def result(self, passages: np.ndarray, tokens: list[tuple[str, ...]]) -> EmbeddingPoints:
        """The sampled points of the batch whose passages are numbered `passages` (B,) with
        these tokens."""
        items = self._items.numpy()
        positions = self._tokens.numpy()
        return EmbeddingPoints(
            passage=np.asarray(passages, dtype=np.int64)[items],
            position=positions.astype(np.int32),
            token=tuple(tokens[b][t] for b, t in zip(items, positions)),
            queries=np.stack(self._queries, axis=1),  # (S, L, H, Dh)
            keys=np.stack(self._keys, axis=1))  # (S, L, Hkv, Dh)

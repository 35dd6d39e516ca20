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
    """Collects, layer by layer, the query and key vectors of each passage's sampled positions,
    each layer's written straight into the batch's (S, L, H, Dh) float16 arrays (no per-layer
    copies stacked at the end).

    positions: per passage of the batch, (P_b,) its sampled token positions; layers: L."""

    def __init__(self, positions: list[np.ndarray], layers: int):
        self.positions = [np.asarray(p, dtype=np.int64) for p in positions]
        self.layers = layers
        self._items = torch.tensor(np.concatenate(
            [np.full(len(p), b) for b, p in enumerate(self.positions)] or [np.zeros(0)]),
            dtype=torch.long)  # (S,) which batch item
        self._tokens = torch.from_numpy(np.concatenate(self.positions or [np.zeros(0, int)]))
        self._queries: np.ndarray | None = None  # (S, L, H, Dh) float16, from layer 0
        self._keys: np.ndarray | None = None  # (S, L, Hkv, Dh)
        self._added = 0
        self._gathered: dict[int, torch.Tensor] = {}  # gathered rows, by row width

    def add(self, layer: int, query: torch.Tensor, key: torch.Tensor) -> None:
        """query (B, H, T, Dh), key (B, Hkv, T, Dh) of layer `layer` (layers in order)."""
        if layer != self._added or layer >= self.layers:
            raise ValueError(f"layer {layer} after {self._added} of {self.layers} layers: "
                             "layers are added in order, from layer 0")
        if self._queries is None:
            count = len(self._tokens)
            self._queries = np.empty((count, self.layers, *query.shape[1:2], query.size(-1)),
                                     dtype=np.float16)
            self._keys = np.empty((count, self.layers, *key.shape[1:2], key.size(-1)),
                                  dtype=np.float16)
        self._put(self._queries, layer, query)
        self._put(self._keys, layer, key)
        self._added += 1

    def _put(self, target: np.ndarray, layer: int, vectors: torch.Tensor) -> None:
        """target[:, layer] = the sampled tokens' (S, H, Dh) vectors of (B, H, T, Dh) `vectors`
        as float16: rows of its (B x T, H*Dh) token-major view (the projection's own layout: no
        copy), gathered into memory reused every layer, then converted while written."""
        batch, heads, tokens, width = vectors.shape
        rows = vectors.transpose(1, 2).reshape(batch * tokens, heads * width)  # (B*T, H*Dh)
        gathered = self._gathered.get(heads * width)  # (S, H*Dh) float32, reused every layer
        if gathered is None or gathered.dtype != rows.dtype:
            gathered = self._gathered[heads * width] = torch.empty(len(self._tokens),
                                                                   heads * width,
                                                                   dtype=rows.dtype)
        torch.index_select(rows, 0, self._rows(tokens), out=gathered)
        torch.from_numpy(target)[:, layer].view(len(gathered), heads * width).copy_(gathered)

    def _rows(self, tokens: int) -> torch.Tensor:
        """(S,) each sampled token's row in a (B x T) token-major view."""
        return self._items * tokens + self._tokens

    def result(self, passages: np.ndarray, tokens: list[tuple[str, ...]]) -> EmbeddingPoints:
        """The sampled points of the batch whose passages are numbered `passages` (B,) with
        these tokens (every layer added)."""
        if self._added != self.layers:
            raise ValueError(f"{self._added} of {self.layers} layers added")
        items = self._items.numpy()
        positions = self._tokens.numpy()
        return EmbeddingPoints(
            passage=np.asarray(passages, dtype=np.int64)[items],
            position=positions.astype(np.int32),
            token=tuple(tokens[b][t] for b, t in zip(items, positions)),
            queries=self._queries,  # (S, L, H, Dh)
            keys=self._keys)  # (S, L, Hkv, Dh)

"""The one record that carries attention from a model to the viewers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ROW_SUM_TOLERANCE = 1e-3
KNOWN_MASKS = ("padding", "causal", "span", "hidden-specials")


@dataclass(frozen=True)
class AttentionRecord:
    """Tokens and every layer's and head's attention weights for one input.

    weights: float32 array (L, H, Q, K); rows are queries, columns keys.
    tokens: as the tokenizer writes them, special tokens included (len == Q; == K as well
        unless key_tokens are given).
    segment_ids: 0 for the first sentence, 1 for the second of a pair (len == Q).
    source: which model produced it (a readable name).
    masks: which masks were applied ("causal", "padding", "span", or "hidden-specials" when
        special tokens were removed from view). A row that some mask
        empties entirely may sum to 0; every other row sums to 1.
    special_positions: indices of the tokenizer's special tokens ([CLS], [SEP], ...).
    dropped_tokens: how many tokens truncation removed to fit the model.
    key_tokens: the keys' tokens when they are not the queries' (len == K), as in
        cross-attention, where a decoder's target tokens read an encoder's source tokens.
        Empty (the default) means the keys are `tokens` and every map is square.
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    source: str
    masks: tuple[str, ...] = ()
    segment_ids: tuple[int, ...] = field(default=())
    special_positions: tuple[int, ...] = ()
    dropped_tokens: int = 0
    key_tokens: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, dtype=np.float32)
        if weights.ndim != 4:
            raise ValueError(f"attention weights must be 4-D (layers, heads, query, key), got {weights.shape}")
        layers, heads, queries, keys = weights.shape
        if self.key_tokens:
            if min(layers, heads, queries, keys) < 1:
                raise ValueError(f"attention weights need non-empty maps, got {weights.shape}")
            if len(self.key_tokens) != keys:
                raise ValueError(f"{len(self.key_tokens)} key tokens for attention over {keys} keys")
        elif min(layers, heads, queries) < 1 or queries != keys:
            raise ValueError(f"attention weights need square, non-empty maps, got {weights.shape}")
        if len(self.tokens) != queries:
            raise ValueError(f"{len(self.tokens)} tokens for attention over {queries} positions")
        unknown = set(self.masks) - set(KNOWN_MASKS)
        if unknown:
            raise ValueError(f"unknown masks {sorted(unknown)}; known: {KNOWN_MASKS}")
        sums = weights.sum(axis=-1)  # (L, H, Q); a NaN or infinity anywhere makes its row's sum so
        if not np.all(np.isfinite(sums)):
            raise ValueError("attention weights contain NaN or infinity")
        if weights.min() < 0:
            raise ValueError("attention weights must be non-negative")
        bad = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
        if self.masks:
            bad &= np.abs(sums) > ROW_SUM_TOLERANCE  # a mask may empty a row
        if bad.any():
            layer, head, query = np.argwhere(bad)[0]
            raise ValueError(
                f"attention row (layer {layer}, head {head}, query {query}) sums to "
                f"{sums[layer, head, query]:.4f}, not 1"
            )
        segment_ids = tuple(int(s) for s in self.segment_ids) or (0,) * queries
        if len(segment_ids) != queries:
            raise ValueError(f"{len(segment_ids)} segment ids for {queries} tokens")
        if any(not 0 <= p < queries for p in self.special_positions):
            raise ValueError("special token positions out of range")
        weights.setflags(write=False)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "tokens", tuple(str(t) for t in self.tokens))
        object.__setattr__(self, "key_tokens", tuple(str(t) for t in self.key_tokens))
        object.__setattr__(self, "segment_ids", segment_ids)
        object.__setattr__(self, "masks", tuple(self.masks))
        object.__setattr__(self, "special_positions", tuple(int(p) for p in self.special_positions))

    @property
    def num_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def num_heads(self) -> int:
        return self.weights.shape[1]

    @property
    def num_tokens(self) -> int:
        return self.weights.shape[2]

    @property
    def num_keys(self) -> int:
        return self.weights.shape[3]

    @property
    def keys(self) -> tuple[str, ...]:
        """The key tokens (the columns): `key_tokens`, or `tokens` for a square map."""
        return self.key_tokens or self.tokens

    @property
    def is_rectangular(self) -> bool:
        """True when queries and keys are different sequences (e.g. cross-attention)."""
        return bool(self.key_tokens)

    @property
    def is_pair(self) -> bool:
        return any(self.segment_ids)

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's (Q, K) map."""
        return self.weights[layer, head]

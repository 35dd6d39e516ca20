"""The one record that carries attention from a model to the viewers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch

ROW_SUM_TOLERANCE = 1e-3
# "window": the maps are a window of a longer input's (queries and keys cut to a range), so a
# row holds only the weights to the keys inside the window and may sum to less than 1.
KNOWN_MASKS = ("padding", "causal", "span", "hidden-specials", "window")


@dataclass(frozen=True, init=False, eq=False)
class AttentionRecord:
    """Tokens and every layer's and head's attention weights for one input.

    layers: one float32 array (H, Q, K) per layer, rows are queries, columns keys; a captured
        forward's maps are kept as the model produced them, with no copy. `weights` is the
        (L, H, Q, K) stack, built the first time a view asks for every layer at once.
    tokens: as the tokenizer writes them, special tokens included (len == Q; == K as well
        unless key_tokens are given).
    segment_ids: 0 for the first sentence, 1 for the second of a pair (len == Q).
    source: which model produced it (a readable name).
    masks: which masks were applied ("causal", "padding", "span", "window", or
        "hidden-specials" when special tokens were removed from view). A row that some mask
        empties entirely may sum to 0; every other row sums to 1 (at most 1 in a "window").
    special_positions: indices of the tokenizer's special tokens ([CLS], [SEP], ...).
    dropped_tokens: how many tokens truncation removed to fit the model.
    key_tokens: the keys' tokens when they are not the queries' (len == K), as in
        cross-attention, where a decoder's target tokens read an encoder's source tokens.
        Empty (the default) means the keys are `tokens` and every map is square.

    Build it from `weights` (one (L, H, Q, K) array) or from `layers`; given both (as
    `dataclasses.replace(record, weights=...)` does), `weights` wins.
    """

    tokens: tuple[str, ...]
    layers: tuple[np.ndarray, ...]
    source: str
    masks: tuple[str, ...] = ()
    segment_ids: tuple[int, ...] = field(default=())
    special_positions: tuple[int, ...] = ()
    dropped_tokens: int = 0
    key_tokens: tuple[str, ...] = ()

    def __init__(self, tokens, weights=None, source: str = "", masks=(), segment_ids=(),
                 special_positions=(), dropped_tokens: int = 0, key_tokens=(), *, layers=None):
        if weights is not None:
            stacked = np.asarray(weights, dtype=np.float32)
            if stacked.ndim != 4:
                raise ValueError(f"attention weights must be 4-D (layers, heads, query, key), "
                                 f"got {stacked.shape}")
            object.__setattr__(self, "_stacked", stacked)
            layers = tuple(stacked)  # views
        elif layers is None:
            raise ValueError("an attention record needs its weights")
        else:
            layers = tuple(np.asarray(layer, dtype=np.float32) for layer in layers)
        for name, value in (("tokens", tokens), ("layers", layers), ("source", source),
                            ("masks", masks), ("segment_ids", segment_ids),
                            ("special_positions", special_positions),
                            ("dropped_tokens", dropped_tokens), ("key_tokens", key_tokens)):
            object.__setattr__(self, name, value)
        self._validate()
        if weights is not None:
            self._stacked.setflags(write=False)

    def _validate(self) -> None:
        if not self.layers:
            raise ValueError("attention weights need at least one layer")
        shape = self.layers[0].shape
        if len(shape) != 3 or any(layer.shape != shape for layer in self.layers):
            raise ValueError(f"attention weights must be 4-D (layers, heads, query, key), got "
                             f"layers shaped {sorted({layer.shape for layer in self.layers})}")
        layers, (heads, queries, keys) = len(self.layers), shape
        if self.key_tokens:
            if min(layers, heads, queries, keys) < 1:
                raise ValueError(f"attention weights need non-empty maps, got {(layers, *shape)}")
            if len(self.key_tokens) != keys:
                raise ValueError(f"{len(self.key_tokens)} key tokens for attention over {keys} keys")
        elif min(layers, heads, queries) < 1 or queries != keys:
            raise ValueError(f"attention weights need square, non-empty maps, got {(layers, *shape)}")
        if len(self.tokens) != queries:
            raise ValueError(f"{len(self.tokens)} tokens for attention over {queries} positions")
        unknown = set(self.masks) - set(KNOWN_MASKS)
        if unknown:
            raise ValueError(f"unknown masks {sorted(unknown)}; known: {KNOWN_MASKS}")
        for index, layer in enumerate(self.layers):
            _check_layer(index, layer, bool(self.masks), "window" in self.masks)
            layer.setflags(write=False)
        segment_ids = tuple(int(s) for s in self.segment_ids) or (0,) * queries
        if len(segment_ids) != queries:
            raise ValueError(f"{len(segment_ids)} segment ids for {queries} tokens")
        if any(not 0 <= p < queries for p in self.special_positions):
            raise ValueError("special token positions out of range")
        object.__setattr__(self, "tokens", tuple(str(t) for t in self.tokens))
        object.__setattr__(self, "key_tokens", tuple(str(t) for t in self.key_tokens))
        object.__setattr__(self, "segment_ids", segment_ids)
        object.__setattr__(self, "masks", tuple(self.masks))
        object.__setattr__(self, "special_positions", tuple(int(p) for p in self.special_positions))

    @property
    def weights(self) -> np.ndarray:
        """(L, H, Q, K) every layer's maps in one read-only array. Built once, on first use; the
        layers then become views of it, so the record holds the same bytes as before."""
        stacked = self.__dict__.get("_stacked")
        if stacked is None:
            with _STACKING:
                stacked = self.__dict__.get("_stacked")
                if stacked is None:
                    stacked = np.empty((len(self.layers), *self.layers[0].shape), np.float32)
                    for index, layer in enumerate(self.layers):
                        stacked[index] = layer
                    stacked.setflags(write=False)
                    object.__setattr__(self, "layers", tuple(stacked))
                    object.__setattr__(self, "_stacked", stacked)
        return stacked

    @property
    def nbytes(self) -> int:
        """The bytes of the weights the record holds."""
        return sum(layer.nbytes for layer in self.layers)

    def layer(self, layer: int) -> np.ndarray:
        """One layer's (H, Q, K) maps (no stacking)."""
        return self.layers[layer]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_heads(self) -> int:
        return self.layers[0].shape[0]

    @property
    def num_tokens(self) -> int:
        return self.layers[0].shape[1]

    @property
    def num_keys(self) -> int:
        return self.layers[0].shape[2]

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
        return self.layers[layer][head]


_STACKING = threading.Lock()


def _check_layer(index: int, weights: np.ndarray, masked: bool, window: bool = False) -> None:
    """Every row of one layer's (H, Q, K) maps is finite, non-negative and sums to 1 (or to 0
    where a mask emptied it; at most 1 in a window of a longer input)."""
    sums, smallest = _row_sums_and_min(weights)  # (H, Q); NaN or infinity makes a sum so
    if not np.all(np.isfinite(sums)):
        raise ValueError("attention weights contain NaN or infinity")
    if smallest < 0:
        raise ValueError("attention weights must be non-negative")
    bad = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
    if masked:
        bad &= np.abs(sums) > ROW_SUM_TOLERANCE  # a mask may empty a row
    if window:
        bad = sums > 1.0 + ROW_SUM_TOLERANCE
    if bad.any():
        head, query = np.argwhere(bad)[0]
        raise ValueError(f"attention row (layer {index}, head {head}, query {query}) sums to "
                         f"{sums[head, query]:.4f}, not 1")


def _row_sums_and_min(weights: np.ndarray) -> tuple[np.ndarray, float]:
    """Every row's sum and the smallest weight; torch's reductions (which use every core) read
    a fresh contiguous array in place, anything else is reduced by numpy."""
    if weights.flags.writeable and weights.flags.c_contiguous:
        shared = torch.from_numpy(weights)  # the same memory
        return shared.sum(dim=-1).numpy(), float(shared.min())
    return weights.sum(axis=-1), float(weights.min())

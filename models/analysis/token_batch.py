"""What a reducer knows about the tokens of a batch besides their maps.

A batch holds B inputs padded on the right to one length T: item b's real tokens are positions
0 .. n_b - 1. Per position it says whether the token is real, one of the tokenizer's special
tokens ([CLS], [SEP], <s>), made only of punctuation, and which tokens are equal (for the
duplicate-token and induction detectors). A cross-attention map (target queries over source
keys) describes its keys here and its queries by `query_real` alone.

Dimensions: B batch, T tokens (the keys, and the queries unless `query_real` is given), Q queries.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from models.hooks.record import AttentionRecord
from models.loading.tokenize import EncodedText

WORDPIECE_CONTINUATION = "##"
WORD_START_MARKERS = ("Ġ", "▁")  # byte-level BPE, SentencePiece
PADDING_CODE = -1  # the token code of a padded position


@lru_cache(maxsize=1 << 16)
def is_punctuation(token: str) -> bool:
    """True for tokens made only of Unicode punctuation once word-piece markers are removed
    (remembered per token: a corpus asks about the same few thousand tokens again and again)."""
    text = token.removeprefix(WORDPIECE_CONTINUATION).lstrip("".join(WORD_START_MARKERS))
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


@dataclass(frozen=True)
class ItemTokens:
    """One input of a batch, cut to its real tokens: `queries` x `keys` maps, and per key
    whether it is special or punctuation and its token code."""

    queries: int
    keys: int
    special: np.ndarray  # (K,) bool
    punctuation: np.ndarray  # (K,) bool
    codes: np.ndarray  # (K,) int64
    causal: bool
    rectangular: bool

    @property
    def special_positions(self) -> np.ndarray:
        """(S,) the special keys' positions, in order."""
        return np.flatnonzero(self.special)

    @cached_property
    def key_sets(self) -> np.ndarray:
        """(K, 3) float32 indicators of the [CLS] (first special), [SEP] (other special) and
        punctuation (not special) keys (computed once, read-only). A rectangular map's keys are
        never special."""
        special = [] if self.rectangular else self.special_positions.tolist()
        sets = np.zeros((self.keys, 3), dtype=np.float32)  # (K, 3)
        sets[special[:1], 0] = 1.0
        sets[special[1:], 1] = 1.0
        sets[:, 2] = self.punctuation
        sets[special, 2] = 0.0
        return _read_only((sets,))[0]

    @cached_property
    def equal_token_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """`equal_token_pairs` of this input's keys (computed once, read-only)."""
        return _read_only(equal_token_pairs(self.codes, self.special))

    @cached_property
    def pairs_by_query(self) -> tuple[np.ndarray, np.ndarray]:
        """The same pairs ordered by query (each query's keys in the order above)."""
        queries, keys = self.equal_token_pairs
        order = np.argsort(queries, kind="stable")
        return _read_only((queries[order], keys[order]))


@dataclass(frozen=True)
class TokenBatch:
    """The tokens of a batch of B inputs padded on the right to T positions.

    real: (B, T) bool, True = a real token, False = padding (only after every real token).
    special: (B, T) bool, the tokenizer's special tokens.
    punctuation: (B, T) bool, tokens made only of punctuation (`is_punctuation`).
    codes: (B, T) int64, equal codes = equal tokens within an input (PADDING_CODE on padding).
    causal: every query sees only itself and earlier keys.
    query_real: (B, Q) bool when the queries are another sequence than the keys
        (cross-attention): which queries are real; None when the keys are the queries.
    """

    real: np.ndarray
    special: np.ndarray
    punctuation: np.ndarray
    codes: np.ndarray
    causal: bool = False
    query_real: np.ndarray | None = None

    def __post_init__(self):
        real = np.asarray(self.real, dtype=bool)
        if real.ndim != 2 or real.shape[0] < 1:
            raise ValueError(f"a token batch needs (batch, tokens) flags, got {real.shape}")
        for name, dtype in (("special", bool), ("punctuation", bool), ("codes", np.int64)):
            value = np.asarray(getattr(self, name), dtype=dtype)
            if value.shape != real.shape:
                raise ValueError(f"{name} is shaped {value.shape}, the batch {real.shape}")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "real", real)
        _check_right_padding(real, "token")
        if (self.special & ~real).any():
            raise ValueError("a padded position cannot be a special token")
        if self.query_real is not None:
            query_real = np.asarray(self.query_real, dtype=bool)
            if query_real.ndim != 2 or query_real.shape[0] != real.shape[0]:
                raise ValueError(f"query flags {query_real.shape} for a batch of {real.shape[0]}")
            _check_right_padding(query_real, "query")
            object.__setattr__(self, "query_real", query_real)

    @property
    def batch_size(self) -> int:
        return self.real.shape[0]

    @property
    def rectangular(self) -> bool:
        """True when queries and keys are different sequences (cross-attention)."""
        return self.query_real is not None

    @property
    def lengths(self) -> np.ndarray:
        """(B,) each input's real keys."""
        return self.real.sum(axis=1)

    @property
    def query_lengths(self) -> np.ndarray:
        """(B,) each input's real queries."""
        return (self.real if self.query_real is None else self.query_real).sum(axis=1)

    def item(self, index: int) -> ItemTokens:
        """Input `index` cut to its real tokens (the same object every time it is asked, so
        what it computes of its tokens is computed once for every layer)."""
        return self._items[index]

    @cached_property
    def _items(self) -> tuple[ItemTokens, ...]:
        queries, lengths = self.query_lengths, self.lengths
        return tuple(ItemTokens(
            queries=int(queries[index]), keys=int(lengths[index]),
            special=self.special[index, :lengths[index]],
            punctuation=self.punctuation[index, :lengths[index]],
            codes=self.codes[index, :lengths[index]], causal=self.causal,
            rectangular=self.rectangular) for index in range(self.batch_size))

    def check(self, maps: np.ndarray) -> None:
        """Raise ValueError unless `maps` is (B, H, Q, K) for this batch."""
        queries = self.real.shape[1] if self.query_real is None else self.query_real.shape[1]
        if maps.ndim != 4 or maps.shape[0] != self.batch_size or \
                maps.shape[2:] != (queries, self.real.shape[1]):
            raise ValueError(f"maps shaped {maps.shape} for a batch of {self.batch_size} inputs "
                             f"of {queries} queries x {self.real.shape[1]} keys")

    def cut(self, maps: np.ndarray, index: int) -> np.ndarray:
        """(H, Q, K) input `index`'s maps over its real queries and keys (a view)."""
        return maps[index, :, :int(self.query_lengths[index]), :int(self.lengths[index])]

    @classmethod
    def of_tokens(cls, tokens: Sequence[str], special_positions: Sequence[int] = (),
                  causal: bool = False) -> TokenBatch:
        """A batch of one input from its tokens and its special tokens' positions."""
        special = np.zeros((1, len(tokens)), dtype=bool)
        special[0, list(special_positions)] = True
        return cls(real=np.ones((1, len(tokens)), dtype=bool), special=special,
                   punctuation=[[is_punctuation(str(t)) for t in tokens]],
                   codes=[token_codes(tokens)], causal=causal)

    @classmethod
    def of_encoded(cls, encoded: EncodedText, causal: bool) -> TokenBatch:
        """A batch of one tokenized text (its own tokens and special tokens)."""
        return cls.of_tokens(encoded.tokens, encoded.special_positions, causal)

    @classmethod
    def of_record(cls, record: AttentionRecord) -> TokenBatch:
        """A batch of one record: its own tokens and special positions (a token-option view's
        merged words or hidden specials included), causal when its masks say so. A rectangular
        record's keys are its key tokens, none of them special."""
        causal = "causal" in record.masks
        if not record.is_rectangular:
            return cls.of_tokens(record.tokens, record.special_positions, causal)
        keys = cls.of_tokens(record.keys, (), causal)
        return cls(real=keys.real, special=keys.special, punctuation=keys.punctuation,
                   codes=keys.codes, causal=causal,
                   query_real=np.ones((1, record.num_tokens), dtype=bool))

    @classmethod
    def padded(cls, batches: Sequence[TokenBatch]) -> TokenBatch:
        """The inputs of several batches as one, each padded on the right to the longest."""
        if not batches or len({b.causal for b in batches}) != 1 or \
                len({b.rectangular for b in batches}) != 1:
            raise ValueError("padding needs at least one batch, all causal or all not, all "
                             "square or all cross-attention")
        width = max(b.real.shape[1] for b in batches)

        def stacked(name: str, fill) -> np.ndarray:
            return np.concatenate([_pad_right(getattr(b, name), width, fill) for b in batches])

        query_real = None
        if batches[0].rectangular:
            queries = max(b.query_real.shape[1] for b in batches)
            query_real = np.concatenate([_pad_right(b.query_real, queries, False)
                                         for b in batches])
        return cls(real=stacked("real", False), special=stacked("special", False),
                   punctuation=stacked("punctuation", False),
                   codes=stacked("codes", PADDING_CODE), causal=batches[0].causal,
                   query_real=query_real)


def equal_token_pairs(codes: np.ndarray, special: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P,) queries and (P,) keys: every pair key < query of equal tokens (equal `codes`),
    neither special. Grouped by token, then by query; each query's pairs side by side."""
    positions = np.flatnonzero(~np.asarray(special, dtype=bool)).astype(np.int64)
    if positions.size == 0:
        return positions, positions
    group = np.asarray(codes)[positions]
    order = np.argsort(group, kind="stable")  # by token, each group's positions ascending
    ordered, ordered_group = positions[order], group[order]
    starts = np.flatnonzero(np.r_[True, ordered_group[1:] != ordered_group[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, ordered.size]))  # (N,)
    earlier = np.arange(ordered.size) - group_start  # occurrences before each one
    queries = np.repeat(ordered, earlier)  # (P,)
    first_pair = np.repeat(np.cumsum(earlier) - earlier, earlier)  # (P,)
    offset = np.arange(queries.size) - first_pair  # 0 .. earlier - 1 within each query
    keys = ordered[np.repeat(group_start, earlier) + offset]  # (P,)
    return queries, keys



def _read_only(arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    for array in arrays:
        array.setflags(write=False)
    return arrays


def token_codes(tokens: Sequence[str]) -> np.ndarray:
    """(T,) int64: one code per distinct token, equal tokens equal codes."""
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.array([str(t) for t in tokens]), return_inverse=True)[1].astype(np.int64)


def _check_right_padding(real: np.ndarray, what: str) -> None:
    if (real[:, 1:] & ~real[:, :-1]).any():
        raise ValueError(f"padding must come after every real {what} (on the right)")


def _pad_right(values: np.ndarray, width: int, fill) -> np.ndarray:
    """(B, t) -> (B, width), filled on the right."""
    padded = np.full((values.shape[0], width), fill, dtype=values.dtype)
    padded[:, :values.shape[1]] = values
    return padded

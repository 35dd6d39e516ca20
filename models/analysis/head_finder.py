"""The head finder: which heads send a query token's attention to chosen key tokens.

Tokens are found by the text a user types ("he", "Mario"): case-insensitive, with the word-piece
markers ("##" of WordPiece, "Ġ" of byte-level BPE, "▁" of SentencePiece) stripped, and a word the
tokenizer split into pieces found as the run of consecutive pieces that spells it. A query made
of several pieces reads the MEAN of their rows and several key pieces the SUM of their columns,
the same rule as merging word pieces (models/analysis/token_options.py), so a head's score is the same whether or
not pieces are merged.

Finding words needs only the tokens: `locate` and `every_position` take anything with `.tokens`
(a record, or a long input's streamed forward, which keeps no (T, T) maps). The scores are read
from the query's rows of every layer: `rows_to_keys` and `strongest_in_rows` take those rows,
(L, H, W, K), which a long input computes for the query alone (models/hooks/long_rows.py); the
record-based `query_to_keys` and `strongest_keys` cut them from the record's maps.

Dimensions: L layers, H heads, Q query positions, K key positions, W the query's pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from models.hooks.record import AttentionRecord

PIECE_MARKERS = ("##", "Ġ", "▁")


class HasTokens(Protocol):
    """What finding words needs: an AttentionRecord, a long input's Streamed, a TokenView…"""

    @property
    def tokens(self) -> Sequence[str]: ...


class TokenNotFound(ValueError):
    """A token the user typed is not in the text; the message is one sentence."""


@dataclass(frozen=True)
class TokenSpan:
    """Consecutive token positions [start, stop) that spell one word the user typed."""

    start: int
    stop: int

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(range(self.start, self.stop))


def normalise_token(token: str) -> str:
    """Lower case, without word-piece markers or surrounding spaces: "ĠMario" -> "mario"."""
    text = token.strip()
    for marker in PIECE_MARKERS:
        text = text.removeprefix(marker)
    return text.strip().lower()


def find_spans(tokens: Sequence[str], text: str) -> tuple[TokenSpan, ...]:
    """Every run of consecutive tokens whose normalised pieces spell `text`, in order.

    A single token that matches is preferred to a longer run starting at the same position.
    """
    wanted = normalise_token(text)
    if not wanted:
        return ()
    pieces = [normalise_token(t) for t in tokens]
    spans = []
    for start in range(len(pieces)):
        spelled = ""
        for stop in range(start + 1, len(pieces) + 1):
            spelled += pieces[stop - 1]
            if spelled == wanted:
                spans.append(TokenSpan(start, stop))
                break
            if not wanted.startswith(spelled) or not pieces[stop - 1]:
                break
    return tuple(spans)


def locate(text_tokens: HasTokens, text: str) -> TokenSpan:
    """The first place `text` occurs in the tokens, or TokenNotFound with one sentence."""
    if not text.strip():
        raise TokenNotFound("No token was given: type a word from the sentence.")
    spans = find_spans(text_tokens.tokens, text)
    if not spans:
        raise TokenNotFound(f"'{text.strip()}' is not in the text; type a word exactly as it "
                            "appears in the sentence.")
    return spans[0]


def parse_token_list(text: str) -> tuple[str, ...]:
    """Comma-separated words ("Mario, he") -> ("Mario", "he"), empty items dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def query_to_keys(record: AttentionRecord, query: Sequence[int],
                  keys: Sequence[int]) -> np.ndarray:
    """(L, H): the attention from the query (mean over its rows) to the keys (sum of columns)."""
    if not len(query):
        raise ValueError("Choose a query token.")
    return rows_to_keys(query_rows(record, query), keys)


def strongest_keys(record: AttentionRecord, query: Sequence[int]) -> np.ndarray:
    """(L, H) int: the key each head's query row (mean over its pieces) puts most weight on."""
    return strongest_in_rows(query_rows(record, query))


def query_rows(record: AttentionRecord, query: Sequence[int]) -> np.ndarray:
    """(L, H, W, K): the query pieces' rows of every head, cut from the record's maps."""
    return record.weights[:, :, list(query), :]  # (L, H, W, K)


def rows_to_keys(rows: np.ndarray, keys: Sequence[int]) -> np.ndarray:
    """(L, H): from the query's rows of every head, (L, H, W, K), the attention to the keys: the
    mean over the query's W pieces, summed over the key columns."""
    _check_rows(rows)
    if not len(keys):
        raise ValueError("Choose at least one key token.")
    mean = rows.mean(axis=2)  # (L, H, K)
    return mean[..., sorted(set(keys))].sum(axis=-1)  # (L, H)


def strongest_in_rows(rows: np.ndarray) -> np.ndarray:
    """(L, H) int: from the query's rows, (L, H, W, K), the key each head's mean row puts most
    weight on."""
    _check_rows(rows)
    return rows.mean(axis=2).argmax(axis=-1)  # (L, H, K) -> (L, H)


def _check_rows(rows: np.ndarray) -> None:
    if rows.ndim != 4:
        raise ValueError(f"the query's rows must be (layers, heads, pieces, keys), not "
                         f"{rows.shape}")
    if not rows.shape[2]:
        raise ValueError("Choose a query token.")


def every_position(text_tokens: HasTokens, words: Sequence[str]) -> tuple[int, ...]:
    """The positions of every occurrence of every word, sorted; TokenNotFound names a missing one."""
    if not words:
        raise TokenNotFound("No key token was given: type at least one word from the sentence.")
    positions = set()
    for word in words:
        locate(text_tokens, word)  # raises with one sentence when the word is not in the text
        positions.update(p for span in find_spans(text_tokens.tokens, word)
                         for p in span.positions)
    return tuple(sorted(positions))

"""The head finder: which heads send a query token's attention to chosen key tokens.

Tokens are found by the text a user types ("he", "Mario"): case-insensitive, with the word-piece
markers ("##" of WordPiece, "Ġ" of byte-level BPE, "▁" of SentencePiece) stripped, and a word the
tokenizer split into pieces found as the run of consecutive pieces that spells it. A query made
of several pieces reads the MEAN of their rows and several key pieces the SUM of their columns,
the same rule as merging word pieces (viz/tokens.py), so a head's score is the same whether or
not pieces are merged.

Dimensions: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.record import AttentionRecord

PIECE_MARKERS = ("##", "Ġ", "▁")


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


def locate(record: AttentionRecord, text: str) -> TokenSpan:
    """The first place `text` occurs in the record's tokens, or TokenNotFound with one sentence."""
    if not text.strip():
        raise TokenNotFound("No token was given: type a word from the sentence.")
    spans = find_spans(record.tokens, text)
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
    if not len(keys):
        raise ValueError("Choose at least one key token.")
    rows = record.weights[:, :, list(query), :].mean(axis=2)  # (L, H, K)
    return rows[..., sorted(set(keys))].sum(axis=-1)  # (L, H)


def strongest_keys(record: AttentionRecord, query: Sequence[int]) -> np.ndarray:
    """(L, H) int: the key each head's query row (mean over its pieces) puts most weight on."""
    rows = record.weights[:, :, list(query), :].mean(axis=2)  # (L, H, K)
    return rows.argmax(axis=-1)


def every_position(record: AttentionRecord, words: Sequence[str]) -> tuple[int, ...]:
    """The positions of every occurrence of every word, sorted; TokenNotFound names a missing one."""
    if not words:
        raise TokenNotFound("No key token was given: type at least one word from the sentence.")
    positions = set()
    for word in words:
        locate(record, word)  # raises with one sentence when the word is not in the text
        positions.update(p for span in find_spans(record.tokens, word) for p in span.positions)
    return tuple(sorted(positions))

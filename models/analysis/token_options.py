"""The two token options every view respects: word pieces merged into words, special tokens hidden.

Both take a record and return a new record, so every analysis and every view works unchanged on
the result (a numeric transform of the record: models/analysis, not viz/).

Merging (the rule the pages state): a word's row is the MEAN of its pieces' query rows, and a
word's column is the SUM of its pieces' key columns. Rows still add up to 1: each piece row
does, the sum over key pieces keeps that, and a mean of rows that add up to 1 adds up to 1.

Word boundaries:
- WordPiece (BERT): a piece starting with "##" continues the word before it.
- Byte-level BPE (GPT-2, RoBERTa: "Ġ") and SentencePiece (Llama, T5: "▁"): a piece starting with
  the marker starts a word and every other piece continues the word before it (so GPT-2's
  "arrow" + "." is one word, as whitespace would split it).
- Special tokens are always words of their own, and a word never crosses from the first
  sentence of a pair into the second.

Hiding special tokens drops their rows and columns and divides each remaining row by what is
left of it. A row with less than EMPTY_ROW_WEIGHT (0.1 %) left off the special tokens has nothing
to renormalise: it is kept as zeros and counted, and `notice` says so in one sentence. (The
record accepts rows of zeros only under a mask, so such a result lists HIDDEN_KEYS_MASK.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.analysis.reducer import EMPTY_ROW_WEIGHT
from models.analysis.token_batch import WORD_START_MARKERS, WORDPIECE_CONTINUATION
from models.hooks.record import AttentionRecord

# The record lets a row sum to 0 only when a mask is listed; hidden keys act like padding.
HIDDEN_KEYS_MASK = "hidden-specials"


def word_groups(record: AttentionRecord) -> list[list[int]]:
    """The token positions of each word, in order (every position in exactly one group)."""
    tokens = record.tokens
    special = set(record.special_positions)
    word_start_style = any(t.startswith(WORD_START_MARKERS) for t in tokens)
    groups: list[list[int]] = []
    for position, token in enumerate(tokens):
        previous = position - 1
        continues = (
            groups
            and position not in special
            and previous not in special
            and record.segment_ids[previous] == record.segment_ids[position]
            and (not token.startswith(WORD_START_MARKERS) if word_start_style
                 else token.startswith(WORDPIECE_CONTINUATION))
        )
        if continues:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def _word_text(pieces: list[str]) -> str:
    return pieces[0] + "".join(p.removeprefix(WORDPIECE_CONTINUATION) for p in pieces[1:])


def merge_word_pieces(record: AttentionRecord) -> AttentionRecord:
    """One row and one column per word: mean over a word's query pieces, sum over its key pieces.

    A query piece whose row a mask emptied is left out of its word's mean (it has no attention
    to average); a word whose pieces are all emptied keeps an empty row.
    """
    groups = word_groups(record)
    if len(groups) == record.num_tokens:
        return record
    weights = record.weights  # (L, H, Q, K)
    starts = [g[0] for g in groups]  # words are runs of consecutive pieces
    by_key = np.add.reduceat(weights, starts, axis=-1)  # (L, H, Q, W): sum over key pieces
    live = weights.sum(axis=-1) > EMPTY_ROW_WEIGHT  # (L, H, Q)
    summed = np.add.reduceat(by_key * live[..., None], starts, axis=-2)  # (L, H, W, W)
    live_pieces = np.add.reduceat(live.astype(weights.dtype), starts, axis=-1)[..., None]
    merged = np.divide(summed, live_pieces, out=np.zeros_like(summed),
                       where=live_pieces > 0)  # mean over the live query pieces
    first_of = {g[0]: w for w, g in enumerate(groups)}
    return AttentionRecord(
        tokens=tuple(_word_text([record.tokens[p] for p in g]) for g in groups),
        weights=merged,
        source=record.source,
        masks=record.masks,
        segment_ids=tuple(record.segment_ids[g[0]] for g in groups),
        special_positions=tuple(first_of[p] for p in record.special_positions),
        dropped_tokens=record.dropped_tokens,
    )


@dataclass(frozen=True)
class HiddenSpecials:
    """A record with the special tokens removed, and how many of its rows were left empty."""

    record: AttentionRecord
    hidden_tokens: tuple[str, ...]
    emptied_rows: int  # (layer, head, query) rows that had all their weight on special tokens
    total_rows: int

    @property
    def notice(self) -> str:
        """What a page says when special tokens are hidden."""
        if not self.hidden_tokens:
            if self.record.special_positions:
                return "Every token is a special token, so none are hidden."
            return "This input has no special tokens to hide."
        names = ", ".join(sorted(set(self.hidden_tokens)))
        text = (f"Special tokens ({names}) are hidden: each row is renormalised to add up to 1 "
                "over the tokens that remain.")
        if self.emptied_rows:
            text += (f" {self.emptied_rows} of {self.total_rows} rows put all their weight on "
                     "special tokens; with them hidden nothing is left, so those rows are empty.")
        return text


def hide_special_tokens(record: AttentionRecord) -> HiddenSpecials:
    """Drop the special positions from both axes and renormalise every remaining row."""
    special = set(record.special_positions)
    keep = [p for p in range(record.num_tokens) if p not in special]
    if not special or not keep:
        return HiddenSpecials(record, (), 0, record.weights[..., 0].size)
    weights = record.weights[..., keep, :][..., keep]  # (L, H, Q', K')
    remaining = weights.sum(axis=-1, keepdims=True)  # (L, H, Q', 1)
    emptied = remaining <= EMPTY_ROW_WEIGHT
    weights = np.divide(weights, remaining, out=np.zeros_like(weights), where=~emptied)
    emptied_rows = int(emptied.sum())
    masks = record.masks
    if emptied_rows and not masks:
        masks = (HIDDEN_KEYS_MASK,)
    hidden = AttentionRecord(
        tokens=tuple(record.tokens[p] for p in keep),
        weights=weights,
        source=record.source,
        masks=masks,
        segment_ids=tuple(record.segment_ids[p] for p in keep),
        special_positions=(),
        dropped_tokens=record.dropped_tokens,
    )
    return HiddenSpecials(hidden, tuple(record.tokens[p] for p in sorted(special)),
                          emptied_rows, weights[..., 0].size)


@dataclass(frozen=True)
class TokenView:
    """The record a view draws after the token options, and the sentences that explain it."""

    record: AttentionRecord
    notes: tuple[str, ...]


def apply_token_options(record: AttentionRecord, merge_words: bool,
                        hide_special: bool) -> TokenView:
    """Merge word pieces first (special tokens stay their own words), then hide special tokens."""
    notes = []
    if merge_words:
        merged = merge_word_pieces(record)
        notes.append(
            f"Word pieces merged into {merged.num_tokens} words (from {record.num_tokens} "
            "pieces): a word's row is the mean of its pieces' rows, its column the sum of "
            "its pieces' columns." if merged is not record else
            "No word is split into pieces here, so there is nothing to merge."
        )
        record = merged
    if hide_special:
        hidden = hide_special_tokens(record)
        notes.append(hidden.notice)
        record = hidden.record
    return TokenView(record, tuple(notes))

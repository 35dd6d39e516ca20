"""Head detectors: one score in [0, 1] per input, layer and head.

Every score is a mean over query rows of the weight a head puts on a chosen set of keys, so 1
means the pattern is perfect and an even spread over K keys gives about 1/K. Rows a mask emptied
and padded rows are left out. The induction and duplicate-token detectors are meant for a
sequence of random tokens repeated twice (Olsson et al. 2022; models.analysis.repeated_tokens
builds one); duplicate tokens also mean something on any text with repeats.

Each layer is read through its diagonals, columns and the gathered cells of equal-token pairs:
no (Q, K) mask is built, so a 4,096-token layer is scored as it streams.

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions, P token pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from models.analysis.layer_pass import BatchRows, Parts
from models.analysis.reducer import (EMPTY_ROW_WEIGHT, LayerLog, PassReducer, reduce_record,
                                     row_mean)
from models.analysis.token_batch import ItemTokens, TokenBatch, equal_token_pairs  # noqa: F401
from models.hooks.record import AttentionRecord

PREVIOUS_TOKEN = ("Previous-token score: the weight each query token puts on the token just "
                  "before it, averaged over every query that has one.")
DUPLICATE_TOKEN = ("Duplicate-token score: for each query token that already occurred earlier "
                   "in the text, the weight it puts on its earlier occurrences, averaged over "
                   "those queries.")
INDUCTION = ("Induction score (Olsson et al. 2022): on random tokens repeated twice, the weight "
             "each token of the second copy puts on the token that came right after its first "
             "occurrence (the pattern [A][B] … [A] → [B]), averaged over the second copy.")
FIRST_TOKEN = ("First-token sink score: the weight each query after the first puts on the first "
               "token ([CLS] in BERT, the first word in a decoder without a start token).")
SEPARATOR = ("[SEP] sink score: the weight each query puts on the special tokens after the "
             "first one ([SEP] in BERT, </s> in RoBERTa), averaged over every query.")

TOO_SHORT_PREVIOUS = "A previous-token score needs at least two tokens."
TOO_SHORT_FIRST = "A first-token score needs at least two tokens."
NO_DUPLICATES = ("No token occurs twice in this text, so duplicate-token heads cannot be "
                 "measured on it.")
NO_INDUCTION = ("No token occurs twice in this text, so induction heads cannot be measured on "
                "it.")
NO_SEPARATOR = ("This input has no [SEP]-like special token after the first position, so there "
                "is no [SEP] sink to measure.")

PAIR_CHUNK = 1 << 18  # token pairs read at a time: (H, chunk) float32 + float64


class NotMeasurable(ValueError):
    """The input has nothing this detector can measure; the message is one sentence."""


def equal_pairs(tokens: TokenBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P,) input, query and key of every input's equal-token pairs (ItemTokens.pairs_by_query),
    input after input: each (input, query)'s pairs side by side."""
    found = [tokens.item(index).pairs_by_query for index in range(tokens.batch_size)]
    inputs = np.concatenate([np.full(len(queries), index, dtype=np.int64)
                             for index, (queries, _) in enumerate(found)])
    return (inputs, np.concatenate([queries for queries, _ in found]).astype(np.int64),
            np.concatenate([keys for _, keys in found]).astype(np.int64))


def _pair_scores(maps: np.ndarray, live: np.ndarray,
                 pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
                 share: np.ndarray | None = None) -> np.ndarray:
    """(B, H) mean over the live queries that have pairs of each query's weight on its keys
    (pairs grouped by input and query, `equal_pairs`), reading only the pairs' cells,
    PAIR_CHUNK at a time; or from `share` (B, H, Q), those weights already summed (by the
    layer's pass)."""
    inputs, queries, keys = pairs
    counted = np.zeros((live.shape[0], live.shape[2]), dtype=bool)  # (B, Q)
    counted[inputs, queries] = True
    rows = live & counted[:, None]
    if share is not None:
        return _clipped_mean(share, rows)
    share = np.zeros(live.shape)  # (B, H, Q) weight on each query's keys
    starts = np.flatnonzero(np.r_[True, (queries[1:] != queries[:-1]) |
                                  (inputs[1:] != inputs[:-1])])  # each (input, query)'s pairs
    chunks = np.unique(starts[np.searchsorted(starts, np.arange(0, queries.size, PAIR_CHUNK),
                                              side="right") - 1])  # whole queries each
    for first, end in zip(chunks, [*chunks[1:], queries.size]):
        inside = starts[(starts >= first) & (starts < end)]
        part = slice(first, end)
        gathered = maps[inputs[part], :, queries[part], keys[part]]  # (chunk, H)
        share[inputs[inside], :, queries[inside]] = np.add.reduceat(
            gathered.astype(np.float64), inside - first, axis=0)
    return _clipped_mean(share, rows)


def _clipped_mean(share: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.clip(row_mean(share, rows), 0.0, 1.0)


def _too_short(message: str) -> Callable[[ItemTokens], str | None]:
    return lambda item: message if item.keys < 2 else None


def _without_pairs(message: str) -> Callable[[ItemTokens], str | None]:
    return lambda item: message if item.equal_token_pairs[0].size == 0 else None


def _later_specials(item: ItemTokens) -> np.ndarray:
    return item.special_positions[item.special_positions > 0]


def previous_token(maps: np.ndarray, live: np.ndarray, tokens: TokenBatch,
                   rows: BatchRows | None = None) -> np.ndarray:
    previous = np.diagonal(maps, offset=-1, axis1=-2, axis2=-1)  # (B, H, Q-1): query q+1, key q
    return _clipped_mean(previous, live[..., 1:])


def duplicate_token(maps: np.ndarray, live: np.ndarray, tokens: TokenBatch,
                    rows: BatchRows | None = None) -> np.ndarray:
    return _pair_scores(maps, live, equal_pairs(tokens),
                        None if rows is None else rows.equal_tokens)


def induction(maps: np.ndarray, live: np.ndarray, tokens: TokenBatch,
              rows: BatchRows | None = None) -> np.ndarray:
    inputs, queries, keys = equal_pairs(tokens)
    return _pair_scores(maps, live, (inputs, queries, keys + 1))  # the key after each copy


def first_token(maps: np.ndarray, live: np.ndarray, tokens: TokenBatch,
                rows: BatchRows | None = None) -> np.ndarray:
    return _clipped_mean(maps[..., 1:, 0], live[..., 1:])  # the first token on itself says nothing


def separator(maps: np.ndarray, live: np.ndarray, tokens: TokenBatch,
              rows: BatchRows | None = None) -> np.ndarray:
    later = [_later_specials(tokens.item(index)) for index in range(tokens.batch_size)]
    count = max(1, max(len(positions) for positions in later))
    columns = np.zeros((len(later), count), dtype=np.int64)  # (B, S) each input's later specials
    weight = np.zeros((len(later), count), dtype=np.float32)  # (B, S) 1 on a special, else 0
    for index, positions in enumerate(later):
        columns[index, :len(positions)] = positions
        weight[index, :len(positions)] = 1.0
    on = np.take_along_axis(maps, columns[:, None, None, :], axis=-1)  # (B, H, Q, S)
    return _clipped_mean((on * weight[:, None, None]).sum(axis=-1), live)  # (B, H, Q)


@dataclass(frozen=True)
class Detector:
    """One detector: its name, its definition for the page, its measure of a batch's layer
    ((B, H, Q, K) maps, (B, H, Q) live rows, the batch's tokens, the layer's pass -> (B, H)
    scores, meaningful for the inputs it can measure), why it cannot measure an input (one
    sentence, or None when it can), and which input it reads."""

    name: str
    definition: str
    measure: Callable[[np.ndarray, np.ndarray, TokenBatch, BatchRows | None], np.ndarray]
    unmeasurable: Callable[[ItemTokens], str | None]
    on_repeated_tokens: bool  # True: read the random repeated sequence, else the sentence

    def score(self, record: AttentionRecord) -> np.ndarray:
        """(L, H) this detector's scores on `record`, or NotMeasurable."""
        return detector_scores(record, self.name)


DETECTORS = (
    Detector("previous-token", PREVIOUS_TOKEN, previous_token,
             _too_short(TOO_SHORT_PREVIOUS), False),
    Detector("duplicate-token", DUPLICATE_TOKEN, duplicate_token,
             _without_pairs(NO_DUPLICATES), True),
    Detector("induction", INDUCTION, induction, _without_pairs(NO_INDUCTION), True),
    Detector("first-token sink", FIRST_TOKEN, first_token, _too_short(TOO_SHORT_FIRST), False),
    Detector("[SEP] sink", SEPARATOR, separator,
             lambda item: None if _later_specials(item).size else NO_SEPARATOR, False),
)
DETECTORS_BY_NAME = {detector.name: detector for detector in DETECTORS}
SENTENCE_DETECTORS = tuple(
    detector.name for detector in DETECTORS
    if not detector.on_repeated_tokens or detector.name == "duplicate-token"
)  # read on the text itself; duplicate tokens also mean something on any text with repeats


@dataclass(frozen=True)
class DetectorScores:
    """Each detector's scores of N inputs: `scores` name -> (N, L, H) float64 (NaN for an input
    it cannot measure), `reasons` name -> per input None (measured) or the sentence saying why
    it cannot measure that input."""

    scores: dict[str, np.ndarray]
    reasons: dict[str, tuple[str | None, ...]]

    def of(self, name: str, item: int = 0) -> np.ndarray:
        """(L, H) input `item`'s scores of detector `name`; NotMeasurable says why there are none."""
        reason = self.reasons[name][item]
        if reason is not None:
            raise NotMeasurable(reason)
        return self.scores[name][item]

    def by_name(self, item: int = 0) -> dict[str, np.ndarray | str]:
        """Input `item`'s scores: name -> (L, H), or why the detector cannot measure it."""
        return {name: self.scores[name][item] if self.reasons[name][item] is None
                else self.reasons[name][item] for name in self.scores}

    def item(self, index: int) -> DetectorScores:
        return DetectorScores({name: values[index:index + 1] for name, values in
                               self.scores.items()},
                              {name: reasons[index:index + 1] for name, reasons in
                               self.reasons.items()})

    @property
    def nbytes(self) -> int:
        return sum(values.nbytes for values in self.scores.values())


class Detectors(PassReducer):
    """The detectors `names` (every detector by default) on every head, layer by layer;
    `result()` is DetectorScores. Square maps only."""

    def __init__(self, names: Sequence[str] = tuple(DETECTORS_BY_NAME)):
        unknown = set(names) - set(DETECTORS_BY_NAME)
        if unknown:
            raise ValueError(f"unknown detectors {sorted(unknown)}; known: {list(DETECTORS_BY_NAME)}")
        self.names = tuple(names)
        self._log: LayerLog[dict[str, np.ndarray | str]] = LayerLog()
        self._heads = 0

    @property
    def parts(self) -> Parts:
        """The duplicate-token weights are summed by the layer's pass (each block's pairs read
        while the block is in the processor's cache)."""
        return Parts(equal_tokens="duplicate-token" in self.names)

    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: BatchRows, norms: np.ndarray | None = None) -> None:
        """Every detector's (H,) scores of each input of the batch (or why it cannot measure
        that input), every input at once."""
        tokens.check(maps)
        if tokens.rectangular:
            raise ValueError("the head detectors need square maps (self-attention)")
        self._heads = maps.shape[1]
        live = (rows.row_sums > EMPTY_ROW_WEIGHT) & tokens.real[:, None]  # (B, H, Q)
        items = [tokens.item(index) for index in range(tokens.batch_size)]
        measured: list[dict[str, np.ndarray | str]] = [{} for _ in items]
        for name in self.names:
            detector = DETECTORS_BY_NAME[name]
            reasons = [detector.unmeasurable(item) for item in items]
            scores = None if all(reasons) else detector.measure(maps, live, tokens, rows)
            for index, reason in enumerate(reasons):
                measured[index][name] = reason if reason is not None else scores[index]
        self._log.put(layer, measured)

    def result(self) -> DetectorScores:
        items = self._log.items()  # per input, per layer: name -> (H,) or a reason
        scores, reasons = {}, {}
        for name in self.names:
            why = tuple(layers[0][name] if isinstance(layers[0][name], str) else None
                        for layers in items)
            scores[name] = np.stack([
                np.full((len(layers), self._heads), np.nan) if reason is not None
                else np.stack([layer[name] for layer in layers])
                for layers, reason in zip(items, why)])  # (N, L, H)
            reasons[name] = why
        return DetectorScores(scores, reasons)


def detector_scores(record: AttentionRecord, name: str) -> np.ndarray:
    """(L, H) detector `name`'s scores on `record`: the Detectors reducer over its layers;
    NotMeasurable when the record has nothing it can measure."""
    (scores,) = reduce_record(record, Detectors((name,)))
    return scores.of(name)


def previous_token_scores(record: AttentionRecord) -> np.ndarray:
    return detector_scores(record, "previous-token")


def duplicate_token_scores(record: AttentionRecord) -> np.ndarray:
    return detector_scores(record, "duplicate-token")


def induction_scores(record: AttentionRecord) -> np.ndarray:
    return detector_scores(record, "induction")


def first_token_scores(record: AttentionRecord) -> np.ndarray:
    return detector_scores(record, "first-token sink")


def separator_scores(record: AttentionRecord) -> np.ndarray:
    return detector_scores(record, "[SEP] sink")

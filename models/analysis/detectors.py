"""Head detectors: one score in [0, 1] per layer and head, from an attention record.

Every score is a mean over query rows of the weight a head puts on a chosen key, so 1 means the
pattern is perfect and an even spread over K keys gives about 1/K. Rows a mask emptied are left
out. The induction and duplicate-token detectors are meant for a sequence of random tokens
repeated twice (Olsson et al. 2022); `repeated_tokens_record` runs a model on one built from
its own vocabulary. The scores themselves are plain numpy on a record.

Dimensions: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from models.hooks.capture import run_captured
from models.scratch.encoder import Encoder
from models.hooks.record import AttentionRecord
from models.loading.tokenize import EncodedText
from models.hooks.trace import trace_from_run

EMPTY_ROW = 1e-3  # a row summing to less than this was emptied by a mask
DEFAULT_REPEAT_LENGTH = 20  # random tokens in one copy
DEFAULT_SEED = 0

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
NO_SEPARATOR = ("This input has no [SEP]-like special token after the first position, so there "
                "is no [SEP] sink to measure.")


class NotMeasurable(ValueError):
    """The input has nothing this detector can measure; the message is one sentence."""


def _row_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean over the last axis of (L, H, Q) values, counting only the queries marked True."""
    count = rows.sum(axis=-1)
    total = np.where(rows, values.astype(np.float64), 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def _live(record: AttentionRecord) -> np.ndarray:
    return record.weights.sum(axis=-1) > EMPTY_ROW  # (L, H, Q)


def _scores_on(record: AttentionRecord, keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """(L, H) mean over the chosen queries of the weight on each query's key set.

    keys: (Q, K) bool, the keys counted for each query; queries: (Q,) bool, the rows counted.
    """
    weights = record.weights  # (L, H, Q, K)
    share = np.einsum("lhqk,qk->lhq", weights, keys.astype(weights.dtype))  # (L, H, Q)
    return np.clip(_row_mean(share, _live(record) & queries), 0.0, 1.0)


def _same_token(record: AttentionRecord) -> np.ndarray:
    """(Q, K) bool: key j < query i holds the same token as i (special tokens never count)."""
    tokens = np.array(record.tokens, dtype=object)
    same = tokens[:, None] == tokens[None, :]  # (Q, K)
    same &= np.tri(record.num_tokens, k=-1, dtype=bool)
    special = list(record.special_positions)
    same[special, :] = False
    same[:, special] = False
    return same


def previous_token_scores(record: AttentionRecord) -> np.ndarray:
    count = record.num_tokens
    if count < 2:
        raise NotMeasurable(TOO_SHORT_PREVIOUS)
    keys = np.eye(count, k=-1, dtype=bool)  # (Q, K): key i - 1 for query i
    return _scores_on(record, keys, keys.any(axis=1))


def duplicate_token_scores(record: AttentionRecord) -> np.ndarray:
    keys = _same_token(record)
    if not keys.any():
        raise NotMeasurable(NO_DUPLICATES)
    return _scores_on(record, keys, keys.any(axis=1))


def induction_scores(record: AttentionRecord) -> np.ndarray:
    same = _same_token(record)
    keys = np.zeros_like(same)
    keys[:, 1:] = same[:, :-1]  # the key after each earlier occurrence
    if not keys.any():
        raise NotMeasurable("No token occurs twice in this text, so induction heads cannot be "
                            "measured on it.")
    return _scores_on(record, keys, keys.any(axis=1))


def first_token_scores(record: AttentionRecord) -> np.ndarray:
    count = record.num_tokens
    if count < 2:
        raise NotMeasurable(TOO_SHORT_FIRST)
    keys = np.zeros((count, count), dtype=bool)
    keys[:, 0] = True
    queries = np.arange(count) > 0  # the first token attending to itself says nothing
    return _scores_on(record, keys, queries)


def separator_scores(record: AttentionRecord) -> np.ndarray:
    later_specials = [p for p in record.special_positions if p > 0]
    if not later_specials:
        raise NotMeasurable(NO_SEPARATOR)
    keys = np.zeros((record.num_tokens,) * 2, dtype=bool)
    keys[:, later_specials] = True
    return _scores_on(record, keys, np.ones(record.num_tokens, dtype=bool))


@dataclass(frozen=True)
class Detector:
    """One detector: its name, its definition for the page, and which input it reads."""

    name: str
    definition: str
    score: Callable[[AttentionRecord], np.ndarray]
    on_repeated_tokens: bool  # True: read the random repeated sequence, else the sentence


DETECTORS = (
    Detector("previous-token", PREVIOUS_TOKEN, previous_token_scores, False),
    Detector("duplicate-token", DUPLICATE_TOKEN, duplicate_token_scores, True),
    Detector("induction", INDUCTION, induction_scores, True),
    Detector("first-token sink", FIRST_TOKEN, first_token_scores, False),
    Detector("[SEP] sink", SEPARATOR, separator_scores, False),
)
DETECTORS_BY_NAME = {detector.name: detector for detector in DETECTORS}


def random_token_ids(tokenizer, count: int, seed: int = DEFAULT_SEED) -> list[int]:
    """`count` distinct token ids drawn with a seeded generator from the ordinary vocabulary.

    Special tokens, added tokens and placeholder entries written in brackets ("[unused7]",
    "<pad>") are left out.
    """
    excluded = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
    vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    candidates = [
        i for i, token in enumerate(vocabulary)
        if i not in excluded and token and not (token[0] + token[-1] in ("[]", "<>"))
    ]
    if len(candidates) < count:
        raise NotMeasurable(f"The vocabulary has only {len(candidates)} ordinary tokens, fewer "
                            f"than the {count} needed.")
    chosen = np.random.default_rng(seed).choice(len(candidates), size=count, replace=False)
    return [candidates[int(i)] for i in chosen]


def repeated_random_ids(tokenizer, count: int = DEFAULT_REPEAT_LENGTH,
                        seed: int = DEFAULT_SEED) -> list[int]:
    """Random tokens repeated twice, with the tokenizer's own special tokens around them."""
    block = random_token_ids(tokenizer, count, seed)
    prefix, suffix = special_wrapping(tokenizer)
    return prefix + block + block + suffix


def special_wrapping(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after a text ([CLS] … [SEP])."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    wrapped = tokenizer("a")["input_ids"]
    for start in range(len(wrapped) - len(plain) + 1):
        if wrapped[start:start + len(plain)] == plain:
            return list(wrapped[:start]), list(wrapped[start + len(plain):])
    return [], []


def repeated_tokens_record(model, tokenizer, max_tokens: int, causal: bool, source: str,
                           count: int = DEFAULT_REPEAT_LENGTH,
                           seed: int = DEFAULT_SEED) -> AttentionRecord:
    """The model's attention on `count` random tokens repeated twice (one captured forward)."""
    ids = repeated_random_ids(tokenizer, count, seed)
    if len(ids) > max_tokens:
        raise NotMeasurable(f"Two copies of {count} tokens do not fit the model's limit of "
                            f"{max_tokens} tokens: choose fewer tokens.")
    input_ids = torch.tensor([ids])  # (1, T)
    special = set(tokenizer.all_special_ids)
    encoded = EncodedText(
        input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
        token_type_ids=None if causal else torch.zeros_like(input_ids),
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)), segment_ids=(0,) * len(ids),
        special_positions=tuple(p for p, i in enumerate(ids) if i in special), dropped_tokens=0,
    )
    inputs = {"input_ids": input_ids, "attention_mask": encoded.attention_mask}
    if isinstance(model, Encoder):
        inputs["token_type_ids"] = None
    elif not causal and "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
        inputs["token_type_ids"] = encoded.token_type_ids
    return trace_from_run(run_captured(model, inputs), encoded, source, causal).record


# One layer at a time: what a long input's streamed forward measures on each layer's maps.

SENTENCE_DETECTORS = tuple(
    detector.name for detector in DETECTORS
    if not detector.on_repeated_tokens or detector.name == "duplicate-token"
)  # read on the text itself; duplicate tokens also mean something on any text with repeats
PAIR_CHUNK = 1 << 18  # equal-token pairs read at a time: (H, chunk) float32 + float64


def _layer_mean(share: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(H,) clipped mean over the marked rows of (H, Q) shares, as `_scores_on` takes it."""
    return np.clip(_row_mean(share, rows), 0.0, 1.0)


def equal_token_pairs(tokens, special_positions) -> tuple[np.ndarray, np.ndarray]:
    """(P,) queries and (P,) keys: every pair key < query of equal tokens, neither special (the
    True cells of `_same_token`), without a (Q, K) matrix. Grouped by token, then by query."""
    special = set(special_positions)
    positions = np.array([p for p in range(len(tokens)) if p not in special], dtype=np.int64)
    if positions.size == 0:
        return positions, positions
    _, group = np.unique(np.array([str(tokens[p]) for p in positions]), return_inverse=True)
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


def layer_sentence_scores(maps: np.ndarray, tokens,
                          special_positions) -> dict[str, np.ndarray | str]:
    """Every detector of SENTENCE_DETECTORS on one layer: name -> (H,) float64 scores, equal to
    `detector.score(record)[layer]`, or the NotMeasurable message when it cannot measure this
    input.

    maps: (H, Q, K) float32 weights of one layer (read only, square). Read through diagonals,
    columns and the gathered cells of equal-token pairs: no (Q, K) matrix is built.
    """
    heads, count, keys = maps.shape
    if keys != count or len(tokens) != count:
        raise ValueError(f"{len(tokens)} tokens for maps shaped {maps.shape}: a square map is needed")
    live = maps.sum(axis=-1) > EMPTY_ROW  # (H, Q), as `_live`
    scores: dict[str, np.ndarray | str] = {}
    if count < 2:
        scores["previous-token"], scores["first-token sink"] = TOO_SHORT_PREVIOUS, TOO_SHORT_FIRST
    else:
        previous = np.diagonal(maps, offset=-1, axis1=1, axis2=2)  # (H, Q-1): query q+1, key q
        scores["previous-token"] = _layer_mean(previous, live[:, 1:])
        scores["first-token sink"] = _layer_mean(maps[:, 1:, 0], live[:, 1:])
    later = sorted({p for p in special_positions if p > 0})
    if later:
        on_specials = maps[:, :, later].sum(axis=-1)  # (H, Q)
        scores["[SEP] sink"] = _layer_mean(on_specials, live)
    else:
        scores["[SEP] sink"] = NO_SEPARATOR
    queries, pair_keys = equal_token_pairs(tokens, special_positions)
    if queries.size == 0:
        scores["duplicate-token"] = NO_DUPLICATES
    else:
        share = np.zeros((heads, count))  # (H, Q) weight on earlier copies
        starts = np.flatnonzero(np.r_[True, queries[1:] != queries[:-1]])  # each query's pairs
        chunks = np.unique(starts[np.searchsorted(starts, np.arange(0, queries.size, PAIR_CHUNK),
                                                  side="right") - 1])  # whole queries each
        for first, end in zip(chunks, [*chunks[1:], queries.size]):
            inside = starts[(starts >= first) & (starts < end)]
            gathered = maps[:, queries[first:end], pair_keys[first:end]]  # (H, chunk)
            share[:, queries[inside]] = np.add.reduceat(gathered.astype(np.float64),
                                                        inside - first, axis=1)
        repeated = np.zeros(count, dtype=bool)
        repeated[queries] = True
        scores["duplicate-token"] = _layer_mean(share, live & repeated)
    return {name: scores[name] for name in SENTENCE_DETECTORS}

"""What a language model predicts, summarised from its logits into a few small frozen values.

A (T, V) logits tensor is large (SmolLM2: 49,152 numbers per token); a view needs only the top
candidates and the probability of the token that came. These functions keep just that, so a
cached trace holds a few kilobytes of predictions instead of the logits. Nothing here runs a
model: they take the logits a forward pass already computed.

Dimension letters: T tokens, V vocabulary, k candidates kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

DEFAULT_TOP_K = 10


@dataclass(frozen=True)
class Candidate:
    """One token a model could put at a position, with its probability."""

    token_id: int
    token: str  # as the tokenizer writes it ("ĠParis", "##ing")
    text: str  # readable: what the token adds to the text (" Paris")
    probability: float


@dataclass(frozen=True)
class NextToken:
    """The model's top candidates for the token after the text."""

    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class PositionPrediction:
    """At one position p: what the model predicted for p + 1, and the token that came there."""

    position: int  # the token the model read last (its output predicts position + 1)
    actual: Candidate  # the token at position + 1, with the probability the model gave it
    loss_nats: float  # -ln(probability of the actual token)
    candidates: tuple[Candidate, ...]  # the model's top-k for position + 1

    @property
    def loss_bits(self) -> float:
        return self.loss_nats / math.log(2)

    @property
    def rank(self) -> int | None:
        """1 when the actual token was the model's first choice; None when not in the top k."""
        for index, candidate in enumerate(self.candidates):
            if candidate.token_id == self.actual.token_id:
                return index + 1
        return None


@dataclass(frozen=True)
class PerPosition:
    """Every position's prediction of the next token, and the text's mean loss."""

    positions: tuple[PositionPrediction, ...]

    @property
    def mean_loss_nats(self) -> float:
        return sum(p.loss_nats for p in self.positions) / len(self.positions)

    @property
    def mean_loss_bits(self) -> float:
        return self.mean_loss_nats / math.log(2)

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_loss_nats)


@dataclass(frozen=True)
class MaskFillers:
    """The model's top fillers for one mask token."""

    position: int
    candidates: tuple[Candidate, ...]


def readable(tokenizer, token_id: int) -> str:
    """A token as it reads in text: byte-level BPE's "Ġ" becomes a space, bytes become text.

    A token holding only part of a multi-byte character reads as "\ufffd", as the tokenizer
    decodes it on its own.
    """
    return tokenizer.decode([token_id], skip_special_tokens=False,
                            clean_up_tokenization_spaces=False)


def candidate(tokenizer, token_id: int, probability: float) -> Candidate:
    token_id = int(token_id)
    return Candidate(token_id=token_id, token=str(tokenizer.convert_ids_to_tokens(token_id)),
                     text=readable(tokenizer, token_id), probability=float(probability))


class _Vocabulary:
    """The tokens and readable texts of many ids, each distinct id converted once (a long text's
    top-10 lists repeat the same few hundred tokens)."""

    def __init__(self, tokenizer, ids: list[int]):
        distinct = sorted(set(int(i) for i in ids))
        tokens = tokenizer.convert_ids_to_tokens(distinct)
        texts = tokenizer.batch_decode([[i] for i in distinct], skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
        self._words = {i: (str(t), x) for i, t, x in zip(distinct, tokens, texts)}

    def candidate(self, token_id: int, probability: float) -> Candidate:
        token, text = self._words[int(token_id)]
        return Candidate(token_id=int(token_id), token=token, text=text,
                         probability=float(probability))


def top_candidates(probabilities: torch.Tensor, tokenizer, k: int) -> tuple[Candidate, ...]:
    """The k most probable tokens of one (V,) distribution, most probable first."""
    values, indices = probabilities.topk(min(k, probabilities.numel()))  # (k,), (k,)
    return tuple(candidate(tokenizer, i, p) for i, p in zip(indices.tolist(), values.tolist()))


def next_token(logits_last: torch.Tensor, tokenizer, k: int = DEFAULT_TOP_K) -> NextToken:
    """The top-k next tokens from the logits of the text's last position, shaped (V,)."""
    _check_k(k)
    if logits_last.dim() != 1:
        raise ValueError(f"next_token needs the last position's logits shaped (V,), "
                         f"got {tuple(logits_last.shape)}")
    probabilities = torch.softmax(logits_last.detach().float(), dim=-1)  # (V,)
    return NextToken(candidates=top_candidates(probabilities, tokenizer, k))


def per_position(logits: torch.Tensor, input_ids: torch.Tensor, tokenizer,
                 k: int = DEFAULT_TOP_K) -> PerPosition:
    """For every position p < T - 1: the model's top-k for p + 1 and the loss of the actual token.

    logits: (T, V) from a causal LM; input_ids: (T,), the tokens it read.
    """
    _check_k(k)
    logits, input_ids = _check_shapes(logits, input_ids)
    if logits.size(0) < 2:
        raise ValueError("The text has a single token, so there is no next token to compare "
                         "the model's prediction with.")
    return positions_from_scores(position_scores(logits[:-1], input_ids[1:], k), tokenizer)


@dataclass(frozen=True)
class PositionScores:
    """What per_position keeps of some positions' logits, before it names the tokens: small
    tensors, so a long text's logits can be reduced a chunk of positions at a time."""

    start: int  # the first position
    following: torch.Tensor  # (N,) the token that came after each position
    actual_log: torch.Tensor  # (N,) its log-probability
    top_values: torch.Tensor  # (N, k) the log-probabilities of the model's top k
    top_indices: torch.Tensor  # (N, k) their token ids

    @staticmethod
    def join(parts: list[PositionScores]) -> PositionScores:
        """Consecutive chunks of positions as one."""
        for before, after in zip(parts, parts[1:]):
            if after.start != before.start + before.following.numel():
                raise ValueError("position scores must be joined in order, without gaps")
        return PositionScores(parts[0].start, *(torch.cat([getattr(p, name) for p in parts])
                                                for name in ("following", "actual_log",
                                                             "top_values", "top_indices")))


def position_scores(logits: torch.Tensor, following: torch.Tensor, k: int = DEFAULT_TOP_K,
                    start: int = 0) -> PositionScores:
    """The loss and top k of positions start .. start + N - 1 from their logits (N, V), and the
    tokens that came after them, `following` (N,)."""
    _check_k(k)
    log_probabilities = torch.log_softmax(logits.detach().float(), dim=-1)  # (N, V)
    following = following.long()  # (N,)
    actual_log = log_probabilities.gather(1, following[:, None])[:, 0]  # (N,)
    top_values, top_indices = log_probabilities.topk(min(k, logits.size(1)), dim=-1)  # (N, k)
    return PositionScores(start, following, actual_log, top_values, top_indices)


def positions_from_scores(scores: PositionScores, tokenizer) -> PerPosition:
    """Every scored position's prediction, its tokens named (each distinct token once)."""
    following, actual_log = scores.following, scores.actual_log
    top_values, top_indices = scores.top_values, scores.top_indices
    words = _Vocabulary(tokenizer, [*top_indices.flatten().tolist(), *following.tolist()])
    positions = []
    for row in range(following.numel()):
        actual_id = int(following[row])
        candidates = tuple(
            words.candidate(i, math.exp(v))
            for i, v in zip(top_indices[row].tolist(), top_values[row].tolist())
        )
        positions.append(PositionPrediction(
            position=scores.start + row,
            actual=words.candidate(actual_id, math.exp(float(actual_log[row]))),
            loss_nats=-float(actual_log[row]),
            candidates=candidates,
        ))
    return PerPosition(positions=tuple(positions))


def masked_fillers(logits: torch.Tensor, input_ids: torch.Tensor, mask_token_id: int | None,
                   tokenizer, k: int = DEFAULT_TOP_K) -> tuple[MaskFillers, ...]:
    """For every mask token in the input, the model's top-k fillers.

    logits: (T, V) from a masked LM; input_ids: (T,). Raises ValueError with one sentence when
    the model has no mask token or the text holds none.
    """
    _check_k(k)
    logits, input_ids = _check_shapes(logits, input_ids)
    if mask_token_id is None:
        raise ValueError("This model has no mask token, so it cannot fill in a masked word.")
    positions = (input_ids == int(mask_token_id)).nonzero()[:, 0].tolist()  # (M,)
    if not positions:
        mask = getattr(tokenizer, "mask_token", None) or "the mask token"
        raise ValueError(f"The text has no {mask} to fill in: type {mask} where a word should go.")
    probabilities = torch.softmax(logits.detach().float()[positions], dim=-1)  # (M, V)
    return tuple(
        MaskFillers(position=int(p), candidates=top_candidates(row, tokenizer, k))
        for p, row in zip(positions, probabilities)
    )


def _check_k(k: int) -> None:
    if int(k) < 1:
        raise ValueError(f"Ask for at least one candidate, not {k}.")


def _check_shapes(logits: torch.Tensor, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Accept (1, T, V) / (1, T) batches of one as well as (T, V) / (T,)."""
    if logits.dim() == 3 and logits.size(0) == 1:
        logits = logits[0]  # (T, V)
    if input_ids.dim() == 2 and input_ids.size(0) == 1:
        input_ids = input_ids[0]  # (T,)
    if logits.dim() != 2 or input_ids.dim() != 1 or logits.size(0) != input_ids.size(0):
        raise ValueError(f"logits (T, V) and input ids (T,) must match, got "
                         f"{tuple(logits.shape)} and {tuple(input_ids.shape)}")
    return logits, input_ids.long()

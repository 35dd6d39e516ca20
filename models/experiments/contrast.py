"""What the causal interventions read: prompts as the model sees them, and one logit difference.

Activation patching, attribution patching and direct logit attribution all ask how much a part
of the model pushes one token (the answer) above another (the wrong token) at one position: the
logit difference logit[answer] - logit[wrong] (Wang et al. 2022). For a causal language model
the position is the prompt's last token (its output predicts the next one); for a masked
language model it is the mask token. Everything here checks what a user types and refuses it in
one sentence: an empty prompt, two prompts of different lengths, a word that is not one token,
an answer equal to the wrong token, a model without a language-model head.

Dimensions: B batch, T tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.experiments.targets import (NoPrediction, no_prediction_message, prediction_kind,
                                        word_token_ids)
from models.experiments.predictions import Candidate, readable, top_candidates
from models.hooks.capture import forward_inputs
from models.hooks.install import HOOKED
from models.hooks.layouts import stacks
from models.hooks.run import Run, run_model
from models.loading.tokenize import EncodedText


class PromptLengths(ValueError):
    """Two prompts that do not have the same number of tokens; both tokenizations come along so
    a page can show them side by side."""

    def __init__(self, message: str, clean: tuple[str, ...], corrupted: tuple[str, ...]):
        super().__init__(message)
        self.clean = clean
        self.corrupted = corrupted


@dataclass(frozen=True)
class Prompt:
    """One prompt as the model reads it: its tokens and the model's inputs (batch of one)."""

    encoded: EncodedText
    inputs: dict[str, torch.Tensor]

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.encoded.tokens

    @property
    def num_tokens(self) -> int:
        return self.encoded.input_ids.size(1)

    def batched(self, model: torch.nn.Module, batch: int, last_only: bool = False) -> dict:
        """The model's keyword arguments for `batch` copies of the prompt; `last_only` keeps only
        the last position's logits (a causal LM's prediction)."""
        inputs = {name: value if value is None else value.expand(batch, *value.shape[1:])
                  for name, value in self.inputs.items()}
        if last_only:
            inputs["logits_to_keep"] = 1
        return forward_inputs(model, inputs)


@dataclass(frozen=True)
class PromptPair:
    """A clean and a corrupted prompt with the same number of tokens."""

    clean: Prompt
    corrupted: Prompt

    @property
    def num_tokens(self) -> int:
        return self.clean.num_tokens


@dataclass(frozen=True)
class LogitDifference:
    """logit[answer] - logit[wrong] at `position`: what every intervention here measures."""

    position: int
    answer: int  # token ids
    wrong: int
    answer_text: str  # as they read in text (" Mary")
    wrong_text: str

    def of(self, logits: torch.Tensor) -> torch.Tensor:
        """(B,) the difference in each batch item, from logits (B, T, V), or (B, 1, V) when a
        causal LM kept its last position only."""
        row = logits[:, 0] if logits.size(1) == 1 else logits[:, self.position]  # (B, V)
        return row[:, self.answer].double() - row[:, self.wrong].double()


def language_model(loaded) -> None:
    """Refuse, in one sentence, a model the interventions cannot read a prediction from."""
    model = loaded.model
    if not getattr(model, HOOKED, False):
        raise ValueError(f"{loaded.label} has no hook points: load it through the app's loaders.")
    if prediction_kind(model, loaded.tokenizer, loaded.causal) is None:
        raise NoPrediction(no_prediction_message(loaded.label))
    if len(stacks(model)) != 1:
        raise ValueError(f"{loaded.label} is an encoder-decoder: these experiments read one "
                         "stack of layers, a causal or masked language model.")


def prompt(loaded, text: str, role: str = "prompt") -> Prompt:
    """`text` as the model reads it; `role` names it in the sentence an empty or too long
    prompt gives ("clean prompt")."""
    if not text or not text.strip():
        raise ValueError(f"The {role} is empty: type a prompt for the model to continue.")
    encoded, inputs = loaded.encode(text)
    if encoded.dropped_tokens:
        raise ValueError(f"The {role} is {encoded.dropped_tokens} tokens longer than the "
                         f"{loaded.max_tokens} {loaded.label} reads here: shorten it.")
    return Prompt(encoded, inputs)


def prompt_pair(loaded, clean: str, corrupted: str) -> PromptPair:
    """The two prompts of a patching experiment, refused unless they have as many tokens."""
    first = prompt(loaded, clean, "clean prompt")
    second = prompt(loaded, corrupted, "corrupted prompt")
    if first.num_tokens != second.num_tokens:
        gap = second.num_tokens - first.num_tokens
        more = "more" if gap > 0 else "fewer"
        raise PromptLengths(
            f"The corrupted prompt has {abs(gap)} token{'s' if abs(gap) != 1 else ''} {more} "
            f"than the clean one ({second.num_tokens} against {first.num_tokens}): patching "
            "puts the clean run's values back position by position, so both need the same "
            "number of tokens.", first.tokens, second.tokens)
    if first.num_tokens < 2 and loaded.causal:
        raise ValueError("The prompts are a single token each: there is no earlier position "
                         "whose patching could change the prediction.")
    return PromptPair(first, second)


def one_token(tokenizer, text: str, role: str = "answer") -> int:
    """The token id of `text` as it would follow the prompt; a text that is more than one token
    is refused with the pieces it is."""
    if not text.strip():
        raise ValueError(f"The {role} is empty: type the token to read.")
    ids = word_token_ids(tokenizer, text)
    if len(ids) != 1:
        pieces = " + ".join(repr(readable(tokenizer, i)) for i in ids)
        raise ValueError(f"The {role} '{text}' is {len(ids)} tokens for this model ({pieces}), "
                         "not one: type a single token, such as its first piece.")
    return int(ids[0])


def read_position(loaded, given: Prompt) -> int:
    """Where the prediction is read: a causal LM's last token, a masked LM's mask token."""
    if loaded.causal:
        return given.num_tokens - 1
    mask_id = getattr(loaded.tokenizer, "mask_token_id", None)
    found = (given.encoded.input_ids[0] == mask_id).nonzero()[:, 0].tolist() \
        if mask_id is not None else []
    if not found:
        mask = getattr(loaded.tokenizer, "mask_token", None) or "the mask token"
        raise ValueError(f"The prompt has no {mask}: a masked language model predicts the "
                         f"hidden word, so type {mask} where the answer goes.")
    return int(found[0])


def logit_difference(loaded, given: Prompt, answer: str, wrong: str,
                     other: Prompt | None = None) -> LogitDifference:
    """The metric for `given` (and `other`, the corrupted prompt, whose mask must sit at the
    same position): the answer's logit minus the wrong token's."""
    position = read_position(loaded, given)
    if other is not None and not loaded.causal and read_position(loaded, other) != position:
        raise ValueError(f"The mask is at position {position} of the clean prompt and "
                         f"{read_position(loaded, other)} of the corrupted one: put it at the "
                         "same place in both.")
    answer_id = one_token(loaded.tokenizer, answer, "answer")
    wrong_id = one_token(loaded.tokenizer, wrong, "wrong token")
    if answer_id == wrong_id:
        raise ValueError(f"The answer and the wrong token are the same token "
                         f"('{readable(loaded.tokenizer, answer_id)}'), whose logit difference "
                         "with itself is always 0: choose two different tokens.")
    return LogitDifference(position, answer_id, wrong_id, readable(loaded.tokenizer, answer_id),
                           readable(loaded.tokenizer, wrong_id))


@dataclass(frozen=True)
class Experiment:
    """What a patching experiment compares: two prompts and the logit difference read."""

    pair: PromptPair
    difference: LogitDifference


def experiment(loaded, clean: str, corrupted: str, answer: str, wrong: str) -> Experiment:
    """Everything a user types for patching, checked in one sentence each: a language model,
    two prompts as long as each other, two different single tokens."""
    language_model(loaded)
    pair = prompt_pair(loaded, clean, corrupted)
    return Experiment(pair, logit_difference(loaded, pair.clean, answer, wrong, pair.corrupted))


def token_texts(loaded, given: Prompt) -> tuple[str, ...]:
    """The prompt's tokens as they read in text (" Mary" for "ĠMary")."""
    return tuple(readable(loaded.tokenizer, int(i)) for i in given.encoded.input_ids[0])


def top_predictions(loaded, given: Prompt, k: int) -> tuple[Candidate, ...]:
    """The model's `k` most probable tokens at the prompt's read position (its next token, or
    its mask's filler): what to choose an answer and a wrong token from."""
    position = read_position(loaded, given)
    output = run_model(loaded.model, given.batched(loaded.model, 1), Run())
    row = torch.softmax(output.logits[0, position].float(), dim=-1)  # (V,)
    return top_candidates(row, loaded.tokenizer, k)

"""What a prediction is read on: one input prepared for a model, and the target, a token (or a
fine-tuned classifier's class) and the position whose output predicts it.

For a causal LM the last position predicts the next token; for a masked LM the masked position
predicts the hidden word. For a fine-tuned classifier (models.experiments.classifier) the target
is one class: its logits (B, C) are read as one position whose "vocabulary" is the classes, and
`ClassLabels` stands in for the tokenizer when an outcome names its top classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn

from models.experiments import predictions
from models.experiments.classifier import SequenceClassifier
from models.loading.tokenize import EncodedText, encode
from models.scratch.encoder import Encoder

NEXT_TOKEN, MASKED_WORD, CLASS_PROBABILITY = "next token", "masked word", "class probability"


class NoPrediction(ValueError):
    """The model has no prediction head to read a change from; the message is one sentence."""


@dataclass(frozen=True)
class PreparedInput:
    """The tokens of one input and the model inputs built from them (batch of one)."""

    encoded: EncodedText
    inputs: dict[str, torch.Tensor]
    causal: bool
    source: str

    @property
    def num_tokens(self) -> int:
        return self.encoded.input_ids.size(1)


@dataclass(frozen=True)
class Target:
    """The token whose log-probability is read, and the position whose output predicts it."""

    position: int
    token_id: int
    text: str  # as it reads in the text (" Paris")


class ClassLabels:
    """A classifier's classes in the place of a tokenizer: output i reads as the i-th name."""

    def __init__(self, names: Sequence[str]):
        if len(names) < 2:
            raise ValueError("A classifier needs at least two class names.")
        self.names = tuple(str(name) for name in names)

    def decode(self, ids, **_) -> str:
        return "".join(self.names[int(i)] for i in ids)

    def convert_ids_to_tokens(self, ids):
        return self.names[int(ids)] if isinstance(ids, int) else [self.names[int(i)] for i in ids]


def class_target(labels: ClassLabels, index: int) -> Target:
    """Class `index` of a classifier as the target (its logits are one position: 0)."""
    if not 0 <= index < len(labels.names):
        raise ValueError(f"Class {index} is not one of the classifier's {len(labels.names)}.")
    return Target(0, int(index), labels.names[index])


def prediction_kind(model: nn.Module, tokenizer, causal: bool) -> str | None:
    """NEXT_TOKEN for a causal LM, MASKED_WORD for a masked LM, CLASS_PROBABILITY for a
    fine-tuned classifier, None without a prediction head."""
    if isinstance(model, SequenceClassifier):
        return CLASS_PROBABILITY
    if isinstance(model, Encoder):
        return None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        return None
    if causal:
        return NEXT_TOKEN
    return MASKED_WORD if getattr(tokenizer, "mask_token_id", None) is not None else None


def no_prediction_message(label: str) -> str:
    return (f"{label} has no prediction head (it outputs vectors, not token probabilities), so "
            "there is no prediction to change: choose the causal decoder in the sidebar, or load "
            "a masked language model.")


def prepare(model: nn.Module, tokenizer, max_tokens: int, text: str, causal: bool,
            source: str, pair: str | None = None) -> PreparedInput:
    """Text -> the model's inputs, the same way the app's record path encodes it."""
    if causal and pair and pair.strip():
        pair = f" {pair.strip()}"  # a second sentence continues the first after a space
    encoded = encode(tokenizer, text, pair, max_tokens)
    inputs = ({"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
              if causal else encoded.model_inputs())
    if isinstance(model, (Encoder, SequenceClassifier)):
        inputs.setdefault("token_type_ids", None)
    return PreparedInput(encoded, inputs, causal, source)


def with_mask(prepared: PreparedInput, tokenizer, position: int) -> tuple[PreparedInput, Target]:
    """For a masked LM: the input with `position` replaced by the mask token, and the hidden
    word there as the target."""
    if not 0 <= position < prepared.num_tokens:
        raise ValueError(f"Position {position} is outside the {prepared.num_tokens} tokens.")
    if position in prepared.encoded.special_positions:
        raise ValueError("A special token cannot be masked: choose a word of the sentence.")
    original = int(prepared.encoded.input_ids[0, position])
    input_ids = prepared.encoded.input_ids.clone()
    input_ids[0, position] = tokenizer.mask_token_id
    tokens = list(prepared.encoded.tokens)
    tokens[position] = tokenizer.mask_token
    encoded = replace(prepared.encoded, input_ids=input_ids, tokens=tuple(tokens))
    inputs = dict(prepared.inputs, input_ids=input_ids)
    target = Target(position, original, predictions.readable(tokenizer, original))
    return PreparedInput(encoded, inputs, prepared.causal, prepared.source), target


def next_token_target(prepared: PreparedInput, tokenizer, token_id: int) -> Target:
    """For a causal LM: `token_id` as the token after the text (read at the last position)."""
    return Target(prepared.num_tokens - 1, int(token_id), predictions.readable(tokenizer, token_id))


def word_token_ids(tokenizer, word: str) -> list[int]:
    """The tokens of `word` as it would follow a text (a leading space is added when the
    tokenizer marks word starts, as byte-level BPE does)."""
    if not word.strip():
        raise ValueError("Type a word for the model to predict.")
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    spaced = tokenizer(" " + word.strip(), add_special_tokens=False)["input_ids"]
    if not word.startswith(" ") and spaced and len(spaced) <= len(ids):
        ids = spaced  # " Paris" is one token where "Paris" may be two
    if not ids:
        raise ValueError(f"The tokenizer turns '{word}' into no token at all.")
    return list(ids)


def target_from_text(prepared: PreparedInput, tokenizer, word: str) -> Target:
    """The first token of `word` as the next token (word_token_ids)."""
    return next_token_target(prepared, tokenizer, word_token_ids(tokenizer, word)[0])

"""Inside one layer of the running from-scratch encoder: scores, mask and weights, step by step.

The encoder hands back only the weights (after the softmax). To show a learner the steps before
them, this module recomputes a layer's raw scores QK^T / sqrt(Dh) from the hidden state that
layer actually received, applies the mask the encoder used, and checks that the softmax of the
result is the weights the encoder returned: the figures show the running model, not a copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from models.encoder import Encoder, EncoderOutput
from models.record import AttentionRecord
from models.scratch import record_from_output
from models.tokenize import encode

# The recomputed weights must equal the encoder's own to float32 rounding.
AGREEMENT_TOLERANCE = 1e-5


class InspectionMismatch(RuntimeError):
    """The recomputed weights differ from the encoder's: the inspection no longer matches the model."""


@dataclass(frozen=True)
class LayerInside:
    """One layer's attention, before and after the softmax, for every head."""

    scores: torch.Tensor  # (B, H, Q, K): QK^T / sqrt(Dh), before any mask
    mask: torch.Tensor  # bool (B, 1, Q, K), True = may attend
    weights: torch.Tensor  # (B, H, Q, K): softmax of the masked scores
    largest_difference: float  # max |weights - the encoder's own weights|


def inspect_layer(encoder: Encoder, output: EncoderOutput, layer: int) -> LayerInside:
    """Recompute `layer`'s scores and weights from the hidden state it received in `output`.

    Pre-norm layers normalise their input before projecting it (post-norm layers do not), so the
    same normalisation is applied here. Raises InspectionMismatch if the weights disagree with
    `output.attentions[layer]`.
    """
    if not 0 <= layer < len(encoder.layers):
        raise ValueError(f"layer must be in [0, {len(encoder.layers)}), got {layer}")
    block = encoder.layers[layer]
    hidden = output.hidden_states[layer]  # (B, T, D): the input of this layer
    batch, tokens, _ = hidden.shape
    with torch.inference_mode():
        attention_input = block.attention_norm(hidden) if block.pre_norm else hidden
        query, key, _ = block.attention.project(attention_input)  # (B, H, T, Dh) each
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, Q, K)
        mask = output.mask
        if mask is None:
            mask = torch.ones(batch, 1, tokens, tokens, dtype=torch.bool)  # (B, 1, Q, K)
        masked = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, Q, K)
        weights = F.softmax(masked, dim=-1)  # (B, H, Q, K)
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    difference = float((weights - output.attentions[layer]).abs().max())
    if difference > AGREEMENT_TOLERANCE:
        raise InspectionMismatch(
            f"layer {layer}: recomputed weights differ from the encoder's by {difference:.2e}"
        )
    return LayerInside(scores, mask, weights, difference)


@dataclass(frozen=True)
class MaskSteps:
    """Every layer's and head's path from scores to weights for one input, as numpy arrays.

    record: the encoder's own weights (what every other view shows).
    scores: (L, H, Q, K) raw QK^T / sqrt(Dh), before the mask.
    mask: (Q, K) bool, True = may attend (the same for every layer and head).
    largest_difference: max over layers of |recomputed weights - the encoder's weights|.
    head_size: Dh, the dimension the scores are divided by the square root of.
    """

    record: AttentionRecord
    scores: np.ndarray
    mask: np.ndarray
    largest_difference: float
    head_size: int

    def head_scores(self, layer: int, head: int) -> np.ndarray:
        return self.scores[layer, head]


def mask_steps(encoder: Encoder, tokenizer, text: str, text_pair: str | None,
               source: str) -> MaskSteps:
    """Run `text` through `encoder` and recompute every layer's scores alongside its weights."""
    encoded = encode(tokenizer, text, text_pair, encoder.config.max_positions)
    with torch.inference_mode():
        output = encoder(encoded.input_ids, encoded.token_type_ids, encoded.attention_mask)
    inside = [inspect_layer(encoder, output, layer) for layer in range(len(encoder.layers))]
    scores = torch.stack([part.scores[0] for part in inside])  # (L, H, Q, K)
    record = record_from_output(encoder, encoded, output, source)
    return MaskSteps(
        record=record,
        scores=scores.numpy(),
        mask=inside[0].mask[0, 0].numpy(),  # (Q, K)
        largest_difference=max(part.largest_difference for part in inside),
        head_size=encoder.config.head_size,
    )

"""What the long-input tests share: the maps of the model's own forward (output_attentions) to
compare streamed and on-demand maps with."""

from __future__ import annotations

import numpy as np
import torch


def full_attentions(runner, encoded) -> list[np.ndarray]:
    """Each layer's (H, Q, K) maps from the model's own forward with output_attentions."""
    inputs = runner.model_inputs(encoded)
    extra = {"use_cache": False} if runner.causal else {}
    with torch.inference_mode():
        output = runner.model(**inputs, output_attentions=True, **extra)
    return [layer[0].numpy() for layer in output.attentions]


def full_record(runner, text: str):
    """The text's AttentionRecord from the model's own forward with output_attentions (every
    token the long limit reads; for a decoder text longer than its full trace)."""
    from models.hooks.record import AttentionRecord
    from models.hooks.streaming import prepare

    encoded, _ = prepare(runner, text, None)
    assert len(encoded.tokens) > runner.max_tokens
    return AttentionRecord(encoded.tokens, source=runner.label, masks=("causal",),
                           special_positions=encoded.special_positions,
                           layers=tuple(full_attentions(runner, encoded)))

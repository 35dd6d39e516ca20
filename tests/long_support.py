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

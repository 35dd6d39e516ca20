"""Reference numbers for tests: a Hugging Face model's own attentions from a plain forward call,
outside the app's capture and trace, so the app's path is checked against something independent."""

from __future__ import annotations

import numpy as np
import torch

from models.loading.pretrained import LoadedModel
from models.loading.tokenize import encode


def reference_attentions(loaded: LoadedModel, text: str, pair: str | None = None) -> np.ndarray:
    """(L, H, Q, K) float32: `model(**inputs, output_attentions=True)` for batch item 0."""
    encoded = encode(loaded.tokenizer, text, pair, loaded.max_tokens)
    with torch.inference_mode():
        output = loaded.model(**encoded.model_inputs(), output_attentions=True)
    return torch.stack([layer[0] for layer in output.attentions]).float().numpy()


def encoder_record(loaded: LoadedModel, text: str, pair: str | None = None):
    """The app's one run path (models/loading/source.py) for a loaded pretrained encoder: its record."""
    from models.loading.kinds import PRETRAINED
    from models.loading.source import ModelSource

    runner = ModelSource(PRETRAINED, loaded.name).load(pretrained=lambda name: loaded)
    return runner.run(text, pair).record


def decoder_record(loaded: LoadedModel, text: str, pair: str | None = None):
    """The app's one run path (models/loading/source.py) for a loaded causal decoder: its record."""
    from models.loading.kinds import DECODER
    from models.loading.source import ModelSource

    runner = ModelSource(DECODER, loaded.name).load(decoder=lambda name: loaded)
    return runner.run(text, pair).record

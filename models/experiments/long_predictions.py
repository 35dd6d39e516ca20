"""What a causal LM predicts over a long input, from its last layer's kept input.

A short input's predictions come from the logits of the full forward (models/experiments/predictions.py).
A long input (up to models.limits.LONG_TOKENS) is read by a streamed forward that keeps each
layer's input on disk (models/hooks/streaming.py, LayerInputs). From the last layer's input, the base
model runs again with the layers before it skipped (each passes its input through, and the last
layer is handed the kept input): the last layer, with the model's own eager attention, and the
final norm give the hidden states the full forward gave its head. The head then runs on a chunk
of positions at a time, each chunk reduced at once to its losses and top candidates, so the
(T, V) logits never exist whole (SmolLM2 at 4,096 tokens: 800 MB).

Dimensions: T tokens, D model width, V vocabulary, C positions of a chunk, k candidates kept.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from models.experiments.predictions import (DEFAULT_TOP_K, PositionScores, next_token, position_scores,
                                positions_from_scores)
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.layer_inputs import LayerInputs
from models.hooks.streaming import run_from_input
from models.loading.tokenize import EncodedText
from models.hooks.trace import Predictions

CHUNK_POSITIONS = 256  # the head's logits for 256 positions: 50 MB on SmolLM2


def long_predictions(loaded, encoded: EncodedText, layer_inputs: LayerInputs,
                     k: int = DEFAULT_TOP_K, chunk: int = CHUNK_POSITIONS,
                     progress: Callable[[int, int], None] | None = None) -> Predictions:
    """The next-token candidates after the text and every position's prediction against the
    token that came: the same values `Predictions` holds for a short input's trace, from the
    last layer's kept input. `progress(done, total)` is called after the last layer and after
    each chunk of positions."""
    if chunk < 1:
        raise ValueError(f"a chunk needs at least one position, not {chunk}")
    head = language_model_head(loaded)
    hidden = final_hidden(loaded, encoded, layer_inputs)  # (T, D)
    ids = encoded.input_ids[0]  # (T,)
    count = hidden.size(0)
    bounds = chunk_bounds(count, chunk)
    total = len(bounds)  # the last layer, then each chunk
    if progress is not None:
        progress(1, total)
    parts: list[PositionScores] = []
    with torch.inference_mode():
        for done, (start, stop) in enumerate(zip(bounds, bounds[1:]), 2):
            logits = _logits(loaded.model, head, hidden[start:stop])  # (C, V)
            scored = min(stop, count - 1) - start  # the text's last position has no next token
            if scored > 0:
                parts.append(position_scores(logits[:scored], ids[start + 1:start + scored + 1],
                                             k, start))
            if stop == count:
                last = logits[-1]  # (V,)
            del logits
            if progress is not None:
                progress(done, total)
    return Predictions(
        next_token=next_token(last, loaded.tokenizer, k),
        positions=positions_from_scores(PositionScores.join(parts), loaded.tokenizer)
        if parts else None)


def chunk_bounds(count: int, chunk: int) -> list[int]:
    """Where chunks of at most `chunk` positions start, and `count` at the end: as few chunks as
    that allows, of nearly equal sizes (no chunk of a position or two, which the head's matrix
    product would compute with another kernel than the full forward's, rounding differently)."""
    pieces = -(-count // chunk)  # ceil
    return [round(i * count / pieces) for i in range(pieces + 1)]


def language_model_head(loaded) -> torch.nn.Module:
    """The causal LM's head (hidden states -> logits); ValueError when the model has none."""
    head = loaded.model.get_output_embeddings() if loaded.causal else None
    if head is None:
        raise ValueError(f"{loaded.label} is not a causal language model with a head: it makes "
                         "no next-token prediction")
    return head


def final_hidden(loaded, encoded: EncodedText, layer_inputs: LayerInputs) -> torch.Tensor:
    """(T, D) what the full forward hands its head: the last layer's output after the final
    norm, computed from the last layer's kept input."""
    last = num_layers(loaded.model) - 1
    run, _ = run_from_input(loaded, encoded, last, layer_inputs, cache={points.FINAL})
    return run[points.FINAL][0]  # (T, D)


def _logits(model: torch.nn.Module, head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """(C, V) the head's logits for some positions' final hidden states (C, D), as the model's
    own forward computes them (with a final soft cap where the model has one)."""
    logits = head(hidden)  # (C, V)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits

"""The logit lens: what each layer's residual stream would predict if the model stopped there.

Each layer's input (and the last layer's output) is read by the model's own final norm and
unembedding (nostalgebraist 2020): a token the model will predict often appears in the middle
layers already, and the layers after only sharpen it. The stream is put in place of the last
layer's output (an edit of its `resid_post`), so the model's own code reads it: its final norm,
a masked LM's head transform, its unembedding, whatever the family does there. The last row is
therefore the model's own prediction.

Rows: "embeddings" (the input of layer 0), then "layer l" (its output) for every layer.

Dimensions: R rows (L + 1), T tokens, D model width, V vocabulary, k tokens kept per cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.experiments.contrast import (Prompt, language_model, one_token, prompt,
                                         read_position)
from models.experiments.predictions import readable
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.run import LayerPlan, Run, run_model
from models.limits import LENS_CHUNK_BYTES

TOP_K = 5
FLOAT_BYTES = 4
COPIES_PER_ROW = 3  # a row's logits, their softmax and one comparison are alive at once


@dataclass(frozen=True)
class LogitLens:
    """Every row's top tokens at every position, and the probability and rank of two tokens:
    the one the model finally predicts at each position, and a chosen one."""

    tokens: tuple[str, ...]  # (T,) the prompt's
    rows: tuple[str, ...]  # (R,) "embeddings", "layer 0", ...
    position: int  # where the prediction is read (the last token; a masked LM's mask)
    top_ids: np.ndarray  # (R, T, k)
    top_probabilities: np.ndarray  # (R, T, k)
    final_ids: np.ndarray  # (T,) the model's own top token at each position
    final_probability: np.ndarray  # (R, T) each row's probability of it
    chosen_id: int
    chosen_probability: np.ndarray  # (R, T)
    chosen_rank: np.ndarray  # (R, T), 1 = the row's most probable token
    words: dict[int, str]  # every token id above, as it reads in text

    @property
    def chosen_text(self) -> str:
        return self.words[self.chosen_id]

    def top_texts(self, row: int, position: int) -> tuple[str, ...]:
        return tuple(self.words[int(i)] for i in self.top_ids[row, position])

    def text_grid(self) -> tuple[tuple[tuple[str, ...], ...], ...]:
        """(R, T, k) every cell's top tokens as they read in text."""
        return tuple(tuple(self.top_texts(row, position) for position in range(len(self.tokens)))
                     for row in range(len(self.rows)))


def _residuals(loaded, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(R, T, D) every layer's input and the last one's output, and the logits (T, V)."""
    layers = num_layers(loaded.model)
    names = [*(points.resid_pre(layer) for layer in range(layers)), points.resid_post(layers - 1)]
    run = Run(cache=names)
    output = run_model(loaded.model, inputs, run)
    return torch.stack([run[name][0] for name in names]), output.logits[0]


def readout(loaded, given: Prompt, streams: torch.Tensor) -> torch.Tensor:
    """(n, T, V) the logits the model's final norm and unembedding give for each of `streams`
    (n, T, D) of the prompt `given`: the last layer runs (its output is then replaced), the
    layers before it do not."""
    last = num_layers(loaded.model) - 1
    batch = given.batched(loaded.model, streams.size(0))
    replace = {points.resid_post(last): lambda value, name: streams.to(value.dtype)}
    output = run_model(loaded.model, batch, Run(edits=replace, plan=LayerPlan(start=last)))
    return output.logits


def logit_lens(loaded, text: str, chosen: str | None = None, k: int = TOP_K) -> LogitLens:
    """The lens of `text` on `loaded` (a causal or masked LM). `chosen`: the token whose
    probability and rank are followed (default: the model's own prediction at the read
    position)."""
    language_model(loaded)
    given = prompt(loaded, text)
    position = read_position(loaded, given)
    streams, logits = _residuals(loaded, given.batched(loaded.model, 1))
    rows, tokens, vocabulary = streams.size(0), given.num_tokens, logits.size(-1)
    final_ids = logits.float().argmax(dim=-1)  # (T,)
    chosen_id = one_token(loaded.tokenizer, chosen, "chosen token") if chosen \
        else int(final_ids[position])
    chunk = max(1, LENS_CHUNK_BYTES // (COPIES_PER_ROW * FLOAT_BYTES * tokens * vocabulary))
    top_ids = torch.empty(rows, tokens, min(k, vocabulary), dtype=torch.long)
    top_probabilities = torch.empty(rows, tokens, min(k, vocabulary))
    final_probability = torch.empty(rows, tokens)
    chosen_probability = torch.empty(rows, tokens)
    chosen_rank = torch.empty(rows, tokens, dtype=torch.long)
    for start in range(0, rows, chunk):
        part = slice(start, min(start + chunk, rows))
        row_logits = readout(loaded, given, streams[part]).float()  # (n, T, V)
        probabilities = torch.softmax(row_logits, dim=-1)  # (n, T, V)
        top_probabilities[part], top_ids[part] = probabilities.topk(min(k, vocabulary), dim=-1)
        final_probability[part] = probabilities.gather(
            -1, final_ids.expand(probabilities.size(0), tokens)[..., None])[..., 0]
        chosen_probability[part] = probabilities[..., chosen_id]
        chosen_logit = row_logits[..., chosen_id:chosen_id + 1]  # (n, T, 1)
        chosen_rank[part] = 1 + (row_logits > chosen_logit).sum(dim=-1)
    ids = {*top_ids.flatten().tolist(), *final_ids.tolist(), chosen_id}
    return LogitLens(
        tokens=given.tokens,
        rows=("embeddings", *(f"layer {layer}" for layer in range(rows - 1))),
        position=position, top_ids=top_ids.numpy(), top_probabilities=top_probabilities.numpy(),
        final_ids=final_ids.numpy(), final_probability=final_probability.numpy(),
        chosen_id=chosen_id, chosen_probability=chosen_probability.numpy(),
        chosen_rank=chosen_rank.numpy(),
        words={int(i): readable(loaded.tokenizer, int(i)) for i in sorted(ids)})

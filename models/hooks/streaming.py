"""Long inputs: attention streamed layer by layer, and any layer's exact maps on demand.

A full record holds L x H x T x T floats: SmolLM2 (30 layers x 9 heads) at 4,096 tokens would
hold 18 GB. Here one forward hands each layer's (H, T, T) maps to a reducer as soon as the layer
has computed them and lets them go, so a long input keeps what is linear in its length (tokens,
ids) plus whatever small reductions the views ask for (pooled thumbnails, per-head numbers).
A layer's exact maps come back on demand from a forward that stops right after that layer: the
same eager arithmetic as the full pass (the capture calls the model's own attention function),
so they are the model's numbers bit for bit, for the price of the layers up to it.

Dimensions: L layers, H heads, T tokens, Q/K query/key positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import torch

from models.analysis.norms import value_norms
from models.hooks.layer_inputs import LayerInputs
from models.hooks.capture import LayerCapture, forward_inputs, num_layers, run_streamed
from models.hooks.run import LayerPlan, Run, run_model
from models.limits import LONG_TOKENS
from models.loading.tokenize import EncodedText

Summary = TypeVar("Summary")


@dataclass(frozen=True)
class Streamed(Generic[Summary]):
    """One long input's tokens and one reduction per layer, from one streamed forward."""

    encoded: EncodedText
    causal: bool
    num_heads: int
    summaries: tuple[Summary, ...]  # one per layer
    layer_inputs: LayerInputs | None = None  # on disk, when the stream was asked to keep them

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.encoded.tokens

    @property
    def num_layers(self) -> int:
        return len(self.summaries)

    @property
    def num_tokens(self) -> int:
        return len(self.encoded.tokens)


def long_limit(loaded) -> int:
    """How many tokens a long input may have on this model: its own position limit, at most
    LONG_TOKENS (the from-scratch encoder and encoders keep their own, smaller limit)."""
    own = getattr(loaded.config, "max_position_embeddings", None) or \
        getattr(loaded.config, "max_positions", None) or \
        getattr(loaded.config, "n_positions", None) or LONG_TOKENS
    return int(min(own, LONG_TOKENS))


def prepare(loaded, text: str, pair: str | None = None) -> tuple[EncodedText, dict]:
    """The text's tokens and the model's inputs, cut to `long_limit` instead of the full-record
    limit."""
    return loaded.encode(text, pair, long_limit(loaded))


def stream(loaded, text: str, pair: str | None, reduce: Callable[..., Summary],
           keep_inputs: Path | None = None, with_norms: bool = False) -> Streamed[Summary]:
    """One forward; `reduce(layer, maps)` sees each layer's (H, Q, K) float32 maps (read-only, only
    valid during the call) and what it returns is all that is kept in memory. With
    `keep_inputs`, each layer's input is written to that folder (see LayerInputs and
    exact_head). With `with_norms`, `reduce(layer, maps, norms)` also gets the layer's value
    norms ||v_j W_O^h|| (H, K) (None where the model's output projection cannot be read)."""
    encoded, inputs = prepare(loaded, text, pair)
    kept = None if keep_inputs is None else LayerInputs(keep_inputs)
    summaries: list[Summary] = []
    heads = []

    def sink(index: int, captured: LayerCapture) -> None:
        maps = _item_zero(captured.weights)
        maps.setflags(write=False)
        heads.append(maps.shape[0])
        if not with_norms:
            summaries.append(reduce(index, maps))
            return
        norms = None if captured.output_weight is None else \
            value_norms(captured)[0].float().numpy()  # (H, K)
        summaries.append(reduce(index, maps, norms))

    run_streamed(loaded.model, inputs, sink, keep=None if kept is None else kept.save)
    return Streamed(encoded=encoded, causal=loaded.causal, num_heads=heads[0],
                    summaries=tuple(summaries), layer_inputs=kept)


def exact_head(loaded, encoded: EncodedText, layer: int, head: int,
               layer_inputs: LayerInputs) -> np.ndarray:
    """(Q, K) float32: one head's exact map, from the layer's kept input. The layers before it
    are skipped (their output is the kept input), and the layer computes only the heads that
    share this head's keys and values, with the model's own eager attention: the full forward's
    numbers for the price of part of one layer."""
    weights = layer_from_input(loaded, encoded, layer, layer_inputs, group_of=head).weights[0]
    group = weights.size(0)  # (G, Q, K): the heads of the group
    return weights[head % group].float().numpy().copy()


def layer_from_input(loaded, encoded: EncodedText, layer: int, layer_inputs: LayerInputs,
                     group_of: int | None = None, rows: slice | None = None) -> LayerCapture:
    """Layer `layer` captured from its kept input: the layers before it are skipped (each
    passes its input through, and a pre-hook puts the kept input into the layer), and the
    forward stops once the layer is recorded. `group_of` and `rows` are run_streamed's."""
    _check_kept(loaded, layer, layer_inputs)
    kept: list[LayerCapture] = []
    run_streamed(loaded.model, loaded.model_inputs(encoded),
                 lambda index, captured: kept.append(captured), stop_after=layer,
                 group_of=group_of, rows=rows, start=layer, start_input=layer_inputs.load(layer))
    return kept[0]


def _check_kept(loaded, layer: int, layer_inputs: LayerInputs) -> None:
    count = num_layers(loaded.model)
    if not 0 <= layer < count:
        raise ValueError(f"layer {layer} does not exist: the model has {count} layers")
    if not layer_inputs.has(layer):
        raise ValueError(f"layer {layer}'s input was not kept in {layer_inputs.folder}")


def run_from_input(loaded, encoded: EncodedText, layer: int, layer_inputs: LayerInputs,
                   cache=(), stop_at: str | None = None):
    """The forward from layer `layer`'s kept input on (the layers before it skipped), caching
    the points named; returns the run (its `cache`) and the base model's output."""
    _check_kept(loaded, layer, layer_inputs)
    run = Run(cache=cache, stop_at=stop_at,
              plan=LayerPlan(start=layer, start_input=layer_inputs.load(layer)))
    base = getattr(loaded.model, "base_model", loaded.model)
    output = run_model(base, forward_inputs(loaded.model, loaded.model_inputs(encoded)), run)
    return run, output


def exact_layer(loaded, encoded: EncodedText, layer: int, fast: bool = False) -> np.ndarray:
    """(H, Q, K) float32: layer `layer`'s maps for an input from `prepare`, from a forward that
    stops after that layer. The earlier layers run the model's eager attention (so the maps are
    bit for bit the full forward's), or with `fast` its fused attention (several times faster on
    long inputs; the maps then differ from the full forward's by float rounding)."""
    inputs = loaded.model_inputs(encoded)
    kept: dict[int, np.ndarray] = {}

    def sink(index: int, captured: LayerCapture) -> None:
        if index == layer:
            kept[index] = _item_zero(captured.weights)

    count = run_streamed(loaded.model, inputs, sink, stop_after=layer,
                         fast_until=layer if fast else 0)
    if layer not in kept:
        raise ValueError(f"layer {layer} does not exist: the model has {count} layers")
    return kept[layer]


def _item_zero(batch: torch.Tensor) -> np.ndarray:
    """Batch item 0 as float32 numpy, sharing the tensor's memory where it can."""
    item = batch[0]
    return (item if item.dtype == torch.float32 else item.float()).numpy()

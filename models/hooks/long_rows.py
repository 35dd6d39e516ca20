"""Some query rows of one layer of a long input, exactly, and a window of every layer's maps.

A long input's streamed forward keeps each layer's input on disk (models/hooks/streaming.py,
LayerInputs). From that input one layer runs again alone (the layers before it are skipped) and
computes its attention for a few query positions only: the queries, keys, values, weights and
head outputs the full forward computed for those rows, with the model's own eager arithmetic,
for the price of the layer's projections over the input. That is what the row arithmetic and a
bertviz view of a window of a long input need, without a (T, T) map per head.

Dimensions: L layers, H query heads, Hkv key/value heads, T tokens, W rows asked for (query
positions), K key positions (= T), Dh head width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from models.hooks.capture import num_layers
from models.hooks.layer_inputs import LayerInputs
from models.hooks.streaming import layer_from_input
from models.loading.tokenize import EncodedText


@dataclass(frozen=True)
class ExactRows:
    """Query positions `rows` of one layer, as the full forward computed them. Every array is
    head first, like the Trace's: query head h reads key/value head h // kv_group."""

    layer: int
    rows: range  # the query positions, contiguous
    weights: np.ndarray  # (H, W, K) float32, after the softmax
    query: np.ndarray  # (H, W, Dh), after the rotary rotation where the model has one
    key: np.ndarray  # (Hkv, K, Dh), likewise
    value: np.ndarray  # (Hkv, K, Dh)
    context: np.ndarray  # (H, W, Dh) each head's weighted sum of values, as the model computed it
    scaling: float  # what q.k was multiplied by before the softmax
    allowed: np.ndarray  # (W, K) bool, True = the query may attend to the key
    rotary: bool = False

    def __post_init__(self) -> None:
        heads, width, keys = self.weights.shape
        head_width = self.query.shape[-1]
        if width != len(self.rows) or self.query.shape != (heads, width, head_width):
            raise ValueError(f"weights {self.weights.shape} / query {self.query.shape} do not "
                             f"fit {len(self.rows)} rows")
        if self.key.shape != self.value.shape or self.key.shape[1:] != (keys, head_width) or \
                heads % self.key.shape[0]:
            raise ValueError(f"key {self.key.shape} / value {self.value.shape} do not fit "
                             f"{heads} query heads over {keys} keys")
        if self.context.shape != self.query.shape or self.allowed.shape != (width, keys):
            raise ValueError("context vectors or the mask do not fit the rows")
        for name in ("weights", "query", "key", "value", "context", "allowed"):
            getattr(self, name).setflags(write=False)

    @property
    def kv_group(self) -> int:
        """How many query heads share one key/value head."""
        return self.query.shape[0] // self.key.shape[0]

    def kv_head(self, head: int) -> int:
        if not 0 <= head < self.query.shape[0]:
            raise ValueError(f"head {head} does not exist: the layer has {self.query.shape[0]} "
                             "heads")
        return head // self.kv_group

    def row(self, query_index: int) -> int:
        """Where query position `query_index` is among the rows."""
        if query_index not in self.rows:
            raise ValueError(f"query {query_index} is not among the rows computed "
                             f"({self.rows.start} to {self.rows.stop - 1})")
        return query_index - self.rows.start


def exact_rows(loaded, encoded: EncodedText, layer: int, rows: range,
               layer_inputs: LayerInputs) -> ExactRows:
    """Query positions `rows` of layer `layer`, from the layer's kept input: the layer runs
    alone (see models.hooks.streaming.layer_from_input) and its attention computes those rows only,
    with the model's own eager function, so the numbers are the full forward's."""
    check_rows(rows, encoded.input_ids.size(1))
    captured = layer_from_input(loaded, encoded, layer, layer_inputs,
                                rows=slice(rows.start, rows.stop))
    weights = _item_zero(captured.weights)  # (H, W, K)
    if weights.shape[1] != len(rows):
        raise RuntimeError(f"{type(loaded.model).__name__} computed {weights.shape[1]} rows, "
                           f"not the {len(rows)} asked for: its attention ignores the capture's "
                           "rows")
    return ExactRows(
        layer=layer, rows=rows, weights=weights, query=_item_zero(captured.query),
        key=_item_zero(captured.key), value=_item_zero(captured.value),
        context=_item_zero(captured.context.transpose(1, 2)),  # (B, W, H, Dh) -> (H, W, Dh)
        scaling=captured.scaling, allowed=allowed_rows(encoded, loaded.causal, rows),
        rotary=bool(getattr(loaded, "rotary", False)),
    )


def window_maps(loaded, encoded: EncodedText, start: int, stop: int, layer_inputs: LayerInputs,
                progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(L, H, W, W) float32: every layer's exact weights from queries start..stop-1 to keys
    start..stop-1 (each row's softmax is over all the keys it may attend to; the window shows a
    part of it). `progress(done, total)` is called after each layer."""
    return rows_every_layer(loaded, encoded, range(start, stop), layer_inputs, progress,
                            keys=slice(start, stop))


def rows_every_layer(loaded, encoded: EncodedText, rows: range, layer_inputs: LayerInputs,
                     progress: Callable[[int, int], None] | None = None,
                     keys: slice = slice(None)) -> np.ndarray:
    """(L, H, W, K) float32: every layer's exact weights of query positions `rows` (a word's
    pieces: a few rows) over the keys (all of them, or those of `keys`), each layer run alone
    from its kept input and let go before the next (one layer's rows alive at a time, not its
    (H, T, T) maps). `progress(done, total)` is called after each layer."""
    check_rows(rows, encoded.input_ids.size(1))
    count = num_layers(loaded.model)
    weights: np.ndarray | None = None
    for layer in range(count):
        layer_rows = exact_rows(loaded, encoded, layer, rows, layer_inputs).weights[..., keys]
        if weights is None:
            weights = np.empty((count, *layer_rows.shape), np.float32)  # (L, H, W, K)
        weights[layer] = layer_rows  # (H, W, K)
        if progress is not None:
            progress(layer + 1, count)
    return weights


def check_rows(rows: range, tokens: int) -> None:
    """ValueError unless `rows` is a non-empty contiguous range of the input's positions."""
    if not isinstance(rows, range) or rows.step != 1:
        raise ValueError(f"rows must be a contiguous range of query positions, got {rows!r}")
    if not 0 <= rows.start < rows.stop <= tokens:
        raise ValueError(f"rows {rows.start} to {rows.stop - 1} are not within the input's "
                         f"{tokens} tokens (0 to {tokens - 1})")


def allowed_rows(encoded: EncodedText, causal: bool, rows: range) -> np.ndarray:
    """(W, K) bool, rows `rows` of models.hooks.trace.allowed_positions without the (T, T) array:
    padding keys are never allowed; causal keeps keys j <= query i."""
    real = encoded.attention_mask[0].numpy().astype(bool)  # (K,)
    allowed = np.repeat(real[None, :], len(rows), axis=0)  # (W, K)
    if causal:
        allowed &= np.arange(real.size)[None, :] <= np.arange(rows.start, rows.stop)[:, None]
    return allowed


def _item_zero(batch: torch.Tensor) -> np.ndarray:
    """Batch item 0 as its own contiguous float32 array (not a view that keeps the batch)."""
    return batch[0].float().clone(memory_format=torch.contiguous_format).numpy()

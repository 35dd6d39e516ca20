"""One forward pass -> one Trace: the attention record plus what every view reads from that pass.

TransformerLens' ActivationCache is the model: the run fills per-layer query, key, value and
per-head context (the weighted sums of values) once; the record carries the weights; scores are
q.k times the model's own scaling, read from the captured vectors (one matmul for one layer, not
a forward pass); a language-model head's logits are reduced to small prediction summaries so a
cached trace does not hold (T, V) floats.

Dimensions: L layers, H query heads, Hkv key/value heads, T tokens, Q/K positions, Dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from models.hooks.capture import CapturedRun
from models.analysis.norms import value_norms
from models.experiments.predictions import MaskFillers, NextToken, PerPosition
from models.hooks.record import AttentionRecord
from models.loading.tokenize import EncodedText


class LayerStack:
    """One array per layer, read like the (L, ...) stack of them without building it: `[l]` is
    layer l's array and `[l, ...]` indexes into it; `shape` is the stack's. A captured forward's
    vectors stay the arrays the model wrote (views of its tensors), with no copy."""

    def __init__(self, layers):
        self.layers = tuple(layers)
        shapes = {layer.shape for layer in self.layers}
        if not self.layers or len(shapes) != 1:
            raise ValueError(f"a layer stack needs layers of one shape, got {sorted(shapes)}")
        for layer in self.layers:
            layer.setflags(write=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.layers), *self.layers[0].shape)

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index):
        if isinstance(index, tuple):
            return self.layers[index[0]][index[1:]]
        return self.layers[index]

    def __array__(self, dtype=None, copy=None):
        stacked = np.stack(self.layers)
        return stacked if dtype is None else stacked.astype(dtype)


@dataclass(frozen=True)
class Predictions:
    """What a language-model head predicted, from the trace's own logits.

    next_token: a causal LM's top candidates after the whole text.
    positions: a causal LM's prediction at every position against the token that came.
    masks: a masked LM's top fillers for every mask token in the text.
    """

    next_token: NextToken | None = None
    positions: PerPosition | None = None
    masks: tuple[MaskFillers, ...] = ()

    @property
    def nbytes(self) -> int:
        count = len(self.positions.positions) + 1 if self.positions else 1
        return 2048 * (count + len(self.masks))  # ~10 small candidate objects per position


@dataclass(frozen=True)
class Trace:
    """What one forward pass of one model on one input produced.

    record: the tokens and every layer's and head's weights (what every map shows).
    query: (L, H, T, Dh) after the rotary rotation where the model has one (`rotary`).
    key, value: (L, Hkv, T, Dh); with grouped-query attention Hkv < H and query head h reads
        key/value head h // kv_group.
    context: (L, H, T, Dh) each head's weighted sum of values, as the model computed it.
    scaling: per layer, what q.k was multiplied by before the softmax (1/sqrt(Dh) usually).
    allowed: (Q, K) bool, True = the query may attend to the key (causal and padding masks).
    input_ids: the token ids of the input.
    predictions: what the language-model head predicted, or None when the model has no such
        head (a masked LM with no mask in the text has an empty Predictions).
    value_norms: (L, H, T) ||v_j W_O^h||, how far key j's value moves the output through head h
        (Kobayashi et al. 2020); None when the output projection could not be read.
    residual: (L + 1, T, D) the residual stream: each layer's input (hook_resid_pre), then the
        last layer's output; any other point of a layer is computed again, exactly, from the
        layer's input (models/hooks/access.py). None when the run did not keep it.
    """

    record: AttentionRecord
    query: LayerStack | np.ndarray
    key: LayerStack | np.ndarray
    value: LayerStack | np.ndarray
    context: LayerStack | np.ndarray
    scaling: tuple[float, ...]
    allowed: np.ndarray
    input_ids: tuple[int, ...]
    rotary: bool = False
    predictions: Predictions | None = None
    value_norms: np.ndarray | None = None
    residual: LayerStack | None = None

    def __post_init__(self) -> None:
        layers, heads, tokens, _ = self.query.shape
        expected = (self.record.num_layers, self.record.num_heads, self.record.num_tokens)
        if (layers, heads, tokens) != expected:
            raise ValueError(f"query vectors {self.query.shape} do not fit the record {expected}")
        if self.key.shape != self.value.shape or heads % self.key.shape[1]:
            raise ValueError(f"key {self.key.shape} / value {self.value.shape} do not fit "
                             f"{heads} query heads")
        if self.context.shape != self.query.shape or len(self.scaling) != layers:
            raise ValueError("context vectors or scalings do not fit the record")
        if self.allowed.shape != (tokens, tokens) or len(self.input_ids) != tokens:
            raise ValueError("mask or input ids do not fit the record")
        if self.value_norms is not None and self.value_norms.shape != (layers, heads, tokens):
            raise ValueError(f"value norms {self.value_norms.shape} do not fit the record")
        if self.residual is not None and self.residual.shape[:2] != (layers + 1, tokens):
            raise ValueError(f"the residual stream {self.residual.shape} does not fit the record")
        for name in ("query", "key", "value", "context"):
            if isinstance(getattr(self, name), np.ndarray):  # one array: kept as a stack
                object.__setattr__(self, name, LayerStack(getattr(self, name)))
        self.allowed.setflags(write=False)

    @property
    def kv_group(self) -> int:
        """How many query heads share one key/value head."""
        return self.query.shape[1] // self.key.shape[1]

    def kv_head(self, head: int) -> int:
        return head // self.kv_group

    def scores(self, layer: int) -> np.ndarray:
        """(H, Q, K) q.k times the layer's scaling, before any mask."""
        key = np.repeat(self.key[layer], self.kv_group, axis=0)  # (H, K, Dh)
        return self.query[layer] @ key.transpose(0, 2, 1) * np.float32(self.scaling[layer])

    def norm_weights(self, layer: int) -> np.ndarray:
        """(H, Q, K) norm-based attention ||alpha_ij f(x_j)|| = alpha_ij ||v_j W_O^h||."""
        if self.value_norms is None:
            raise ValueError("This model's output projection could not be read, so norm-based "
                             "attention cannot be computed.")
        return self.record.layer(layer) * self.value_norms[layer][:, None, :]  # (H, Q, K)

    def masked_softmax_difference(self, layer: int) -> float:
        """max |softmax(scores with the mask) - the model's weights| for one layer: how exactly
        the captured vectors reproduce what the model attended to."""
        scores = np.where(self.allowed, self.scores(layer), -np.inf)  # (H, Q, K)
        peak = scores.max(axis=-1, keepdims=True)
        exponentials = np.exp(scores - np.where(np.isfinite(peak), peak, 0.0))
        total = exponentials.sum(axis=-1, keepdims=True)
        weights = np.divide(exponentials, total, out=np.zeros_like(exponentials), where=total > 0)
        return float(np.abs(weights - self.record.layer(layer)).max())

    @property
    def nbytes(self) -> int:
        arrays = (self.query, self.key, self.value, self.context, self.allowed,
                  *(array for array in (self.value_norms, self.residual) if array is not None))
        return (self.record.nbytes + sum(a.nbytes for a in arrays)
                + getattr(self.predictions, "nbytes", 0) + 4096)


def allowed_positions(encoded: EncodedText, causal: bool) -> np.ndarray:
    """(Q, K) bool, True = may attend: padding keys are never allowed; causal keeps j <= i."""
    tokens = encoded.input_ids.size(1)
    allowed = np.repeat(encoded.attention_mask[0].numpy().astype(bool)[None, :], tokens, axis=0)
    if causal:
        allowed &= np.tri(tokens, dtype=bool)
    return allowed


def trace_from_run(run: CapturedRun, encoded: EncodedText, source: str, causal: bool,
                   rotary: bool = False, predictions: Predictions | None = None) -> Trace:
    """Batch item 0 of a captured run as a Trace; the weights stay the arrays the model wrote."""
    record = AttentionRecord(
        tokens=encoded.tokens, layers=[_item_zero(captured.weights) for captured in run.layers],
        source=source,
        masks=("causal",) if causal else (), segment_ids=encoded.segment_ids,
        special_positions=encoded.special_positions, dropped_tokens=encoded.dropped_tokens,
    )
    return Trace(
        record=record,
        query=_layers(run, "query"),
        key=_layers(run, "key"),
        value=_layers(run, "value"),
        context=LayerStack(layer.transpose(1, 0, 2)  # (T, H, Dh) -> (H, T, Dh), a view
                           for layer in _layers(run, "context").layers),
        scaling=tuple(captured.scaling for captured in run.layers),
        allowed=allowed_positions(encoded, causal),
        input_ids=tuple(int(i) for i in encoded.input_ids[0]),
        rotary=rotary,
        predictions=predictions,
        value_norms=_value_norms(run),
        residual=LayerStack(_item_zero(stream) for stream in run.residual) if run.residual
        else None,
    )


def _item_zero(batch: torch.Tensor) -> np.ndarray:
    """Batch item 0 as a float32 array: the tensor's own memory (strided as the model left it)
    when it is float32 and the batch holds one item, else a copy (so a view does not keep the
    other items alive)."""
    item = batch[0]
    if item.dtype != torch.float32:
        return item.float().numpy()
    return item.numpy() if batch.size(0) == 1 else item.clone().numpy()


def _value_norms(run: CapturedRun) -> np.ndarray | None:
    if any(captured.output_weight is None for captured in run.layers):
        return None
    return np.stack([value_norms(captured)[0].float().numpy() for captured in run.layers])


def _layers(run: CapturedRun, name: str) -> LayerStack:
    """Batch item 0 of one captured vector, per layer, as the arrays the model wrote."""
    return LayerStack(_item_zero(getattr(captured, name)) for captured in run.layers)

"""The one shape every analysis of attention takes: a reducer fed one layer of a batch at a time.

`add(layer, maps, tokens, norms)` hands a reducer one layer's maps of a batch of inputs,
(B, H, Q, K) float32 (read only, perhaps valid only during the call), with the batch's
TokenBatch and, when the caller has them, the value norms ||v_j W_O^h|| (B, H, K) of that layer;
`result()` then gives what it measured, per input. The whole record (`reduce_record`), a long
input streamed layer by layer as its forward computes them (`stream_into`) and a batch of a
corpus are fed the same way, so each analysis is written once.

Order: every layer of a batch from layer 0 up, then the next batch (layer 0 starts a batch).

Padding is on the right: a reducer reads input b's maps cut to its real queries and keys
(`TokenBatch.cut`), or the whole batch at once with each input's padded keys weighted 0 and its
padded query rows left out of its means (the layer's pass, the statistics, the detectors), so a
padded key weighs nothing and a padded query row counts in no mean; a padded batch gives,
input by input, the numbers each input gives alone.

Dimensions: B batch, N inputs seen, L layers, H heads, Q/K query/key positions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

from models.analysis.layer_pass import BatchRows, Parts, measure_batch
from models.analysis.token_batch import TokenBatch
from models.hooks.record import ROW_SUM_TOLERANCE, AttentionRecord

# A row with less weight than the record's row-sum tolerance (0.1 %) was emptied by a mask (or
# by hiding special tokens): it counts in no mean.
EMPTY_ROW_WEIGHT = ROW_SUM_TOLERANCE

Value = TypeVar("Value")


class Reducer(ABC):
    """An analysis fed one layer of a batch at a time (see the module docstring)."""

    @abstractmethod
    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        """Measure layer `layer` of a batch: maps (B, H, Q, K) float32, norms (B, H, K) or None."""

    @abstractmethod
    def result(self):
        """What was measured, per input seen."""


class PassReducer(Reducer):
    """A reducer that reads each input's layer through the one pass over its maps
    (models.analysis.layer_pass): `parts` is what it reads, `take` gets the pass's rows of each
    input of the batch. A Summary runs one pass for all its reducers and calls their `take`."""

    @property
    def parts(self) -> Parts:
        return Parts()

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        self.take(layer, maps, tokens, measure_batch(maps, tokens, self.parts, norms), norms)

    @abstractmethod
    def take(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
             rows: BatchRows, norms: np.ndarray | None = None) -> None:
        """`add`, given the pass's rows of the batch (`measure_batch`; `rows[b]` is input b's)."""


class LayerLog(Generic[Value]):
    """What a reducer keeps per input and layer, batch after batch: `put(layer, values)` with one
    value per input of the batch; layer 0 starts a new batch."""

    def __init__(self):
        self._items: list[list[Value]] = []
        self._batch = range(0)

    def put(self, layer: int, values: Sequence[Value]) -> None:
        if layer == 0:
            start = len(self._items)
            self._items.extend([] for _ in values)
            self._batch = range(start, len(self._items))
        elif not self._batch:
            raise ValueError(f"layer {layer} before layer 0: a batch's layers are added in "
                             "order, from layer 0")
        if len(values) != len(self._batch):
            raise ValueError(f"{len(values)} inputs at layer {layer}, {len(self._batch)} at "
                             "layer 0 of this batch")
        for index, value in zip(self._batch, values):
            kept = self._items[index]
            if len(kept) != layer:
                raise ValueError(f"layer {layer} after {len(kept)} layers: a batch's layers are "
                                 "added in order, from layer 0")
            kept.append(value)

    @property
    def num_items(self) -> int:
        return len(self._items)

    def items(self) -> list[list[Value]]:
        """Per input, its values layer by layer; every input has every layer."""
        if not self._items:
            raise ValueError("no layer has been added yet")
        counts = {len(item) for item in self._items}
        if len(counts) != 1:
            raise ValueError(f"the inputs were given different numbers of layers: {sorted(counts)}")
        return self._items

    def stacked(self) -> np.ndarray:
        """(N, L, ...) every input's values of every layer, as one array."""
        return np.stack([np.stack(item) for item in self.items()])


def row_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean over the last axis of (..., Q) values, in float64, counting only the rows marked
    True (0 where none is)."""
    count = rows.sum(axis=-1)
    total = np.where(rows, values.astype(np.float64), 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


def reduce_record(record: AttentionRecord, *reducers: Reducer,
                  norms: np.ndarray | None = None) -> tuple:
    """Feed every layer of `record` (a batch of one, `TokenBatch.of_record`) to each reducer, in
    layer order, and return their results in the reducers' order. norms: (L, H, K) value norms
    of the same input, or None."""
    if norms is not None and np.shape(norms) != (record.num_layers, record.num_heads,
                                                  record.num_keys):
        raise ValueError(f"value norms {np.shape(norms)} do not fit the record "
                         f"{(record.num_layers, record.num_heads, record.num_keys)}")
    tokens = TokenBatch.of_record(record)
    for layer in range(record.num_layers):
        maps = record.layer(layer)[None]  # (1, H, Q, K) view
        layer_norms = None if norms is None else np.asarray(norms[layer])[None]  # (1, H, K)
        for reducer in reducers:
            reducer.add(layer, maps, tokens, layer_norms)
    return tuple(reducer.result() for reducer in reducers)


def stream_into(reducer: Reducer, tokens: TokenBatch) -> Callable[..., None]:
    """`reduce` for models.hooks.streaming.stream: each streamed layer's (H, Q, K) maps (and its
    (H, K) value norms, when the stream hands them on) go to `reducer` as a batch of one input
    described by `tokens`."""
    if tokens.batch_size != 1:
        raise ValueError("a streamed input is a batch of one")

    def reduce(layer: int, maps: np.ndarray, norms: np.ndarray | None = None) -> None:
        reducer.add(layer, maps[None], tokens,  # (1, H, Q, K) view
                    None if norms is None else norms[None])

    return reduce

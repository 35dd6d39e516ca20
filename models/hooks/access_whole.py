"""A short input's attention: every map held in memory (a Trace), every question a slice of it."""

from __future__ import annotations

import numpy as np

from models.analysis.summary import SummaryResult, summarise_record
from models.hooks.access_base import (Attention, Progress, Remember, compute_now,
                                      per_layer_progress, window_of)
from models.hooks.layer_inputs import KeptInputs
from models.hooks.long_rows import ExactRows, check_rows
from models.hooks.record import AttentionRecord
from models.hooks.trace import Predictions, Trace
from models.loading.tokenize import EncodedText


class WholeAttention(Attention):
    """A short input: its Trace holds every map, so every question is a slice of it. `record`
    may be a token-option view of the trace's record (merged words, hidden specials): maps,
    windows, rows over every layer and the summary then read the view; the vectors (rows) and
    the norm-based maps stay per model token."""

    def __init__(self, loaded, encoded: EncodedText, trace: Trace,
                 record: AttentionRecord | None = None, remember: Remember = compute_now):
        super().__init__(loaded, encoded, remember)
        self.trace = trace
        self.record = record or trace.record

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.record.tokens

    @property
    def num_layers(self) -> int:
        return self.record.num_layers

    @property
    def num_heads(self) -> int:
        return self.record.num_heads

    @property
    def whole(self) -> bool:
        return True

    @property
    def special_positions(self) -> tuple[int, ...]:
        return self.record.special_positions

    def head(self, layer: int, head: int) -> np.ndarray:
        self.check_head(layer, head)
        return self.record.head(layer, head)

    def layer_maps(self, layer: int) -> np.ndarray:
        self.check_head(layer)
        return self.record.layer(layer)

    def rows(self, layer: int, rows: range) -> ExactRows:
        trace = self.trace
        check_rows(rows, trace.record.num_tokens)
        part = slice(rows.start, rows.stop)
        return ExactRows(
            layer=layer, rows=rows, weights=trace.record.layer(layer)[:, part].copy(),
            query=np.ascontiguousarray(trace.query[layer][:, part]),
            key=np.ascontiguousarray(trace.key[layer]), value=np.ascontiguousarray(trace.value[layer]),
            context=np.ascontiguousarray(trace.context[layer][:, part]),
            scaling=trace.scaling[layer], allowed=trace.allowed[part].copy(), rotary=trace.rotary)

    def rows_every_layer(self, rows: range, progress: Progress | None = None) -> np.ndarray:
        check_rows(rows, self.num_tokens)
        return np.stack([layer[:, rows.start:rows.stop] for layer in self.record.layers])

    def window(self, start: int, stop: int, progress: Progress | None = None) -> AttentionRecord:
        record = self.record
        if (start, stop) == (0, record.num_tokens):
            return record
        return window_of(record.tokens, np.stack([layer[:, start:stop, start:stop]
                                                  for layer in record.layers]),
                         start, record.special_positions, self.label, self.causal)

    def summary(self, progress: Progress | None = None) -> SummaryResult:
        norms = self.trace.value_norms if self.record is self.trace.record else None
        return self.remember(("summary", self.record.tokens), lambda: summarise_record(
            self.record, norms, progress=per_layer_progress(progress, self.num_layers),
            exact_rollout=True, rollout_dtype=np.float64))

    def predictions(self, progress: Progress | None = None) -> Predictions | None:
        return self.trace.predictions

    def norm_head(self, layer: int, head: int) -> np.ndarray:
        self.check_head(layer, head)
        return self.trace.norm_weights(layer)[head]

    def layer_inputs(self) -> KeptInputs:
        residual = self.trace.residual
        if residual is None:
            raise ValueError("This trace did not keep its residual stream.")
        return KeptInputs({layer: residual[layer] for layer in range(len(residual))})

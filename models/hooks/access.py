"""One attention access for any length: what every view reads of one input's attention.

A view asks for one head's map, some query rows of a layer (with the vectors they were computed
from), a window of every layer, the per-layer reductions (thumbnails, statistics, detectors,
roles, rollout: models/analysis), the predictions, or any point of a layer. Whether the input
was kept whole (a `Trace`: every map in memory) or streamed (each layer's maps reduced and let
go, each layer's input on disk, a layer's maps computed again from its input when asked) is this
module's business: `WholeAttention` and `StreamedAttention` answer the same questions with the
same numbers (the tests compare them), and a page never branches on which it holds.

Computations that are not cheap go through `remember(key, compute)`, which the caller provides
(the app's byte-bounded store; by default nothing is kept), so the same head of the same long
input is computed once for everyone.

Dimensions: L layers, H heads, T tokens, W rows or window positions, Q/K query/key positions.
"""

from __future__ import annotations

import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from models.analysis.compare import compare_heads, compare_role_tables, ranking_measure
from models.analysis.summary import SummaryResult, SummaryStream, summarise_record
from models.experiments.long_predictions import long_predictions
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.layer_inputs import KeptInputs
from models.hooks.long_rows import ExactRows, check_rows, exact_rows, rows_every_layer
from models.hooks.record import AttentionRecord
from models.hooks.streaming import (Streamed, exact_head, layer_from_input, prepare, run_from_input,
                                   stream)
from models.hooks.trace import Predictions, Trace
from models.loading.tokenize import EncodedText

Value = TypeVar("Value")
Remember = Callable[[Hashable, Callable[[], Value]], Value]
Progress = Callable[[int, int], None]


def _per_layer(progress: Progress | None, total: int) -> Callable[[int], None] | None:
    """A Summary's `progress(done)` as a (done, total) callback."""
    return None if progress is None else (lambda done: progress(done, total))


def compute_now(key: Hashable, compute: Callable[[], Value]) -> Value:
    """The default `remember`: compute every time, keep nothing."""
    return compute()


class Attention(ABC):
    """One input's attention, read the same way whatever its length (see the module doc)."""

    def __init__(self, loaded, encoded: EncodedText, remember: Remember = compute_now):
        self.loaded = loaded
        self.encoded = encoded
        self.remember = remember

    @property
    def label(self) -> str:
        return self.loaded.label

    @property
    def causal(self) -> bool:
        return self.loaded.causal

    @property
    @abstractmethod
    def tokens(self) -> tuple[str, ...]:
        """The tokens the maps are over (len T)."""

    @property
    @abstractmethod
    def num_layers(self) -> int: ...

    @property
    @abstractmethod
    def num_heads(self) -> int: ...

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    @property
    @abstractmethod
    def whole(self) -> bool:
        """True when every map is held in memory (a short input); False for a streamed one."""

    @property
    def dropped_tokens(self) -> int:
        return self.encoded.dropped_tokens

    @property
    def special_positions(self) -> tuple[int, ...]:
        return self.encoded.special_positions

    def check_head(self, layer: int, head: int) -> None:
        if not 0 <= layer < self.num_layers or not 0 <= head < self.num_heads:
            raise ValueError(f"Layer {layer}, head {head} is not in a model with "
                             f"{self.num_layers} layers of {self.num_heads} heads.")

    @abstractmethod
    def head(self, layer: int, head: int) -> np.ndarray:
        """(T, T) float32, read-only: one head's exact map."""

    @abstractmethod
    def layer_maps(self, layer: int) -> np.ndarray:
        """(H, T, T) float32, read-only: every head of one layer (for a long input, computed
        again from the layer's input: H x T x T floats, 600 MB for SmolLM2 at 4,096 tokens)."""

    def close(self) -> None:
        """Let go of what the access keeps outside memory (a long input's layer inputs on disk)."""

    @abstractmethod
    def rows(self, layer: int, rows: range) -> ExactRows:
        """Query positions `rows` of one layer, every head, with the query, key and value
        vectors and head outputs the model computed them from."""

    @abstractmethod
    def rows_every_layer(self, rows: range, progress: Progress | None = None) -> np.ndarray:
        """(L, H, W, T) float32: the rows of query positions `rows` in every layer."""

    @abstractmethod
    def window(self, start: int, stop: int, progress: Progress | None = None) -> AttentionRecord:
        """Every layer's maps cut to queries and keys start..stop-1, as a record."""

    @abstractmethod
    def summary(self, progress: Progress | None = None) -> SummaryResult:
        """Every layer's reductions (models/analysis/summary.py)."""

    @abstractmethod
    def predictions(self, progress: Progress | None = None) -> Predictions | None:
        """What the language-model head predicted (None without a head)."""

    @abstractmethod
    def norm_head(self, layer: int, head: int) -> np.ndarray:
        """(T, T) the norm-based map ||alpha_ij f(x_j)|| of one head (Kobayashi et al. 2020)."""

    @abstractmethod
    def layer_inputs(self):
        """Each layer's input and the last layer's output (LayerInputs or KeptInputs)."""

    def residual(self, layer: int) -> np.ndarray:
        """(T, D) the residual stream entering layer `layer` (layer L: leaving the last one)."""
        if not 0 <= layer <= self.num_layers:
            raise ValueError(f"The residual stream has places 0 to {self.num_layers}, not {layer}.")
        return self.layer_inputs().load(layer)[0].numpy()

    def layer_points(self, layer: int, names: Iterable[str]) -> dict[str, np.ndarray]:
        """Any hook points of one layer (models/hooks/points.py names: its MLP output, each
        head's output, ...), batch item 0, computed again from the layer's kept input with the
        model's own arithmetic; the forward stops at the end of that layer."""
        wanted = tuple(names)
        key = ("points", layer, wanted)

        def compute() -> dict[str, np.ndarray]:
            run, _ = run_from_input(self.loaded, self.encoded, layer, self.layer_inputs(),
                                    cache=wanted, stop_at=points.resid_post(layer))
            missing = [name for name in wanted if name not in run.cache]
            if missing:
                raise ValueError(f"{self.label} has no point {missing[0]} in layer {layer}.")
            return {name: run.cache[name][0].float().numpy() for name in wanted}
        return self.remember(key, compute)


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
        self.check_head(layer, 0)
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
            self.record, norms, progress=_per_layer(progress, self.num_layers),
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


class StreamedAttention(Attention):
    """A long input, read by one streamed forward: its reductions were taken layer by layer,
    each layer's input is on disk, and any head, rows or window is computed again, exactly,
    from its layer's input (a fraction of a second a layer)."""

    def __init__(self, loaded, streamed: Streamed, summary: SummaryResult,
                 remember: Remember = compute_now):
        super().__init__(loaded, streamed.encoded, remember)
        if streamed.layer_inputs is None:
            raise ValueError("a streamed input needs its layers' inputs kept")
        self.streamed = streamed
        self._summary = summary

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.streamed.tokens

    @property
    def num_layers(self) -> int:
        return self.streamed.num_layers

    @property
    def num_heads(self) -> int:
        return self.streamed.num_heads

    @property
    def whole(self) -> bool:
        return False

    @property
    def inputs(self):
        return self.streamed.layer_inputs

    def layer_inputs(self):
        return self.streamed.layer_inputs

    def head(self, layer: int, head: int) -> np.ndarray:
        self.check_head(layer, head)

        def compute() -> np.ndarray:
            weights = exact_head(self.loaded, self.encoded, layer, head, self.inputs)
            weights.setflags(write=False)
            return weights
        return self.remember(("head", layer, head), compute)

    def layer_maps(self, layer: int) -> np.ndarray:
        self.check_head(layer, 0)

        def compute() -> np.ndarray:
            maps = layer_from_input(self.loaded, self.encoded, layer, self.inputs).weights[0]
            maps = maps.float().numpy().copy()  # (H, T, T)
            maps.setflags(write=False)
            return maps
        return self.remember(("layer", layer), compute)

    def close(self) -> None:
        self.inputs.delete()

    def rows(self, layer: int, rows: range) -> ExactRows:
        return self.remember(("rows", layer, rows.start, rows.stop),
                             lambda: exact_rows(self.loaded, self.encoded, layer, rows,
                                                self.inputs))

    def rows_every_layer(self, rows: range, progress: Progress | None = None) -> np.ndarray:
        def compute() -> np.ndarray:
            found = rows_every_layer(self.loaded, self.encoded, rows, self.inputs, progress)
            found.setflags(write=False)
            return found
        return self.remember(("rows-every-layer", rows.start, rows.stop), compute)

    def window(self, start: int, stop: int, progress: Progress | None = None) -> AttentionRecord:
        def compute() -> AttentionRecord:
            maps = rows_every_layer(self.loaded, self.encoded, range(start, stop), self.inputs,
                                    progress, keys=slice(start, stop))
            return window_of(self.tokens, maps, start, self.special_positions, self.label,
                             self.causal)
        return self.remember(("window", start, stop), compute)

    def summary(self, progress: Progress | None = None) -> SummaryResult:
        return self._summary

    def predictions(self, progress: Progress | None = None) -> Predictions | None:
        head = self.loaded.model.get_output_embeddings() \
            if hasattr(self.loaded.model, "get_output_embeddings") else None
        if not self.causal or head is None:
            return None
        return self.remember(("predictions",), lambda: long_predictions(
            self.loaded, self.encoded, self.inputs, progress=progress))

    def norm_head(self, layer: int, head: int) -> np.ndarray:
        self.check_head(layer, head)

        def compute() -> np.ndarray:
            captured = layer_from_input(self.loaded, self.encoded, layer, self.inputs,
                                        group_of=head)
            if captured.output_weight is None:
                raise ValueError("This model's output projection could not be read, so "
                                 "norm-based attention cannot be computed.")
            group = captured.weights.size(1)  # the heads sharing this head's keys and values
            width = captured.value.size(-1)
            output = captured.output_weight[:, head * width:(head + 1) * width]  # (D, Dh)
            moved = captured.value[0, 0].to(output.dtype) @ output.T  # (K, D): v_j W_O^h
            norms = moved.norm(dim=-1)  # (K,)
            weights = (captured.weights[0, head % group] * norms[None, :]).float().numpy()
            weights.setflags(write=False)
            return weights
        return self.remember(("norm-head", layer, head), compute)


def window_of(tokens: tuple[str, ...], maps: np.ndarray, start: int,
              special_positions: Iterable[int], label: str, causal: bool) -> AttentionRecord:
    """(L, H, W, W) maps of queries and keys start..start+W-1 as a record (a row holds only the
    weights to the keys inside the window, so it may sum to less than 1)."""
    width = maps.shape[-1]
    special = tuple(p - start for p in special_positions if start <= p < start + width)
    masks = ("causal", "window") if causal else ("window",)
    return AttentionRecord(tokens[start:start + width], weights=np.ascontiguousarray(maps),
                           source=label, masks=masks, special_positions=special)


ROLE_MEASURE = ("Heads are ranked by the difference of their roles: the Jensen-Shannon divergence "
                "(in bits, 0 to 1) between how much weight each puts on the first token, other "
                "special tokens, itself, the previous token, the next token, and other earlier "
                "or later tokens (a position-by-position comparison needs both inputs' maps "
                "held whole).")


def compare(first: Attention, second: Attention) -> tuple[pd.DataFrame, str]:
    """Every head ranked by how differently it attends in two inputs, and one sentence saying
    how: position by position when both inputs' maps are held and have one length, else by the
    heads' roles (which the reductions of any input, however long, hold)."""
    if isinstance(first, WholeAttention) and isinstance(second, WholeAttention):
        return (compare_heads(first.record, second.record),
                ranking_measure(first.record, second.record))
    summaries = first.summary(), second.summary()
    labels = [summary.statistics["label"].reset_index(drop=True) for summary in summaries]
    return (compare_role_tables(summaries[0].roles, summaries[1].roles, *labels), ROLE_MEASURE)


def read_streamed(loaded, text: str, pair: str | None, folder: Path,
                  progress: Progress | None = None) -> StreamedAttention:
    """A long text read by one streamed forward: each layer's maps reduced by the Summary (with
    the value norms) as soon as they exist, each layer's input written to `folder`;
    `progress(done, layers)` is told after each layer. The folder is the caller's to delete
    (`attention.inputs.delete()`); it is removed if the forward fails."""
    encoded, _ = prepare(loaded, text, pair)
    layers = num_layers(loaded.model)
    reduce = SummaryStream(encoded, loaded.causal, _per_layer(progress, layers))
    try:
        streamed = stream(loaded, text, pair, reduce, keep_inputs=folder, with_norms=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return StreamedAttention(loaded, streamed, reduce.summary(streamed))


def read(loaded, text: str, pair: str | None = None, long: bool = True,
         folder: Path | None = None, progress: Progress | None = None) -> Attention:
    """`text` (and an optional second sentence) as an Attention. A text the model's full trace
    keeps (`loaded.max_tokens`) is run whole; a longer one, with `long` and a model that can
    read more (`long_limit`), is streamed layer by layer with each layer's input written to
    `folder` (a new temporary folder when None), else cut to the full trace's limit."""
    encoded, _ = prepare(loaded, text, pair)
    if long and len(encoded.tokens) > loaded.max_tokens:
        target = Path(folder) if folder is not None else Path(tempfile.mkdtemp(
            prefix="attention-explorer-inputs-"))
        return read_streamed(loaded, text, pair, target, progress)
    whole_encoded, _ = loaded.encode(text, pair)
    return WholeAttention(loaded, whole_encoded, loaded.run(text, pair))

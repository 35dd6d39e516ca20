"""A long input's attention: reductions taken layer by layer in one streamed forward, each layer's
input on disk, and any head, rows or window computed again, exactly, from that input."""

from __future__ import annotations

import numpy as np

from models.analysis.summary import SummaryResult
from models.experiments.long_predictions import long_predictions
from models.hooks.access_base import Attention, Progress, Remember, compute_now, window_of
from models.hooks.long_rows import ExactRows, exact_rows, rows_every_layer
from models.hooks.record import AttentionRecord
from models.hooks.streaming import Streamed, exact_head, layer_from_input
from models.hooks.trace import Predictions


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
        self.check_head(layer)

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

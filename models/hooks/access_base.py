"""The one attention access every view reads (`Attention`): what it answers, and the helpers
its two kinds share (models.hooks.access_whole, models.hooks.access_streamed). models.hooks.access
reads an input into one of them.

Dimensions: L layers, H heads, T tokens, W rows or window positions, Q/K query/key positions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

import numpy as np

from models.analysis.summary import SummaryResult
from models.hooks import points
from models.hooks.long_rows import ExactRows
from models.hooks.record import AttentionRecord
from models.hooks.streaming import run_from_input
from models.hooks.trace import Predictions
from models.loading.tokenize import EncodedText

Value = TypeVar("Value")
Remember = Callable[[Hashable, Callable[[], Value]], Value]
Progress = Callable[[int, int], None]



def per_layer_progress(progress: Progress | None, total: int) -> Callable[[int], None] | None:
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

    def check_head(self, layer: int, head: int | None = None) -> None:
        """A ValueError naming what is asked for (a layer, or a layer's head) when this model
        has no such layer or head."""
        if head is None and not 0 <= layer < self.num_layers:
            raise ValueError(f"Layer {layer} is not in a model with {self.num_layers} layers "
                             f"(0 to {self.num_layers - 1}).")
        if head is not None and (not 0 <= layer < self.num_layers
                                 or not 0 <= head < self.num_heads):
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


def window_of(tokens: tuple[str, ...], maps: np.ndarray, start: int,
              special_positions: Iterable[int], label: str, causal: bool) -> AttentionRecord:
    """(L, H, W, W) maps of queries and keys start..start+W-1 as a record (a row holds only the
    weights to the keys inside the window, so it may sum to less than 1)."""
    width = maps.shape[-1]
    special = tuple(p - start for p in special_positions if start <= p < start + width)
    masks = ("causal", "window") if causal else ("window",)
    return AttentionRecord(tokens[start:start + width], weights=np.ascontiguousarray(maps),
                           source=label, masks=masks, special_positions=special)

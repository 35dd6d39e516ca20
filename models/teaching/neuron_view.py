"""What bertviz's neuron view needs, taken from a trace: one layer's query and key vectors per head
and its attention weights.

bertviz's neuron view (bertviz/neuron_view.js) draws, for a chosen query token, the query vector,
every key vector, their elementwise products, the dot product divided by √(vector size), and
the softmax. Its own Python side runs its own copies of BERT and GPT-2 to get those vectors; here
they come from our trace instead (the `hook_q` / `hook_k` points of models/hooks/points.py), so
any model the app runs can be shown. Two adjustments keep the view's arithmetic the model's:
- grouped-query attention (SmolLM2: 9 query heads read 3 key heads): each query head is given the
  key head it reads;
- the view divides q·k by √Dh; a model that scales by something else (trace.scaling) has its
  queries multiplied by scaling·√Dh, so the view's score is exactly the model's score.
Rounding keeps the page small; `rounding_bound` says how far a rounded product can move.

Dimensions: L layers, H query heads, T tokens, Dh head width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.hooks.trace import Trace

VECTOR_DECIMALS = 4  # the vectors' digits on the page: a product moves by far less than 0.01


@dataclass(frozen=True)
class NeuronInputs:
    """One layer, ready for the neuron view."""

    layer: int
    tokens: tuple[str, ...]
    queries: np.ndarray  # (H, T, Dh) scaled so that q·k / √Dh is the model's score
    keys: np.ndarray  # (H, T, Dh) the key head each query head reads
    weights: np.ndarray  # (H, Q, K) the model's attention weights
    causal: bool
    decimals: int | None

    @property
    def view_scores(self) -> np.ndarray:
        """(H, Q, K) what the view computes: q·k / √Dh from the vectors it is given."""
        size = self.queries.shape[-1]
        return self.queries @ self.keys.transpose(0, 2, 1) / math.sqrt(size)

    def rounding_bound(self) -> np.ndarray:
        """(H, Q, K) how far rounding the vectors can have moved each view score from the
        exact one: (Σ|q|·δ + Σ|k|·δ + Dh·δ²) / √Dh with δ half the last digit."""
        size = self.queries.shape[-1]
        if self.decimals is None:
            return np.zeros(self.weights.shape)
        half = 0.5 * 10.0 ** -self.decimals
        query_sums = np.abs(self.queries).sum(-1)[:, :, None]  # (H, Q, 1)
        key_sums = np.abs(self.keys).sum(-1)[:, None, :]  # (H, 1, K)
        return (half * (query_sums + key_sums) + size * half * half) / math.sqrt(size)


def neuron_inputs(trace: Trace, layer: int, decimals: int | None = VECTOR_DECIMALS) -> NeuronInputs:
    """Layer `layer` of the trace as the neuron view reads it."""
    if not 0 <= layer < trace.record.num_layers:
        raise ValueError(f"layer {layer} does not exist: this model has {trace.record.num_layers}")
    queries = np.asarray(trace.query[layer], dtype=np.float64)  # (H, T, Dh)
    keys = np.repeat(np.asarray(trace.key[layer], dtype=np.float64), trace.kv_group,
                     axis=0)  # (H, T, Dh)
    queries = queries * trace.scaling[layer] * math.sqrt(queries.shape[-1])
    if decimals is not None:
        queries, keys = np.round(queries, decimals), np.round(keys, decimals)
    return NeuronInputs(layer, trace.record.tokens, queries, keys,
                        np.asarray(trace.record.layer(layer), dtype=np.float64),
                        "causal" in trace.record.masks, decimals)

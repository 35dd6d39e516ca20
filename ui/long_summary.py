"""Everything the app keeps of a long input's attention, reduced layer by layer as one streamed
forward computes each layer (models.hooks.streaming.stream): every head's thumbnail, statistics,
sentence-detector scores and role shares, and the rollout's pooled maps. `LongReducer` is the
reducer the app streams with; `LongSummary` is what it keeps (a few tens of MB at 4,096 tokens,
whatever the model's L x H x T x T).

It joins models' and viz's per-layer reductions, so it lives in ui/ (it does not use Streamlit:
the long-input benchmark streams with it too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from models.analysis.detectors import NotMeasurable, layer_sentence_scores
from models.hooks.streaming import Streamed
from models.loading.tokenize import EncodedText
from viz.compare import layer_roles
from viz.long_rollout import RolloutStream
from viz.overview import THUMBNAIL_CELLS, max_pool
from viz.statistics import StatisticsInput, layer_statistics, statistics_table


# The rollout's maps are kept for every layer (the page's layer slider): 128 blocks a side, about
# 4 px each in the page's half-width columns at 1280 px, and 4 MB for all 30 layers of SmolLM2.
ROLLOUT_CELLS = 128


class LayerSummary(NamedTuple):
    """What the stream keeps of one layer's maps."""

    thumbnails: np.ndarray  # (H, q, k)
    statistics: dict[str, np.ndarray]  # statistic: (H,)
    detectors: dict[str, np.ndarray | str]  # detector: (H,) scores, or why it cannot measure
    roles: np.ndarray  # (H, R)


@dataclass(frozen=True)
class LongSummary:
    """Every head's thumbnail (L, H, q, k) float32, statistics (the table of
    `head_statistics`), sentence-detector scores (name: (L, H), or why the detector cannot
    measure this input) and role shares (L, H, R, see viz.compare.ROLES), and the rollout's
    pooled head-average and product per layer (L, c, c)."""

    pooled: np.ndarray
    statistics: pd.DataFrame
    detectors: dict[str, np.ndarray | str]
    roles: np.ndarray
    rollout_raw: np.ndarray
    rollout_rolled: np.ndarray

    @property
    def nbytes(self) -> int:
        arrays = (self.pooled, self.roles, self.rollout_raw, self.rollout_rolled,
                  *(scores for scores in self.detectors.values() if isinstance(scores, np.ndarray)))
        return (sum(array.nbytes for array in arrays)
                + int(self.statistics.memory_usage(deep=True).sum()))

    def detector_scores(self, name: str) -> np.ndarray:
        """(L, H) scores of the named sentence detector; NotMeasurable says why there are none."""
        scores = self.detectors[name]
        if isinstance(scores, str):
            raise NotMeasurable(scores)
        return scores


class LongReducer:
    """The reducer of one long input's stream: call it with each layer's (H, Q, K) maps in
    order, then `summary(streamed)` gathers the layers' results. `progress(done)` is told after
    each layer."""

    def __init__(self, encoded: EncodedText, causal: bool,
                 progress: Callable[[int], None] | None = None):
        self.encoded = encoded
        self.given = StatisticsInput(keys=encoded.tokens,
                                     special_positions=encoded.special_positions, causal=causal)
        self.rollout = RolloutStream(len(encoded.tokens), ROLLOUT_CELLS)
        self.progress = progress

    def __call__(self, index: int, maps: np.ndarray) -> LayerSummary:
        self.rollout.add(maps)
        summary = LayerSummary(
            max_pool(maps, THUMBNAIL_CELLS).copy(),  # not a view of the maps
            layer_statistics(maps, self.given),
            layer_sentence_scores(maps, self.encoded.tokens, self.encoded.special_positions),
            layer_roles(maps, self.encoded.special_positions))
        if self.progress is not None:
            self.progress(index + 1)
        return summary

    def summary(self, streamed: Streamed[LayerSummary]) -> LongSummary:
        if streamed.tokens != self.given.keys:
            raise ValueError("the streamed input's tokens are not the ones measured")
        layers = streamed.summaries
        detectors = layers[0].detectors
        return LongSummary(
            pooled=np.stack([layer.thumbnails for layer in layers]),
            statistics=statistics_table([layer.statistics for layer in layers], self.given,
                                        streamed.num_tokens),
            detectors={name: scores if isinstance(scores, str) else
                       np.stack([layer.detectors[name] for layer in layers])
                       for name, scores in detectors.items()},
            roles=np.stack([layer.roles for layer in layers]),
            rollout_raw=self.rollout.raw_pooled, rollout_rolled=self.rollout.rolled_pooled)

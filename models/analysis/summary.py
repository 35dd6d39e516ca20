"""Everything the views keep of an input's attention, reduced layer by layer: every head's
thumbnail, statistics, sentence-detector scores and role shares, the rollout's pooled maps, and
the norm-based shares when the value norms are given.

`Summary` is one reducer made of the others; a whole record (`summarise_record`), a long input
streamed layer by layer (`SummaryStream`, what the app streams with) and a batch of a corpus all
run it. Each layer's maps are read once for all of them (models.analysis.layer_pass), so a
summary costs a fraction of the forward that computed the maps. What it keeps of a 4,096-token
input is a few tens of MB, whatever the model's L x H x T x T.

Dimensions: N inputs seen, L layers, H heads, T tokens, q/k thumbnail blocks, c rollout blocks,
R roles.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from models.analysis.detectors import SENTENCE_DETECTORS, Detectors, DetectorScores
from models.analysis.layer_pass import measure_batch
from models.analysis.norm_shares import NormShareColumns, NormShares, add_norm_columns
from models.analysis.pooling import PooledMap
from models.analysis.reducer import Reducer, reduce_record, stream_into
from models.analysis.roles import Roles, RoleShares
from models.analysis.rollout import ROLLOUT_CELLS, Rollout, RolloutLayer, RolloutMaps
from models.analysis.statistics import HeadStatistics, Statistics
from models.analysis.thumbnails import THUMBNAIL_CELLS, Thumbnails
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord
from models.hooks.streaming import Streamed
from models.loading.tokenize import EncodedText


@dataclass(frozen=True)
class SummaryResult:
    """What a Summary measured of N inputs: each part's result (every input), and, for one
    input (N == 1; `item(i)` picks one), the views' fields: `pooled` (L, H, q, k) thumbnails,
    `statistics` (the table of `head_statistics`, with the norm columns when norms were given),
    `detectors` (name: (L, H) scores, or why the detector cannot measure this input), `roles`
    (L, H, R, see models.analysis.roles.ROLES), `rollout_raw` and `rollout_rolled` (L, c, c)."""

    thumbnails_of: tuple[PooledMap, ...]
    head_statistics: HeadStatistics
    detector_result: DetectorScores
    role_shares: RoleShares
    rollout: RolloutMaps
    norm_shares: NormShareColumns | None = None

    @property
    def num_items(self) -> int:
        return len(self.thumbnails_of)

    def item(self, index: int) -> SummaryResult:
        """Input `index` alone."""
        rollout = self.rollout
        return SummaryResult(
            thumbnails_of=(self.thumbnails_of[index],),
            head_statistics=self.head_statistics.item(index),
            detector_result=self.detector_result.item(index),
            role_shares=RoleShares(self.role_shares.shares[index:index + 1]),
            rollout=RolloutMaps(
                raw_pooled=(rollout.raw_pooled[index],),
                rolled_pooled=(rollout.rolled_pooled[index],),
                num_tokens=(rollout.num_tokens[index],), cells=rollout.cells,
                raw=None if rollout.raw is None else (rollout.raw[index],),
                rolled=None if rollout.rolled is None else (rollout.rolled[index],)),
            norm_shares=None if self.norm_shares is None else self.norm_shares.item(index))

    def _one(self) -> None:
        if self.num_items != 1:
            raise ValueError(f"a summary of {self.num_items} inputs: pick one with item(index)")

    @property
    def thumbnails(self) -> PooledMap:
        """(L, H, q, k) every head's thumbnail, with its blocks and colour tops."""
        self._one()
        return self.thumbnails_of[0]

    @property
    def pooled(self) -> np.ndarray:
        """(L, H, q, k) float32 every head's thumbnail."""
        return self.thumbnails.values

    @cached_property
    def statistics(self) -> pd.DataFrame:
        """One row per (layer, head): `head_statistics`' columns and labels (and the norm-based
        shares when norms were given)."""
        self._one()
        table = self.head_statistics.table()
        return table if self.norm_shares is None else add_norm_columns(table, self.norm_shares)

    @property
    def detectors(self) -> dict[str, np.ndarray | str]:
        """Sentence detector name: (L, H) scores, or why it cannot measure this input."""
        self._one()
        return self.detector_result.by_name()

    def detector_scores(self, name: str) -> np.ndarray:
        """(L, H) scores of the named sentence detector; NotMeasurable says why there are none."""
        self._one()
        return self.detector_result.of(name)

    @property
    def roles(self) -> np.ndarray:
        """(L, H, R) every head's role shares."""
        self._one()
        return self.role_shares.of()

    @property
    def rollout_raw(self) -> np.ndarray:
        """(L, c, c) each layer's head-averaged map, max-pooled."""
        self._one()
        return self.rollout.raw_pooled[0]

    @property
    def rollout_rolled(self) -> np.ndarray:
        """(L, c, c) the rollout up to each layer, max-pooled."""
        self._one()
        return self.rollout.rolled_pooled[0]

    def rollout_pooled(self, layer: int) -> RolloutLayer:
        """Layer `layer`'s head average and rollout, as PooledMaps (what the page draws)."""
        self._one()
        return self.rollout.pooled(layer)

    @property
    def nbytes(self) -> int:
        """The bytes kept: every part's arrays, and one input's statistics table."""
        parts = (self.head_statistics, self.detector_result, self.role_shares, self.rollout,
                 *self.thumbnails_of, *(() if self.norm_shares is None else (self.norm_shares,)))
        table = (int(self.statistics.memory_usage(deep=True).sum()) if self.num_items == 1
                 else 0)
        return sum(part.nbytes for part in parts) + table


class Summary(Reducer):
    """Thumbnails, statistics, sentence detectors, roles and rollout (and the norm-based shares
    when `add` is given norms) of every layer; `progress(done)` is told after each layer of a
    batch."""

    def __init__(self, cells: int = THUMBNAIL_CELLS, rollout_cells: int = ROLLOUT_CELLS,
                 progress: Callable[[int], None] | None = None,
                 exact_rollout: bool = False, rollout_dtype=np.float32):
        self.thumbnails = Thumbnails(cells)
        self.statistics = Statistics()
        self.detectors = Detectors(SENTENCE_DETECTORS)
        self.roles = Roles()
        self.rollout = Rollout(rollout_cells, keep_layers=exact_rollout, dtype=rollout_dtype)
        self.norm_shares: NormShares | None = None
        self.progress = progress
        self._buffers: dict = {}  # the pass's memory, reused from one layer to the next

    def add(self, layer: int, maps: np.ndarray, tokens: TokenBatch,
            norms: np.ndarray | None = None) -> None:
        if tokens.rectangular:
            raise ValueError("a summary needs square maps (self-attention)")
        if layer == 0 and norms is not None and self.norm_shares is None:
            self.norm_shares = NormShares()
        if (norms is None) != (self.norm_shares is None):
            raise ValueError("give the value norms with every layer of every batch, or never")
        reducers = (self.thumbnails, self.statistics, self.detectors, self.roles, self.rollout,
                    *(() if norms is None else (self.norm_shares,)))
        parts = functools.reduce(operator.or_, (reducer.parts for reducer in reducers))
        rows = measure_batch(maps, tokens, parts, norms, self._buffers)  # one pass for all
        for reducer in reducers:
            reducer.take(layer, maps, tokens, rows, norms)
        if self.progress is not None:
            self.progress(layer + 1)

    def result(self) -> SummaryResult:
        return SummaryResult(
            thumbnails_of=self.thumbnails.result(), head_statistics=self.statistics.result(),
            detector_result=self.detectors.result(), role_shares=self.roles.result(),
            rollout=self.rollout.result(),
            norm_shares=None if self.norm_shares is None else self.norm_shares.result())


def summarise_record(record: AttentionRecord, norms: np.ndarray | None = None,
                     **options) -> SummaryResult:
    """The Summary of a whole record (norms: its (L, H, K) value norms, or None); `options`
    are Summary's."""
    (summary,) = reduce_record(record, Summary(**options), norms=norms)
    return summary


class SummaryStream:
    """The `reduce` of one long input's stream (models.hooks.streaming.stream): call it with each
    layer's (H, Q, K) maps in order, then `summary(streamed)` gives the SummaryResult.
    `progress(done)` is told after each layer."""

    def __init__(self, encoded: EncodedText, causal: bool,
                 progress: Callable[[int], None] | None = None, **options):
        self.tokens = TokenBatch.of_encoded(encoded, causal)
        self.encoded_tokens = encoded.tokens
        self.reducer = Summary(progress=progress, **options)
        self._reduce = stream_into(self.reducer, self.tokens)

    def __call__(self, layer: int, maps: np.ndarray, norms: np.ndarray | None = None) -> None:
        self._reduce(layer, maps, norms)

    def summary(self, streamed: Streamed) -> SummaryResult:
        if streamed.tokens != self.encoded_tokens:
            raise ValueError("the streamed input's tokens are not the ones measured")
        return self.reducer.result()

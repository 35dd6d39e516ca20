"""What activation patching keeps and gives back (models/experiments/patching.py computes it):
a cell of a grid, the two runs a grid patches between, and the grid itself with its CSV.

Dimensions: L layers, T tokens, H heads.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np
import torch

from models.experiments.contrast import LogitDifference
from models.experiments.sites import HEAD_POSITION, POSITION_SITES


@dataclass(frozen=True)
class Cell:
    """One patched piece: a layer, and a position and/or a head (None: all of them)."""

    layer: int
    position: int | None = None
    head: int | None = None


@dataclass(frozen=True)
class Baseline:
    """The clean and corrupted runs a grid patches between: each cached point's value (batch of
    one, the batch dimension dropped) and the logit difference of each run."""

    clean: dict[str, torch.Tensor]
    corrupted: dict[str, torch.Tensor]
    clean_metric: float
    corrupted_metric: float

    @property
    def gap(self) -> float:
        return self.clean_metric - self.corrupted_metric

    def normalised(self, raw: np.ndarray | float) -> np.ndarray | float:
        """0 for the corrupted run's logit difference, 1 for the clean run's."""
        return (raw - self.corrupted_metric) / self.gap


@dataclass(frozen=True)
class PatchingGrid:
    """One site's grid: the logit difference with each cell patched (`raw`), and the runs it
    lies between. Rows are layers (heads for head_position); columns positions or heads."""

    site: str
    layer: int | None  # the chosen layer of head_position
    raw: np.ndarray  # (L, T), (L, H) or (H, T)
    clean_metric: float
    corrupted_metric: float
    tokens: tuple[str, ...]  # the clean prompt's, as the tokenizer writes them ("ĠMary")
    texts: tuple[str, ...]  # ... as they read in text (" Mary")
    difference: LogitDifference
    forwards: int  # the batched forwards it took

    @property
    def values(self) -> np.ndarray:
        """Normalised: 0 is the corrupted run, 1 the clean run."""
        return (self.raw - self.corrupted_metric) / (self.clean_metric - self.corrupted_metric)

    @property
    def by_position(self) -> bool:
        """Whether the columns are positions (else heads)."""
        return self.site in (*POSITION_SITES, HEAD_POSITION)

    @property
    def row_name(self) -> str:
        return "head" if self.site == HEAD_POSITION else "layer"

    @property
    def column_name(self) -> str:
        return "position" if self.by_position else "head"

    def csv_text(self) -> str:
        """One row per cell, normalised values, tokens as they read in text:
        layer,position,token,value for the position grids, layer,head,value for the head
        grids, layer,head,position,token,value for one layer's heads by position."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        values = self.values
        if self.site == HEAD_POSITION:
            writer.writerow(("layer", "head", "position", "token", "value"))
            for head, position in np.ndindex(values.shape):
                writer.writerow((self.layer, head, position, self.texts[position],
                                 _number(values[head, position])))
        elif self.by_position:
            writer.writerow(("layer", "position", "token", "value"))
            for layer, position in np.ndindex(values.shape):
                writer.writerow((layer, position, self.texts[position],
                                 _number(values[layer, position])))
        else:
            writer.writerow(("layer", "head", "value"))
            for layer, head in np.ndindex(values.shape):
                writer.writerow((layer, head, _number(values[layer, head])))
        return out.getvalue()


def _number(value: float) -> str:
    return repr(float(value))

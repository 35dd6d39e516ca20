"""Figures built once per server for an input's view and kept with the input's other results,
so that every session asking for the same view (a class opening one link, the page's own
download buttons) draws the same object without building it again."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io

from models.hooks.access import Attention


@dataclass(frozen=True)
class KeptFigure:
    """A figure built once for a view and shown to every session asking for the same view: it
    is never changed once built (charts.show themes a copy). Counted in the trace store by the
    length of its JSON, which is what it holds and what each showing sends."""

    figure: go.Figure
    json_bytes: int

    @property
    def nbytes(self) -> int:
        return self.json_bytes


def kept_figure(attention: Attention, key: tuple[Hashable, ...],
                build: Callable[[], go.Figure]) -> go.Figure:
    """`build()`'s figure for this input and `key` (everything `build` reads besides the input),
    built once per server and kept with the input's other results (`attention.remember`, the
    byte-bounded trace store): a second session opening the same view draws it without building
    it again (and charts.show finds it already themed). Nothing may change the figure it
    returns."""
    def built() -> KeptFigure:
        figure = build()
        return KeptFigure(figure, len(plotly.io.to_json(figure, validate=False)))
    return attention.remember(("figure", *key), built).figure


def head_key(layer: int, head: int, title: str, half_width: bool = False) -> tuple:
    """The key of one head's exact map (its page's figure and its downloads share it)."""
    return ("head", layer, head, title, half_width)

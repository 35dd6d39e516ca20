"""A figure built once and shown to every session (ui/kept.py) is only ever read: themed for
presenter mode and the palette, given readable text, described and serialised without a write to
it, so that two sessions drawing it at the same moment cannot see it half changed (the server's
log once showed "dictionary changed size during iteration" while two sessions opened the
attention maps: plotly's own copy takes each trace's type out of the original and puts it back)."""

from __future__ import annotations

import copy
import json

import numpy as np
import plotly.graph_objects as go
import plotly.io
import pytest

from viz.describe import describe, figure_title
from viz.heatmap import heads_grid, matrix_heatmap
from viz.style import SAFE_PALETTE, STANDARD_PALETTE
from viz.theme import as_drawn, untouched_copy

TOKENS = ("[CLS]", "the", "cat", "sat", "[SEP]")


class ReadOnly(dict):
    """A figure's properties that fail the test when anything writes to them."""

    def _written(self, *args, **kwargs):
        raise AssertionError(f"the shared figure was written to: {args[:1]}")

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = _written

    def __deepcopy__(self, memo):
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}


def read_only(value):
    if isinstance(value, dict):
        return ReadOnly({key: read_only(inner) for key, inner in value.items()})
    if isinstance(value, list):
        return [read_only(inner) for inner in value]
    return value


def as_json(figure) -> dict:
    return json.loads(plotly.io.to_json(figure, validate=False))


def shared(figure):
    """`figure` with every property dict it holds made read-only (plotly keeps a figure's traces'
    and layout's properties in these dicts: a trace's own `_props` are its figure's)."""
    before = as_json(figure)
    figure._data[:] = [read_only(props) for props in figure._data]
    figure._layout = read_only(figure._layout)
    assert as_json(figure) == before  # the same figure, only guarded
    return figure


FIGURES = {
    "one head": lambda: matrix_heatmap(np.eye(5, dtype=np.float32), TOKENS, "Layer 0 · Head 0"),
    "a layer's heads (subplots)": lambda: heads_grid(
        np.random.default_rng(0).random((4, 5, 5)).astype(np.float32), 0, TOKENS),
}


@pytest.mark.parametrize("build", FIGURES.values(), ids=FIGURES.keys())
def test_drawing_a_shared_figure_for_every_setting_only_reads_it(build):
    original = build()
    expected = as_json(original)
    figure = shared(build())
    for presenter in (False, True):
        for palette in (STANDARD_PALETTE, SAFE_PALETTE):
            drawn = as_drawn(figure, presenter, palette)
            assert drawn is not figure
            # the copy is the figure's own (plotly's copy gives the same), then restyled
            assert as_json(drawn)["data"][0]["type"] == original.data[0].type
    assert describe(figure) == describe(original)
    assert figure_title(figure) == figure_title(original)
    assert as_json(figure) == expected


@pytest.mark.parametrize("build", FIGURES.values(), ids=FIGURES.keys())
def test_the_untouched_copy_equals_plotlys_own_and_is_a_figure_of_its_own(build):
    figure = shared(build())
    copied = untouched_copy(figure)
    assert as_json(copied) == as_json(go.Figure(build()))
    title = figure_title(figure)
    copied.update_layout(title_text="changed")
    assert figure_title(copied) == "changed" and figure_title(figure) == title

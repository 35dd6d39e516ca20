"""The interventions' figures and tables (viz/interventions.py) on synthetic arrays: what each
cell shows and says on hover, the order of bars and rows."""

from __future__ import annotations

import numpy as np
import pytest

from viz.interventions import (cell_labels, contribution_bars, disagreement_table,
                               estimate_scatter, lens_map, lens_table, patching_map, rank_figure,
                               rank_ticks, shares_map, tokens_side_by_side)

TOKENS = ("When", "ĠMary", "Ġand", "ĠMary")


def test_a_patching_map_colours_normalised_values_and_hovers_the_raw_ones():
    values = np.array([[0.0, 1.0, -0.5, 0.25], [0.1, 2.0, 0.0, 0.0]])
    raw = values * 4 + 1
    figure = patching_map(values, raw, ["0", "1"], TOKENS, "Residual stream",
                          ("layer", "position"))
    trace = figure.data[0]
    np.testing.assert_array_equal(trace.z, values)
    assert trace.zmid == 0.0 and trace.zmax == 2.0 and trace.zmin == -2.0
    assert trace.customdata.shape == (2, 4, 3)
    assert list(trace.customdata[0, 1]) == ["0", "Mary #1", "5.0000"]
    assert trace.customdata[1, 3, 1] == "Mary #3"  # a repeated token stays distinct
    assert "logit difference: %{customdata[2]}" in trace.hovertemplate
    assert figure.layout.width is None and figure.layout.height <= 560
    heads = patching_map(values[:, :2], raw[:, :2], ["0", "1"], ["0", "1"], "Heads",
                         ("layer", "head"))
    assert heads.data[0].customdata[1, 1, 1] == "1"


def test_the_estimate_beside_exact_patching():
    exact = np.array([[0.0, 1.0], [0.5, 0.2]])
    estimate = np.array([[0.1, 0.8], [0.5, -0.3]])
    labels = cell_labels(["0", "1"], ["ĠMary", "Ġand"], ("layer", "position"))
    assert labels == ["layer 0 · position Mary #0", "layer 0 · position and #1",
                      "layer 1 · position Mary #0", "layer 1 · position and #1"]
    figure = estimate_scatter(exact, estimate, labels, "Correlation 0.90")
    dots = figure.data[1]
    np.testing.assert_array_equal(dots.x, exact.ravel())
    np.testing.assert_array_equal(dots.y, estimate.ravel())
    assert list(figure.data[0].x) == [-0.3, 1.0]  # the diagonal spans both
    table = disagreement_table((((1, 1), 0.2, -0.3), ((0, 1), 1.0, 0.8)), ["0", "1"],
                               ["ĠMary", "Ġand"], ("layer", "position"))
    assert list(table["cell"]) == ["layer 1 · position and #1", "layer 0 · position and #1"]
    np.testing.assert_allclose(table["gap"], [-0.5, -0.2])


def test_two_tokenizations_side_by_side_leave_the_shorter_blank():
    table = tokens_side_by_side(("When", "ĠMary"), ("When", "ĠMary", "Ġand"))
    assert list(table["clean"]) == ["When", "Mary", ""]
    assert list(table["corrupted"]) == ["When", "Mary", "and"]


def test_the_lens_map_writes_each_cells_top_token_and_hovers_the_list():
    probabilities = np.array([[0.1, 0.2], [0.9, 0.6]])
    texts = ((("a", "b"), ("<c>", "d")), ((" Paris", "e"), ("f", "g")))
    top = np.array([[[0.3, 0.2], [0.5, 0.1]], [[0.9, 0.05], [0.6, 0.3]]])
    figure = lens_map(probabilities, texts, top, ("embeddings", "layer 0"), ("The", "Ġcity"),
                      "Lens", "probability")
    trace = figure.data[0]
    np.testing.assert_array_equal(trace.z, probabilities)
    assert [list(row) for row in trace.text] == [["a", "&lt;c&gt;"], [" Paris", "f"]]
    assert trace.customdata[1][0][1] == "The #0"
    assert trace.customdata[1][0][2] == "' Paris' 0.900<br>'e' 0.050"
    table = lens_table(texts, top, ("embeddings", "layer 0"), ("The", "Ġcity"))
    assert list(table.columns) == ["#0 The", "#1 city"]
    assert table.loc["layer 0", "#0 The"] == "' Paris' 0.90"


@pytest.mark.parametrize(("largest", "ticks"), [
    (1, [1]), (4, [1, 2, 5]), (10, [1, 2, 5, 10]), (15, [1, 2, 5, 10, 20]),
    (100, [1, 2, 5, 10, 20, 50, 100]), (101, [1, 10, 100, 1000]),
    (49_152, [1, 10, 100, 1000, 10_000, 100_000])])
def test_a_rank_axis_labels_few_ticks_the_last_at_or_above_the_largest(largest, ticks):
    assert rank_ticks(largest) == ticks


def test_the_rank_by_layer_and_the_shares():
    rank = rank_figure(np.array([500, 20, 1]), np.array([0.0, 0.1, 0.8]),
                       ("embeddings", "layer 0", "layer 1"), " Paris")
    assert list(rank.data[0].y) == [500, 20, 1] and rank.layout.yaxis.type == "log"
    assert rank.layout.yaxis.autorange == "reversed"
    assert list(rank.layout.yaxis.tickvals) == [1, 10, 100, 1000]  # 500: powers of ten
    assert list(rank.layout.yaxis.ticktext) == ["1", "10", "100", "1,000"]
    bars = contribution_bars((("L3H1", 2.0), ("MLP 2", -1.5), ("embeddings", 0.5)), "Shares")
    assert list(bars.data[0].y) == ["embeddings", "MLP 2", "L3H1"]  # the largest on top
    assert list(bars.data[0].marker.color) == ["#2166ac", "#b2182b", "#2166ac"]
    heads = shares_map(np.array([[1.0, -3.0], [0.5, 0.0]]), "Heads")
    assert heads.data[0].zmin == -3.0 and heads.data[0].zmax == 3.0

"""viz/masks, viz/scaling and viz/positions on synthetic data: the figures' values, not "no crash"."""

from __future__ import annotations

import numpy as np
import pytest

from models.hooks.record import AttentionRecord
from viz import style
from viz.masks import allowed_range, mask_figure, mask_steps_figures, masked_heatmap, side_by_side
from viz.positions import similarity_heatmap, sinusoid_heatmap
from viz.scaling import (LEGEND_LINE_HEIGHT, LEGEND_PADDING_PX, dot_product_figure,
                         entropy_curve_figure, legend_above_plot, softmax_bars_figure)

TOKENS = ("[CLS]", "<b>x</b>", "y", "[SEP]")
CAUSAL = np.tril(np.ones((4, 4), dtype=bool))


def causal_record() -> AttentionRecord:
    weights = np.tril(np.ones((4, 4)))
    weights /= weights.sum(axis=1, keepdims=True)
    return AttentionRecord(tokens=TOKENS, weights=weights[None, None].astype(np.float32),
                           source="synthetic", masks=("causal",))


def test_masked_cells_are_empty_grey_and_out_of_the_colour_scale():
    scores = np.arange(16, dtype=float).reshape(4, 4) - 100 * ~CAUSAL  # masked cells very low
    figure = masked_heatmap(scores, CAUSAL, TOKENS, "masked")
    values, grey = figure.data
    assert np.isnan(values.z[~CAUSAL]).all() and np.array_equal(values.z[CAUSAL], scores[CAUSAL])
    assert (values.zmin, values.zmax) == (0.0, 15.0)  # the -100s do not stretch the scale
    assert values.hoverongaps is False
    assert np.isnan(grey.z[CAUSAL]).all() and np.isfinite(grey.z[~CAUSAL]).all()
    assert grey.colorscale[0][1] == grey.colorscale[-1][1] == style.MASKED_COLOR
    assert grey.showscale is False and "masked" in grey.hovertemplate
    assert grey.y[1].startswith("&lt;b&gt;x&lt;/b&gt;")  # what the user typed is escaped
    assert list(grey.x) == list(values.x)  # the grey layer sits on the same cells


def test_nothing_masked_means_no_grey_layer():
    figure = masked_heatmap(np.ones((4, 4)), np.ones((4, 4), dtype=bool), TOKENS, "all")
    assert len(figure.data) == 1


def test_allowed_range_edge_cases():
    assert allowed_range(np.zeros((2, 2)), np.zeros((2, 2), dtype=bool)) == (0.0, 1.0)
    low, high = allowed_range(np.full((2, 2), 3.0), np.ones((2, 2), dtype=bool))
    assert low < 3.0 < high


def test_mask_figure_and_the_four_steps():
    figure = mask_figure(CAUSAL, TOKENS, "mask")
    assert figure.data[0].showscale is False and "may attend" in figure.data[0].hovertemplate
    record = causal_record()
    scores = np.random.default_rng(0).standard_normal((4, 4))
    mask, raw, masked, weights = mask_steps_figures(record, scores, CAUSAL, 16, 0, 0)
    assert "√16" in raw.layout.title.text
    assert np.isfinite(raw.data[0].z).all() and np.isnan(masked.data[0].z[~CAUSAL]).all()
    assert np.array_equal(weights.data[0].z, record.head(0, 0))


def test_side_by_side_shares_one_colour_scale():
    record = causal_record()
    figure = side_by_side((record, record), 0, 0, ("left", "right"))
    assert [trace.coloraxis for trace in figure.data] == ["coloraxis", "coloraxis"]
    assert (figure.layout.coloraxis.cmin, figure.layout.coloraxis.cmax) == (0.0, 1.0)
    assert figure.layout.yaxis2.scaleanchor == "x2"
    assert "&lt;b&gt;x&lt;/b&gt;" in figure.layout.xaxis2.ticktext
    # the same rows on the right are named once (their labels fell over the left map's edge);
    # maps of other tokens keep theirs
    assert figure.layout.yaxis.showticklabels and figure.layout.yaxis2.showticklabels is False
    other = AttentionRecord(tokens=("a", "b", "c", "d"), weights=record.weights,
                            source="other", masks=record.masks)
    assert side_by_side((record, other), 0, 0, ("l", "r")).layout.yaxis2.showticklabels
    assert figure.layout.yaxis.constraintoward == "top"  # square maps under their key labels
    with pytest.raises(ValueError):
        side_by_side((record,), 0, 0, ("a", "b"))


def test_scaling_figures_hold_the_numbers():
    dims = np.array([1, 10, 100])
    measured = np.array([0.64, 2.4, 7.9])
    approximation = np.sqrt(2 * dims / np.pi)
    figure = dot_product_figure(dims, measured, approximation, samples=50, highlight=(10, 2.4),
                                x_scale="log-log")
    assert figure.layout.xaxis.type == "log" and figure.layout.xaxis2.type == "log"
    ratio = next(t for t in figure.data if t.name == "measured / √(2d/π)")
    np.testing.assert_allclose(ratio.y, measured / approximation)
    assert "approximation" in figure.layout.annotations[0].text
    bars = softmax_bars_figure(4, unscaled_scores=np.array([9.0, 0.0]),
                               unscaled_weights=np.array([1.0, 0.0]),
                               scaled_scores=np.array([4.5, 0.0]),
                               scaled_weights=np.array([0.99, 0.01]), entropies=(0.0, 0.08))
    assert "0.00 bits" in bars.data[0].name and "0.08 bits" in bars.data[1].name
    curve = entropy_curve_figure(dims, np.array([3.0, 1.0, 0.1]), np.array([3.0, 2.9, 2.9]),
                                 num_keys=8, highlight=10)
    assert curve.data[0].y.tolist() == [3.0, 3.0, 3.0]  # log2(8): uniform
    assert list(curve.data[-1].x) == [10, 10]


def test_the_dot_product_legend_gets_its_own_room_above_the_plot():
    dims = np.array([1, 10, 100])
    approximation = np.sqrt(2 * dims / np.pi)
    figure = dot_product_figure(dims, approximation, approximation, samples=50, highlight=(10, 2.5))
    top, height = figure.layout.margin.t, figure.layout.height
    legend_above_plot(figure, 18)
    room = 3 * 18 * LEGEND_LINE_HEIGHT + LEGEND_PADDING_PX  # three entries, the ratio has none
    assert figure.layout.margin.t == top + round(room) and figure.layout.height == height + round(room)
    legend = figure.layout.legend  # above the plot area (paper y 1), not over the curves
    assert (legend.y, legend.yanchor, legend.orientation, legend.font.size) == (1.0, "bottom", "v", 18)
    title = figure.layout.title  # at the top: centred in the taller margin it would meet the legend
    assert (title.yref, title.y, title.yanchor) == ("container", 1.0, "top")


def test_position_figures():
    encoding = np.linspace(-1, 1, 12).reshape(3, 4)
    figure = sinusoid_heatmap(encoding)
    assert figure.data[0].z.shape == (3, 4) and figure.data[0].zmin == -1.0
    similarity = similarity_heatmap(np.eye(5), "eye")
    assert similarity.layout.yaxis.scaleanchor == "x" and similarity.data[0].z.shape == (5, 5)

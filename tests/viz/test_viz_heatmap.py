"""The heatmap builders, checked on the figure's data."""

import numpy as np
import pytest

from models.hooks.record import AttentionRecord
from viz.heatmap import attention_heatmap, layer_heads_grid


def make_record(tokens, layers=2, heads=3, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.random((layers, heads, len(tokens), len(tokens)))
    return AttentionRecord(tokens=tuple(tokens), weights=raw / raw.sum(-1, keepdims=True),
                           source="synthetic")


def test_single_head_heatmap_values_labels_and_scale():
    record = make_record(["[CLS]", "time", "flies", "flies", "[SEP]"])
    figure = attention_heatmap(record, 1, 2)
    trace = figure.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), record.weights[1, 2])
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)
    assert list(figure.layout.xaxis.ticktext) == ["[CLS]", "time", "flies", "flies", "[SEP]"]
    assert list(figure.layout.yaxis.ticktext) == list(figure.layout.xaxis.ticktext)
    assert figure.layout.yaxis.autorange == "reversed"  # queries read downwards
    assert "%{z:.3f}" in trace.hovertemplate and "%{y}" in trace.hovertemplate
    # duplicate tokens keep their own rows and columns: the hover names query 3 and key 2
    assert figure.layout.xaxis.type == figure.layout.yaxis.type == "category"
    assert (trace.y[3], trace.x[2]) == ("flies #3", "flies #2")
    assert len(set(trace.x)) == 5
    assert figure.layout.title.text == "Layer 1 · Head 2"


def test_user_text_is_escaped_in_labels_and_hover():
    record = make_record(["<script>alert(1)</script>", "<b>x</b>", " "])
    figure = attention_heatmap(record, 0, 0)
    labels = list(figure.layout.xaxis.ticktext)
    assert labels[0] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert labels[1] == "&lt;b&gt;x&lt;/b&gt;"
    assert labels[2] == "␣"
    assert "<script>" not in figure.to_json()
    assert figure.data[0].x[0] == "&lt;script&gt;alert(1)&lt;/script&gt; #0"


def test_long_inputs_thin_the_tick_labels_but_keep_every_value():
    record = make_record([f"t{i}" for i in range(200)], layers=1, heads=1)
    figure = attention_heatmap(record, 0, 0)
    assert np.asarray(figure.data[0].z).shape == (200, 200)
    ticks = list(figure.layout.xaxis.tickvals)
    assert 2 < len(ticks) <= 64 and ticks[0] == "t0 #0" and ticks[-1] == "t199 #199"
    assert figure.layout.xaxis.ticktext[-1] == "t199"


def test_layer_grid_has_every_head_on_one_shared_scale():
    record = make_record(["a", "b", "c", "d"], layers=2, heads=6)
    figure = layer_heads_grid(record, 1)
    assert len(figure.data) == 6
    assert {trace.coloraxis for trace in figure.data} == {"coloraxis"}
    assert (figure.layout.coloraxis.cmin, figure.layout.coloraxis.cmax) == (0.0, 1.0)
    for head, trace in enumerate(figure.data):
        np.testing.assert_allclose(np.asarray(trace.z), record.weights[1, head], atol=5e-4)
    assert [a.text for a in figure.layout.annotations] == [f"Head {h}" for h in range(6)]
    # 6 heads in 2 rows of 4: a head's map sits in its column's x axis and its row's y axis, and
    # its title is centred above that cell; the cells do not overlap
    layout = figure.layout
    for head, (trace, title) in enumerate(zip(figure.data, layout.annotations)):
        x_axis = layout[trace.xaxis.replace("x", "xaxis")]
        y_axis = layout[trace.yaxis.replace("y", "yaxis")]
        assert (trace.xaxis, trace.yaxis) == (["x", "x2", "x3", "x4"][head % 4], ["y", "y2"][head // 4])
        assert title.x == pytest.approx(sum(x_axis.domain) / 2)
        assert title.y == pytest.approx(y_axis.domain[1]) and title.yanchor == "bottom"
        assert y_axis.autorange == "reversed"  # the first query on top
    spans = sorted(layout[f"xaxis{i}"].domain for i in ("", 2, 3, 4))
    assert all(left[1] < right[0] for left, right in zip(spans, spans[1:]))
    assert layout.yaxis.domain[0] > layout.yaxis2.domain[1]  # the first row above the second


def test_byte_level_tokens_are_shown_as_the_text_they_spell():
    record = make_record(["The", "Ġcaf", "Ã©", "Ċ", "Ġ<", "b", ">"])
    labels = list(attention_heatmap(record, 0, 0).layout.xaxis.ticktext)
    assert labels == ["The", "caf", "é", "↵", "&lt;", "b", "&gt;"]
    assert record.tokens[1] == "Ġcaf"  # the record keeps the tokenizer's own spelling
    wordpiece = make_record(["[CLS]", "café", "##s", "Ã©"])
    assert list(attention_heatmap(wordpiece, 0, 0).layout.xaxis.ticktext) == ["[CLS]", "café", "##s", "Ã©"]

"""Issue 14, section 5: what the walkthrough found broken or confusing on the bertviz, one-row,
scaling and all-heads pages (the browser half is in test_browser_walkthrough.py)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from models.teaching.arithmetic import key_products, row_arithmetic
from models.hooks.record import AttentionRecord
from models.teaching.scaling import CHAPTER_DIMENSIONS, DIMENSION_CHOICES
from models.loading.kinds import PRETRAINED
from models.loading.source import ModelSource
from models.loading.tokenize import encode
from tests.app_support import array, figures, run_page, texts
from tests.reference import reference_attentions
from viz import bertviz_views as bv
from viz.arithmetic import products_figure, row_steps_figure
from models.analysis.thumbnails import thumbnails
from viz.overview import TILE_TRACE, all_heads_figure, clicked_tile
from viz.scaling import LINEAR_SCALE, LOG_LOG_SCALE, SQRT_SCALE, dot_product_figure

TEXT = "Time flies like an arrow."
TOKENS = ["[CLS]", "time", "flies", "like", "an", "arrow", ".", "[SEP]"]


def synthetic(tokens=6, layers=6, heads=12, pair=False, seed=0) -> AttentionRecord:
    raw = np.random.default_rng(seed).random((layers, heads, tokens, tokens))  # (L, H, Q, K)
    segments = tuple(0 if i < tokens // 2 else 1 for i in range(tokens)) if pair else ()
    return AttentionRecord(tuple(f"t{i}" for i in range(tokens)),
                           (raw / raw.sum(-1, keepdims=True)).astype(np.float32), "synthetic",
                           segment_ids=segments)


def params_of(html: str) -> dict:
    return json.loads(re.search(r"const params = (\{.*?\}); // HACK", html).group(1))


def frames(at) -> list[str]:
    return [element.proto.srcdoc for element in at.get("iframe")]


# --- bertviz: layers and heads, limits, clicks ------------------------------------------------

def test_view_choice_checks_and_normalises_its_layers_and_heads():
    choice = bv.ViewChoice(bv.MODEL_VIEW, layers=(4, 1, 4), heads=[11, 0])
    assert choice.layers == (1, 4) and choice.heads == (0, 11)
    assert hash(choice) == hash(bv.ViewChoice(bv.MODEL_VIEW, (1, 4), (0, 11)))  # a cache key
    with pytest.raises(ValueError, match="at least one of the layers"):
        bv.ViewChoice(bv.MODEL_VIEW, layers=())
    with pytest.raises(ValueError, match="only for the model view"):
        bv.ViewChoice(bv.HEAD_VIEW, heads=(1,))
    with pytest.raises(ValueError, match="unknown bertviz view"):
        bv.ViewChoice("neuron")
    with pytest.raises(ValueError, match="head 12 does not exist"):
        bv.model_view_html(synthetic(), bv.ViewChoice(bv.MODEL_VIEW, heads=(12,)))


def test_fewer_layers_and_heads_raise_the_model_views_token_limit():
    minilm = synthetic(4)
    assert bv.max_tokens(minilm, bv.MODEL_VIEW) == 45  # 72 heads x 45^2 <= 150,000 lines
    one_layer = bv.ViewChoice(bv.MODEL_VIEW, layers=(5,))
    assert bv.max_tokens(minilm, one_layer) == 111  # 12 x 111^2 <= 150,000
    two_heads = bv.ViewChoice(bv.MODEL_VIEW, layers=(0, 1), heads=(3, 7))
    assert bv.max_tokens(minilm, two_heads) == bv.MAX_TOKENS  # 4 x 128^2 fits: the cap
    assert bv.max_tokens(minilm, bv.ViewChoice(bv.HEAD_VIEW)) == bv.max_tokens(minilm, bv.HEAD_VIEW)


@pytest.mark.parametrize("tokens, layers, heads", [
    (45, None, None),  # 72 x 45^2 <= 150,000 lines: everything
    (46, (0, 1, 2, 4, 5), None),  # 70 thumbnails: five whole layers, spread from first to last
    (82, (0,), None),  # 22 thumbnails: one layer
    (120, (0,), tuple(range(10))),  # 10 thumbnails: ten heads of the first layer
])
def test_default_choice_is_the_most_that_fits(tokens, layers, heads):
    record = synthetic(tokens, seed=1)
    choice = bv.default_model_choice(record)
    assert (choice.layers, choice.heads) == (layers, heads)
    assert bv.fits(record, choice)
    thumbnails = choice.layer_count(record) * choice.head_count(record)
    assert thumbnails * tokens ** 2 <= bv.MAX_DRAWN_LINES


def test_model_view_draws_only_the_chosen_layers_and_heads():
    record = synthetic(5, pair=True)
    html = bv.view_html(record, bv.ViewChoice(bv.MODEL_VIEW, layers=(1, 4), heads=(0, 11)))
    params = params_of(html)
    assert params["include_layers"] == [1, 4] and params["include_heads"] == [0, 11]
    assert params["total_heads"] == 12
    expected = np.round(record.weights[np.ix_([1, 4], [0, 11])].astype(np.float64), 3)
    np.testing.assert_allclose(np.array(params["attention"][0]["attn"]), expected, atol=1e-9)
    a_to_b = np.array(params["attention"][3]["attn"])  # the pair filter keeps the choice
    np.testing.assert_allclose(a_to_b, expected[:, :, :2, 2:], atol=1e-9)
    assert "function fit(drawing)" in html and 'drawing.style.maxWidth = "100%"' in html
    head_html = bv.head_view_html(record)
    assert "function number(drawing)" in head_html and "function fit(" not in head_html


def test_bertviz_page_offers_layers_and_heads_and_says_what_clicks_do():
    at = run_page("bertviz_views")
    said = texts(at)
    assert "**Double-click** a square to show only that head" in said
    assert "**Click** a square to hide or show that head" in said
    assert "heads 10 and up reuse them from head 0" in said  # MiniLM: 12 heads, bertviz: 10 colours
    at.radio(key="bertviz_view").set_value("model").run()
    assert at.multiselect(key="bertviz_layers").value == list(range(6))
    assert at.multiselect(key="bertviz_heads").value == list(range(12))
    assert "**Click** a thumbnail to draw it large" in texts(at)
    at.multiselect(key="bertviz_layers").set_value([4, 1]).run()
    at.multiselect(key="bertviz_heads").set_value([11, 0, 5]).run()
    assert not at.exception and not at.error
    (html,) = frames(at)
    params = params_of(html)
    assert params["include_layers"] == [1, 4] and params["include_heads"] == [0, 5, 11]
    attn = np.array(params["attention"][0]["attn"])
    assert attn.shape == (2, 3, 8, 8) and params["attention"][0]["left_text"] == TOKENS
    at.multiselect(key="bertviz_heads").set_value([]).run()
    assert frames(at) == [] and "at least one layer and one head" in at.info[0].value


def test_a_longer_input_starts_the_model_view_again_with_what_fits():
    at = run_page("bertviz_views", state={"bertviz_view": "model"})
    assert at.multiselect(key="bertviz_layers").value == list(range(6))
    at.session_state["sb_text"] = " ".join(["word"] * 60)  # 62 tokens: 39 thumbnails, 3 layers
    at.run()
    assert at.multiselect(key="bertviz_layers").value == [0, 2, 5]
    assert "bertviz draws about 36 thumbnails quickly" in texts(at)
    (html,) = frames(at)
    assert params_of(html)["include_layers"] == [0, 2, 5]


# --- one row, step by step --------------------------------------------------------------------

def hf_query_and_keys(loaded, text: str, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """q (Q, Dh) and k (K, Dh) of one head straight from the Hugging Face BERT's own modules."""
    encoded = encode(loaded.tokenizer, text, None, loaded.max_tokens)
    with torch.inference_mode():
        output = loaded.model(**encoded.model_inputs(), output_hidden_states=True)
        hidden = output.hidden_states[layer][0]  # (T, D): the input of `layer`
        attention = loaded.model.encoder.layer[layer].attention.self
        width = loaded.model.config.hidden_size // loaded.model.config.num_attention_heads
        part = slice(head * width, (head + 1) * width)
        return (attention.query(hidden)[:, part].numpy(),  # (Q, Dh)
                attention.key(hidden)[:, part].numpy())  # (K, Dh)


def test_key_products_are_the_models_q_times_k_and_add_up_to_q_dot_k(default_model):
    runner = ModelSource(PRETRAINED, default_model.name).load(
        pretrained=lambda name: default_model)
    trace = runner.run(TEXT, None)
    row = row_arithmetic(trace, 2, 5, 3)
    query, keys = hf_query_and_keys(default_model, TEXT, 2, 5)
    for key in range(len(TOKENS)):
        parts = key_products(row, key)
        np.testing.assert_allclose(parts.products, query[3] * keys[key], rtol=1e-4, atol=1e-5)
        assert parts.total == pytest.approx(float(query[3].astype(np.float64) @ keys[key]),
                                            rel=1e-4, abs=1e-4)
        assert parts.difference < 1e-4 * max(1.0, abs(parts.dot))
    with pytest.raises(ValueError, match="key 8 does not exist"):
        key_products(row, 8)


def small_row():
    from models.teaching.arithmetic import RowArithmetic

    rng = np.random.default_rng(3)
    query, keys, values = rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    dots = keys @ query
    weights = np.exp(dots / 2) / np.exp(dots / 2).sum()
    return RowArithmetic(layer=0, head=0, query_index=1, query=query, keys=keys, values=values,
                         dots=dots, scale=2.0, scaled=dots / 2, allowed=np.ones(5, bool),
                         weights=weights, output=weights @ values, model_output=weights @ values)


def test_every_step_has_token_labels_and_special_tokens_can_be_left_out():
    row, tokens = small_row(), ("[CLS]", "a", "b", "c", "[SEP]")
    figure = row_steps_figure(row, tokens)
    assert [figure.layout[f"xaxis{n}"].showticklabels for n in ("", "2", "3")] == [True] * 3
    assert all(list(trace.x) == ["[CLS] #0", "a #1", "b #2", "c #3", "[SEP] #4"]
               for trace in figure.data)
    shown = row_steps_figure(row, tokens, shown_keys=[1, 2, 3])
    assert all(list(trace.x) == ["a #1", "b #2", "c #3"] for trace in shown.data)
    np.testing.assert_allclose(shown.data[2].y, row.weights[1:4])  # the model's softmax, kept
    title = shown.layout.annotations[2].text
    assert "over all 5 keys" in title and f"{row.weights[1:4].sum():.3f}" in title


def test_products_figure_shows_q_k_and_their_products():
    row = small_row()
    parts = key_products(row, 2)
    figure = products_figure(parts, ("[CLS]", "a", "b", "c", "[SEP]"), 1)
    strip, bars = figure.data
    np.testing.assert_allclose(np.array(strip.z), [row.query, row.keys[2], row.query * row.keys[2]])
    assert list(strip.y) == ["q (a #1)", "k (b #2)", "q × k"]
    assert sum(bars.y) == pytest.approx(row.dots[2])
    assert f"q · k = {parts.total:.4f}" in figure.layout.annotations[1].text


def test_arithmetic_page_leaves_specials_out_and_takes_one_q_dot_k_apart(default_model):
    at = run_page("row_arithmetic", state={"arith_layer": 2, "arith_head": 5, "arith_query": 3,
                                           "arith_no_special": True, "arith_key": 5})
    steps, products, _ = figures(at)
    expected = reference_attentions(default_model, TEXT)[2, 5, 3]
    for trace in steps["data"]:
        assert trace["x"] == [f"{t} #{i}" for i, t in enumerate(TOKENS)][1:-1]
    np.testing.assert_allclose(array(steps["data"][2]["y"]), expected[1:-1], atol=1e-5)
    assert all(steps["layout"][f"xaxis{n}"]["showticklabels"] for n in ("", "2", "3"))
    assert "the softmax is still the model's, over every key it used" in texts(at)
    dot = array(steps["data"][0]["y"])[4]  # key 5 "arrow" is the fifth bar once [CLS] is out
    bars = array(products["data"][1]["y"])
    assert len(bars) == 32 and bars.sum() == pytest.approx(dot, rel=1e-4, abs=1e-4)
    assert "32 products add up to" in texts(at)
    assert len(at.dataframe[0].value) == 8  # the table still lists every key


# --- why attention is scaled ------------------------------------------------------------------

def test_the_chapters_dimensions_can_be_chosen():
    assert set(CHAPTER_DIMENSIONS) <= set(DIMENSION_CHOICES)
    assert {64, 512, 4096} <= set(DIMENSION_CHOICES) and list(DIMENSION_CHOICES) == \
        sorted(set(DIMENSION_CHOICES))


def scaling_data():
    dims = np.array([1, 10, 100, 1000, 10_000])
    measured = np.sqrt(2 * dims / np.pi) * np.array([0.8, 0.95, 1.0, 1.0, 1.0])
    return dims, measured, np.sqrt(2 * dims / np.pi)


def test_sqrt_spacing_draws_sqrt_d_as_a_straight_line():
    dims, measured, approximation = scaling_data()
    figure = dot_product_figure(dims, measured, approximation, samples=10, highlight=(10, 2.5))
    line = next(t for t in figure.data if t.name.startswith("√(2d/π)"))
    np.testing.assert_allclose(line.x, np.sqrt(dims))
    np.testing.assert_allclose(np.diff(line.y) / np.diff(line.x), math.sqrt(2 / math.pi))
    assert figure.layout.xaxis.type == "linear" and figure.layout.yaxis.type != "log"
    assert list(figure.layout.xaxis.ticktext) == ["0", "100", "500", "1,000", "2,500", "5,000",
                                                  "10,000"]
    np.testing.assert_allclose(figure.layout.xaxis.tickvals, np.sqrt([0, 100, 500, 1000, 2500,
                                                                      5000, 10_000]))
    assert "straight line" in figure.layout.annotations[0].text
    log_log = dot_product_figure(dims, measured, approximation, samples=10, x_scale=LOG_LOG_SCALE)
    assert log_log.layout.xaxis.type == log_log.layout.yaxis.type == "log"
    assert log_log.layout.yaxis2.type != "log"  # the ratio stays linear
    assert "slope p" in log_log.layout.annotations[0].text
    linear = dot_product_figure(dims, measured, approximation, samples=10, x_scale=LINEAR_SCALE)
    assert linear.layout.xaxis.type == "linear" and list(linear.data[0].x) == list(dims)
    with pytest.raises(ValueError, match="unknown x scale"):
        dot_product_figure(dims, measured, approximation, samples=10, x_scale="log")


@pytest.mark.parametrize("dimension", CHAPTER_DIMENSIONS)
def test_scaling_page_at_the_chapters_dimensions(dimension):
    at = run_page("scaling", state={"scaling_dk": dimension})
    assert at.radio(key="scaling_axis").value == SQRT_SCALE
    dots = figures(at)[0]
    highlight = next(t for t in dots["data"] if t["name"].startswith("your d_k"))
    assert list(array(highlight["customdata"])) == [dimension]
    mean_abs = array(highlight["y"])[0]
    assert mean_abs == pytest.approx(math.sqrt(2 * dimension / math.pi), rel=0.06)
    assert f"d_k = {dimension:,} the mean |q·k|" in texts(at)
    at.radio(key="scaling_axis").set_value(LOG_LOG_SCALE).run()
    assert not at.exception
    assert figures(at)[0]["layout"]["yaxis"]["type"] == "log"


# --- all heads: a click on a tile -------------------------------------------------------------

def test_every_tile_has_a_clickable_marker_at_its_centre():
    record = synthetic(100, layers=3, heads=4)
    figure = all_heads_figure(thumbnails(record), selected=(1, 2))
    (tiles,) = [trace for trace in figure.data if trace.name == TILE_TRACE]
    side = figure.data[0].z.shape[0] // 3  # 64: each map max-pooled
    assert [list(pair) for pair in tiles.customdata] == [[l, h] for l in range(3) for h in range(4)]
    assert list(tiles.x[:4]) == [(h + 0.5) * side - 0.5 for h in range(4)]
    assert list(tiles.y[::4]) == [(l + 0.5) * side - 0.5 for l in range(3)]
    assert figure.layout.clickmode == "event+select"


def test_a_clicked_point_maps_to_its_layer_and_head():
    point = {"curve_number": 1, "point_index": 43, "customdata": {"0": 3, "1": 7}}  # as sent
    assert clicked_tile([point], 6, 12) == (3, 7)
    assert clicked_tile([{"customdata": [5, 11]}], 6, 12) == (5, 11)
    assert clicked_tile([{"customdata": [6, 0]}], 6, 12) is None  # not a tile of this model
    assert clicked_tile([{"curve_number": 0, "point_index": 4}], 6, 12) is None  # the heatmap
    assert clicked_tile([], 6, 12) is None

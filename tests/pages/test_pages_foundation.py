"""The app, run by Streamlit's AppTest, renders the real model's attention."""

import numpy as np
import pytest

from models.loading.pretrained import DEFAULT_MODEL
from tests.reference import reference_attentions
from tests.app_support import array, figures, run_page, shown, texts


def test_default_sentence_heatmap_shows_the_models_own_weights(default_model):
    at = run_page()
    assert at.title[0].value == "Attention maps"
    assert at.sidebar.text_area[0].value == "Time flies like an arrow."
    heatmap, grid = figures(at)
    expected = reference_attentions(default_model, "Time flies like an arrow.")
    trace = heatmap["data"][0]
    np.testing.assert_allclose(array(trace["z"]), expected[0, 0], atol=1e-5)
    assert heatmap["layout"]["xaxis"]["ticktext"] == list(default_model.tokenizer.tokenize("[CLS] Time flies like an arrow. [SEP]"))
    assert len(grid["data"]) == 12
    assert at.slider(key="maps_layer").max == 5
    assert at.slider(key="maps_head").max == 11


def test_choosing_layer_and_head_redraws_that_head(default_model):
    at = run_page()
    at.slider(key="maps_layer").set_value(3)
    at.slider(key="maps_head").set_value(7)
    at.run()
    heatmap = figures(at)[0]
    expected = reference_attentions(default_model, "Time flies like an arrow.")
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), expected[3, 7], atol=1e-5)
    assert heatmap["layout"]["title"]["text"] == "Layer 3 · Head 7"


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_shows_a_prompt_not_an_error(text):
    at = run_page(text=text)
    assert "Type a sentence" in at.info[0].value
    assert not figures(at) and not at.error


def test_too_long_text_is_truncated_with_a_notice():
    at = run_page(text="word " * 700)
    assert "the last 190 tokens were dropped" in at.warning[0].value
    heatmap = figures(at)[0]
    assert array(heatmap["data"][0]["z"]).shape == (512, 512)


def test_html_in_the_input_is_shown_as_text():
    at = run_page(text="<script>alert('x')</script> <img src=x onerror=alert(1)>")
    heatmap = figures(at)[0]
    labels = heatmap["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in labels and "script" in labels
    assert not any("<" in label for label in labels)


def test_any_unicode_works():
    at = run_page(text="🚀 東京 שלום zero\u200bwidth ﷽")
    heatmap = figures(at)[0]
    assert heatmap["layout"]["xaxis"]["ticktext"][0] == "[CLS]"
    assert not at.error


def test_sentence_pair_shows_both_sentences():
    at = run_page(text="time flies like an arrow", pair="fruit flies like a banana")
    labels = figures(at)[0]["layout"]["xaxis"]["ticktext"]
    assert labels == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]",
                      "fruit", "flies", "like", "a", "banana", "[SEP]"]


def test_copied_weights_say_they_match_and_by_how_much():
    at = run_page(state={"sb_kind": "scratch-copied"})
    message = shown(at.success[0].value)
    assert "reproduces" in message
    difference = float(message.rsplit("is ", 1)[1].rstrip("."))
    assert difference <= 1e-5


def test_random_weights_depend_on_the_seed():
    first = figures(run_page(state={"sb_kind": "scratch-random", "sb_seed": 1}))[0]
    second = figures(run_page(state={"sb_kind": "scratch-random", "sb_seed": 2}))[0]
    assert len(first["data"]) == 1
    assert not np.allclose(array(first["data"][0]["z"]), array(second["data"][0]["z"]))
    grid = figures(run_page(state={"sb_kind": "scratch-random", "sb_seed": 1}))[1]
    assert len(grid["data"]) == 4  # the small from-scratch encoder has 4 heads


def test_a_model_that_cannot_load_keeps_the_previous_one():
    at = run_page()
    at.sidebar.text_input(key="sb_model_input").set_value("/no/such/model/folder")
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert "there is no model folder by that name" in shown(at.sidebar.error[0].value)
    assert f"Pretrained model: {DEFAULT_MODEL}" in texts(at)
    assert len(figures(at)[1]["data"]) == 12


def test_selection_past_the_new_models_size_falls_back():
    at = run_page()
    at.slider(key="maps_layer").set_value(5)
    at.slider(key="maps_head").set_value(11)
    at.run()
    at.sidebar.radio(key="sb_kind").set_value("scratch-random")
    at.run()
    assert not at.exception
    assert at.slider(key="maps_layer").value == 3
    assert at.slider(key="maps_head").value == 3
    assert figures(at)[0]["layout"]["title"]["text"] == "Layer 3 · Head 3"


def test_model_runs_once_per_input_not_per_widget_change():
    from ui import cache

    at = run_page(text="Counting forward calls, once.")
    calls = []
    model = cache.pretrained(DEFAULT_MODEL).model
    handle = model.register_forward_hook(lambda *args: calls.append(1))
    try:
        for layer, head in [(1, 2), (4, 0), (5, 11)]:
            at.slider(key="maps_layer").set_value(layer)
            at.slider(key="maps_head").set_value(head)
            at.run()
        assert calls == []
        at.sidebar.text_area[0].set_value("A different sentence runs the model.")
        at.run()
        assert calls == [1]
        assert cache.pretrained(DEFAULT_MODEL).model is model  # loaded once per process
    finally:
        handle.remove()

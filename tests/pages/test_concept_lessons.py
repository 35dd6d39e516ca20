"""The lesson steps of the chapter concepts added with their pages: each draws its live figure
from the running model (or says why not, without training), and the scaling step names its bars
by the row's tokens, shown as words."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from models.experiments import masked_lm
from models.loading.kinds import DECODER
from models.teaching.attention_cost import MINILM, flop_count
from tests.app_support import array, figures, texts
from tests.pages.test_lessons import open_view
from viz.labels import numbered_labels

TEXT = "The cat sat on the mat."
FEW_STEPS = replace(masked_lm.DEFAULT_SETTINGS, steps=3, warmup_steps=1, batch_size=4,
                    hidden_size=16, num_heads=2, num_layers=1, intermediate_size=32)


def open_step(lesson: str, step: int, text: str = TEXT, model: str | None = None):
    query = {"text": text, "lesson": lesson, "step": str(step)}
    return open_view("lessons", query | ({"model": model} if model else {}))


def test_the_scaling_steps_bars_are_the_rows_tokens_as_words(encoder_runner, decoder_runner):
    at = open_step("scaling", 2)
    bars = figures(at)[0]
    tokens = encoder_runner.run(TEXT).record.tokens
    assert bars["data"][0]["x"] == numbered_labels(tokens)
    assert bars["data"][0]["x"][2] == "cat #2"
    at = open_step("scaling", 2, model=DECODER.value)
    labels = figures(at)[0]["data"][0]["x"]
    assert len(labels) == decoder_runner.run(TEXT).record.num_tokens
    assert not any("Ġ" in label or label.startswith("key ") for label in labels)
    assert labels[:3] == ["The #0", "cat #1", "sat #2"]


def test_the_cost_step_draws_the_chapters_arithmetic():
    at = open_step("scaling", 3)
    flops = figures(at)[0]
    lengths = array(flops["data"][0]["x"]).astype(int)
    np.testing.assert_array_equal(array(flops["data"][0]["y"]),
                                  [flop_count(int(n), MINILM).quadratic for n in lengths])


def test_the_neuron_view_step_draws_bertviz_for_the_sidebar_sentence():
    at = open_step("scratch", 5)
    (html,) = [element.proto.srcdoc for element in at.get("iframe")]
    assert '"left_text": ["[CLS]", "the", "cat", "sat"' in html


def test_the_encoder_block_steps_follow_the_sentence_through_the_layer():
    at = open_step("block", 2)
    walk = figures(at)[0]
    assert "step by step" in walk["layout"]["title"]["text"]
    at = open_step("block", 3)
    table = at.dataframe[0].value
    assert len(table) > 5
    what = " ".join(table["what"]).lower()
    assert "layer norm" in what and "residual" in what and "feed-forward" in what
    assert float(table["largest difference"].max()) < 1e-4  # every step recomputed by hand


def test_the_pretraining_steps_show_the_recipe_and_the_pairs():
    at = open_step("bert", 1)
    recipe = at.dataframe[0].value
    assert set(recipe["chosen for the loss"]) <= {"no", "yes: replaced by [MASK]",
                                                   "yes: replaced by a random token",
                                                   "yes: kept as it was"}
    at = open_step("bert", 2)
    pairs = at.dataframe[0].value
    assert set(pairs["label"]) <= {"IsNext", "NotNext"} and len(pairs) == 6


def test_the_masked_lm_step_offers_the_page_until_it_is_pretrained(monkeypatch, tmp_path,
                                                                   default_model):
    monkeypatch.setattr(masked_lm, "DEFAULT_SETTINGS", FEW_STEPS)
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))
    at = open_step("bert", 3)
    assert not figures(at) and "has not been pretrained on this machine yet" in texts(at)
    key = masked_lm.cache_key(default_model.tokenizer, masked_lm.read_corpus(), FEW_STEPS)
    assert not masked_lm.is_kept(key)  # the step never trains
    masked_lm.pretrained(default_model.tokenizer, settings=FEW_STEPS)
    at = open_step("bert", 3)
    bars = figures(at)[0]
    assert "top 10 fillers" in bars["layout"]["title"]["text"] and len(bars["data"][0]["y"]) == 10


def test_the_output_layer_steps_read_the_decoders_predictions():
    at = open_step("output", 1)
    assert "top 10 next tokens" in figures(at)[0]["layout"]["title"]["text"]
    assert "Paris" in str(figures(at)[0]["data"][0]["y"])
    at = open_step("output", 2)
    assert "mean is" in texts(at) and figures(at)

"""The three intervention pages under AppTest, through app.py: what they draw is the engine's
result for the same inputs, what a user types wrong is one sentence on the page, and a model
without a language-model head is said so and the decoder offered."""

from __future__ import annotations

import numpy as np
import pytest

from models.experiments import (attribution, contrast, logit_attribution, logit_lens, patching,
                               targets)
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.kinds import DECODER as DECODER_KIND
from tests.app_support import array, figures, run_page, shown, texts
from tests.interventions.conftest import IOI_CLEAN
from ui import interventions_cache

PAGES = ("activation_patching", "logit_lens", "logit_attribution")
CAPITAL = {"patch_clean": "The capital of France is", "patch_corrupted": "The capital of Italy is",
           "patch_answer": "Paris", "patch_wrong": "Rome"}
DECODER = {"sb_kind": DECODER_KIND.value}
FACT = "The Eiffel Tower is in the city of"


def z_of(at, title_start: str) -> np.ndarray:
    found = [f for f in figures(at) if f["layout"]["title"]["text"].startswith(title_start)]
    assert len(found) == 1, [f["layout"]["title"]["text"] for f in figures(at)]
    return array(found[0]["data"][0]["z"])


def table_with(at, column: str):
    """The one table on the page that has `column` (AppTest's tables carry no key)."""
    found = [frame.value for frame in at.dataframe if column in frame.value.columns]
    assert len(found) == 1, [list(frame.value.columns) for frame in at.dataframe]
    return found[0]


def errors(at) -> list[str]:
    return [shown(error.value) for error in at.error]


@pytest.mark.parametrize("page", PAGES)
def test_a_model_without_a_language_model_head_is_said_so_and_the_decoder_offered(page):
    at = run_page(page)
    assert [shown(info.value) for info in at.info] == [
        targets.no_prediction_message(DEFAULT_MODEL)]
    assert not at.error and not figures(at)
    button = next(b for b in at.button if b.label == "Use the causal decoder")
    if page == "logit_lens":
        button.click().run()
        assert at.session_state["sb_kind"] == DECODER_KIND.value
        assert not at.error and len(figures(at)) == 2


def test_the_patching_page_draws_the_engines_grid_and_its_estimate(decoder_runner):
    at = run_page("activation_patching", state={**DECODER, **CAPITAL, "patch_site": "head"})
    assert not at.error and not at.exception
    pair = contrast.prompt_pair(decoder_runner, CAPITAL["patch_clean"],
                                CAPITAL["patch_corrupted"])
    difference = contrast.logit_difference(decoder_runner, pair.clean, "Paris", "Rome",
                                           pair.corrupted)
    grid = patching.patching_grid(decoder_runner, pair, difference, patching.HEAD)
    np.testing.assert_allclose(z_of(at, "Each head's output"), grid.values, atol=1e-4)
    metrics = {metric.label: float(metric.value) for metric in at.metric}
    assert metrics["Clean run"] == pytest.approx(grid.clean_metric, abs=1e-3)
    assert metrics["Corrupted run"] == pytest.approx(grid.corrupted_metric, abs=1e-3)
    estimate = attribution.attribution_patching(decoder_runner, pair, difference).heads
    np.testing.assert_allclose(z_of(at, "Attribution estimate"), estimate, atol=1e-4)
    correlation = attribution.agreement(grid.values, estimate, 1).correlation
    assert f"Correlation {correlation:.2f}" in [f["layout"]["title"]["text"]
                                                for f in figures(at)]
    table = table_with(at, "estimate")
    assert len(table) == 8 and list(table.columns) == ["cell", "exact", "estimate", "gap"]
    assert [button.label for button in at.get("download_button")] == [
        "Download the grid as CSV"]


def test_the_heads_by_position_grid_reads_its_layer_from_the_slider(decoder_runner):
    at = run_page("activation_patching", state={**DECODER, **CAPITAL,
                                                "patch_site": "head_position",
                                                "patch_layer": 20})
    assert not at.error
    assert at.slider(key="patch_layer").value == 20
    assert z_of(at, "Heads of layer 20").shape == (9, 5)
    # the short choice in the select box, what it patches spelled out beneath
    assert at.selectbox(key="patch_site").format_func("head_position") == "One layer's heads"
    assert "Patched: each head of the chosen layer, at each position (head × position)." in [
        caption.value for caption in at.caption]


def test_what_a_user_types_wrong_is_one_sentence_on_the_patching_page():
    longer = run_page("activation_patching", state={
        **DECODER, **CAPITAL, "patch_corrupted": "The capital of the Italian republic is"})
    assert errors(longer) == [
        "The corrupted prompt has 2 tokens more than the clean one (7 against 5): patching puts "
        "the clean run's values back position by position, so both need the same number of "
        "tokens."]
    table = table_with(longer, "corrupted")
    assert list(table.columns) == ["position", "clean", "corrupted"] and len(table) == 7
    assert table["corrupted"].iloc[4] == "Italian" and table["clean"].iloc[6] == ""
    assert not figures(longer)
    for changed, part in (({"patch_wrong": "Paris"}, "are the same token"),
                          ({"patch_answer": "Eiffel"}, "is 2 tokens for this model"),
                          ({"patch_clean": ""}, "The clean prompt is empty"),
                          ({"patch_corrupted": CAPITAL["patch_clean"]},
                           "give the same logit difference")):
        at = run_page("activation_patching", state={**DECODER, **CAPITAL, **changed})
        assert len(at.error) == 1 and part in shown(at.error[0].value), errors(at)
        assert not figures(at)


def test_clicking_a_top_prediction_makes_it_the_answer():
    at = run_page("activation_patching", state={**DECODER, **CAPITAL, "patch_site": "head",
                                                "patch_answer": "London"})
    pills = at.get("button_group")
    assert [p.label for p in pills][0].startswith("Top next tokens of the clean prompt")
    assert pills[0].options[0] == repr(" Paris")
    pills[0].set_value(" Paris").run()
    assert at.text_input(key="patch_answer").value == " Paris"
    assert at.session_state["patch_pick_answer"] is None and not at.error


def test_the_lens_page_draws_the_engines_lens(decoder_runner):
    at = run_page("logit_lens", text=FACT, state={**DECODER, "lens_token": "Rome",
                                                  "lens_colour": "chosen"})
    assert not at.error
    lens = logit_lens.logit_lens(decoder_runner, FACT, "Rome")
    np.testing.assert_allclose(z_of(at, "Each layer's top token"), lens.chosen_probability,
                               atol=1e-5)
    heatmap = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("Each"))
    assert heatmap["data"][0]["text"][-1][-1] == " Paris"  # the last layer's top token
    rank = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("Rank"))
    np.testing.assert_array_equal(array(rank["data"][0]["y"]),
                                  lens.chosen_rank[:, lens.position])
    assert "' Rome'" in rank["layout"]["title"]["text"]
    table = at.dataframe[0].value
    assert len(at.dataframe) == 1
    assert table.shape == (31, 9) and table.iloc[-1, -1] == f"' Paris' " \
        f"{lens.top_probabilities[-1, -1, 0]:.2f}"


def test_a_masked_lm_is_read_at_its_mask_and_refused_by_direct_attribution(tiny_bert,
                                                                            monkeypatch):
    monkeypatch.setattr(interventions_cache, "loaded_source", lambda source: tiny_bert)
    text = "the cat sat like a [MASK] ."
    lens = run_page("logit_lens", text=text)
    assert not lens.error
    expected = logit_lens.logit_lens(tiny_bert, text)
    np.testing.assert_allclose(z_of(lens, "Each layer's top token"), expected.final_probability,
                               atol=1e-5)
    assert "read at position 6, the mask token" in texts(lens)
    shares = run_page("logit_attribution", text=text,
                      state={"dla_answer": "cat", "dla_wrong": "banana"})
    assert len(shares.error) == 1 and "post-norm" in shown(shares.error[0].value)
    patched = run_page("activation_patching", state={
        "patch_clean": text, "patch_corrupted": "the cat flies like a [MASK] .",
        "patch_answer": "banana", "patch_wrong": "arrow", "patch_site": "head"})
    assert not patched.error
    assert z_of(patched, "Each head's output").shape == (2, 4)


def test_the_direct_attribution_page_draws_the_engines_shares(decoder_runner):
    at = run_page("logit_attribution", text=IOI_CLEAN, state={**DECODER, "dla_count": 6})
    assert not at.error
    shares = logit_attribution.logit_attribution(decoder_runner, IOI_CLEAN, "Mary", "John")
    np.testing.assert_allclose(z_of(at, "Each head's direct share"), shares.heads, atol=1e-5)
    metrics = {metric.label: float(metric.value) for metric in at.metric}
    assert metrics["Logit difference"] == pytest.approx(shares.logit_difference, abs=1e-4)
    assert metrics["Sum of the shares"] == pytest.approx(shares.logit_difference, abs=1e-3)
    bars = next(f for f in figures(at) if f["layout"]["title"]["text"] == "The largest shares")
    assert list(bars["data"][0]["y"])[::-1] == [name for name, _ in shares.largest(6)]
    wrong = run_page("logit_attribution", text=IOI_CLEAN, state={**DECODER,
                                                                 "dla_answer": "Eiffel"})
    assert len(wrong.error) == 1 and "is 2 tokens" in shown(wrong.error[0].value)

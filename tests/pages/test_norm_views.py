"""The norm-based view (Kobayashi et al. 2020) on the attention-maps and head-statistics pages."""

import numpy as np

from models.hooks.capture import run_captured
from models.analysis.norms import norm_maps
from tests.app_support import array, figure_titled, figures, run_page, texts

TEXT = "Time flies like an arrow."


def direct_norms(default_model) -> np.ndarray:
    inputs = dict(default_model.tokenizer(TEXT, return_tensors="pt"))
    from models.hooks.install import install

    install(default_model.model)
    return norm_maps(run_captured(default_model.model, inputs))


def test_maps_page_shows_the_norm_map_beside_the_weights(default_model):
    at = run_page("attention_maps", state={"maps_layer": 2, "maps_head": 7, "maps_norm": True})
    weights, norm, grid = figures(at)
    expected = direct_norms(default_model)[2, 7]
    np.testing.assert_allclose(array(norm["data"][0]["z"]), expected, rtol=1e-4, atol=1e-5)
    assert norm["layout"]["title"]["text"] == "Layer 2 · Head 7: ‖α·f(x)‖"
    assert "per model token" in texts(at)
    # what [CLS] gets by weight is far more than what it moves
    z_weights = array(weights["data"][0]["z"])
    assert z_weights[:, 0].sum() / z_weights.sum() > array(norm["data"][0]["z"])[:, 0].sum() / expected.sum() - 1e-6


def test_statistics_table_has_norm_columns_only_on_model_tokens(default_model):
    at = run_page("head_statistics")
    table = at.dataframe[0].value
    assert {"norm_cls", "norm_sep"} <= set(table.columns)
    norms = direct_norms(default_model)
    cls_share = (norms[..., 0] / norms.sum(-1)).mean(-1)  # (L, H), rows averaged
    np.testing.assert_allclose(table["norm_cls"].to_numpy(), cls_share.reshape(-1), atol=1e-4)
    # the map beside the table is coloured by a norm-based column when it is chosen
    at = run_page("head_statistics", state={"stats_column": "norm_cls"})
    grid = figure_titled(at, "norm_cls for every layer and head")
    np.testing.assert_allclose(array(grid["data"][0]["z"]), cls_share, atol=1e-4)
    assert grid["data"][0]["zmax"] == 1.0
    merged = run_page("head_statistics", state={"sb_hide_special": True})
    assert "norm_cls" not in merged.dataframe[0].value.columns
    assert "switch the sidebar's token options off" in texts(merged)


def test_value_norms_are_each_value_through_its_heads_slice_of_w_o_and_follow_new_weights(
        smollm2_model):
    """||v_j W_O^h|| by hand, per head, on the decoder (grouped-query attention); after the
    output projection changes in place the kept Gram matrices are recomputed."""
    import torch

    from models.loading.decoder import DEFAULT_DECODER
    from models.loading.kinds import DECODER
    from models.loading.source import ModelSource

    runner = ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: smollm2_model)
    trace = runner.run(TEXT)
    layer = 3
    projection = smollm2_model.model.model.layers[layer].self_attn.o_proj.weight  # (D, H*Dh)
    heads, width = trace.query.shape[1], trace.query.shape[-1]
    by_hand = np.stack([
        np.linalg.norm(trace.value[layer, trace.kv_head(h)]
                       @ projection.detach().numpy()[:, h * width:(h + 1) * width].T, axis=-1)
        for h in range(heads)])  # (H, T)
    np.testing.assert_allclose(trace.value_norms[layer], by_hand, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        projection.mul_(2.0)
    try:
        later = runner.run(TEXT)  # a new forward (runs are not cached below ui/)
        # layer 3's values are unchanged by its own W_O; its norms through W_O double
        np.testing.assert_allclose(later.value_norms[layer], 2 * by_hand, rtol=1e-4, atol=1e-5)
    finally:
        with torch.no_grad():
            projection.div_(2.0)


def test_statistics_say_when_the_special_token_columns_are_empty():
    """SmolLM2's input has no special token: its cls and sep shares are 0 for every head, and the
    page says so; MiniLM's [CLS] and [SEP] take weight in every head, and it says nothing."""
    decoder = run_page("head_statistics", state={"sb_kind": "decoder"})
    table = decoder.dataframe[0].value
    assert not table[["cls", "sep", "norm_cls", "norm_sep"]].to_numpy().any()
    assert ("There is no special token among the tokens shown, so the cls, sep, norm_cls and "
            "norm_sep columns are 0 for every head.") in texts(decoder)
    encoder = run_page("head_statistics")
    assert encoder.dataframe[0].value[["cls", "sep"]].to_numpy().all()
    assert "There is no special token" not in texts(encoder)

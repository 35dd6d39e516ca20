"""Long inputs: each layer's maps streamed and reduced as the forward computes them, any layer's
exact maps on demand, and the all-heads page over more tokens than a full trace keeps."""

from __future__ import annotations

import re

import numpy as np
import pytest

from models.analysis.pooling import max_pool
from models.analysis.statistics import head_statistics
from models.loading.kinds import DECODER
from models.loading.source import ModelSource
from models.limits import EXACT_MAP_TOKENS
from models.hooks.streaming import exact_head, exact_layer, long_limit, prepare, stream
from tests.app_support import array, figures, run_page, texts
from tests.long_support import full_attentions
from tests.tiny_models import tiny_gpt2
from ui.export_files import STATIC_DIR

WORDS = ("time flies like an arrow fruit flies like a banana " * 500).split()


def text_of(count: int) -> str:
    return " ".join(WORDS[:count])


@pytest.fixture(scope="module")
def gpt2_runner(tmp_path_factory, default_model):
    loaded = tiny_gpt2(tmp_path_factory.mktemp("gpt2"), default_model)
    return ModelSource(DECODER, "tiny-gpt2").load(decoder=lambda name: loaded)


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner", "gpt2_runner"])
def test_a_layer_on_demand_is_the_full_forwards_layer(which, request):
    runner = request.getfixturevalue(which)
    encoded, _ = prepare(runner, text_of(40), None)
    expected = full_attentions(runner, encoded)
    for layer in sorted({0, len(expected) // 2, len(expected) - 1}):
        np.testing.assert_allclose(exact_layer(runner, encoded, layer), expected[layer],
                                   rtol=0, atol=1e-5)
        # fused attention before the layer: the same maps up to float rounding
        np.testing.assert_allclose(exact_layer(runner, encoded, layer, fast=True),
                                   expected[layer], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="does not exist"):
        exact_layer(runner, encoded, len(expected))


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner", "gpt2_runner"])
def test_one_head_from_its_layers_kept_input_is_the_full_forwards_head(which, request, tmp_path):
    runner = request.getfixturevalue(which)
    streamed = stream(runner, text_of(40), None, lambda layer, maps: None, keep_inputs=tmp_path)
    kept = streamed.layer_inputs
    expected = full_attentions(runner, streamed.encoded)
    assert all(kept.has(layer) for layer in range(len(expected)))
    assert kept.disk_bytes >= len(expected) * streamed.num_tokens * runner.config.hidden_size * 4
    for layer in sorted({0, len(expected) // 2, len(expected) - 1}):
        for head in sorted({0, streamed.num_heads - 1}):
            np.testing.assert_allclose(exact_head(runner, streamed.encoded, layer, head, kept),
                                       expected[layer][head], rtol=0, atol=1e-5)
    # the layers skipped for it are whole again afterwards
    np.testing.assert_array_equal(exact_layer(runner, streamed.encoded, len(expected) - 1),
                                  expected[-1])
    kept.delete()
    assert not tmp_path.exists()


def test_streamed_reductions_equal_those_of_the_full_maps(decoder_runner):
    text = text_of(300)
    full = decoder_runner.run(text).record
    seen = []

    def reduce(layer, maps):
        seen.append(layer)
        with pytest.raises(ValueError):
            maps[0, 0, 0] = 1.0  # the maps are lent read-only
        return max_pool(maps, 64).copy(), maps[:, :, 0].mean(axis=-1)

    streamed = stream(decoder_runner, text, None, reduce)
    assert seen == list(range(full.num_layers))
    assert streamed.tokens == full.tokens and streamed.num_heads == full.num_heads
    pooled = np.stack([summary[0] for summary in streamed.summaries])
    np.testing.assert_allclose(pooled, max_pool(full.weights, 64), rtol=0, atol=1e-5)
    first_share = np.stack([summary[1] for summary in streamed.summaries])  # (L, H)
    table = head_statistics(full)
    np.testing.assert_allclose(first_share.ravel(), table["first"].to_numpy(), atol=1e-5)


def test_the_long_limit_is_the_models_own_up_to_4096(decoder_runner, encoder_runner, gpt2_runner):
    assert long_limit(decoder_runner) == 4096 > decoder_runner.max_tokens  # SmolLM2 reads 8,192
    assert long_limit(encoder_runner) == 512  # MiniLM's own positions
    assert long_limit(gpt2_runner) == 64
    encoded, _ = prepare(decoder_runner, text_of(4500), None)
    assert len(encoded.tokens) == 4096 and encoded.dropped_tokens > 0


def test_the_all_heads_page_reads_a_long_decoder_input_whole(decoder_runner):
    text = text_of(EXACT_MAP_TOKENS + 40)  # long enough to be drawn pooled, beside a window
    count = len(prepare(decoder_runner, text, None)[0].tokens)
    assert count > decoder_runner.max_tokens
    at = run_page("all_heads", text=text, state={"sb_kind": "decoder"})
    toggle = at.toggle(key="sb_read_all")
    assert f"Read all {count:,} tokens" in toggle.label
    assert "were dropped" in texts(at)  # without the toggle: the full trace's first tokens
    assert "can read up to 4,096 tokens, layer by layer" in texts(at)
    at = run_page("all_heads", text=text, state={"sb_kind": "decoder", "sb_read_all": True,
                                                 "all_layer": 29, "all_head": 8,
                                                 "all_window_query": 100, "all_window_key": 40})
    mosaic, whole, window = figures(at)
    assert mosaic["layout"]["title"]["text"].startswith("All 30 layers × 9 heads")
    assert array(mosaic["data"][0]["z"]).shape == (9 * 64, 30 * 64)  # more layers: across
    assert f"all {count} tokens" in whole["layout"]["title"]["text"]
    encoded, _ = prepare(decoder_runner, text, None)
    exact = full_attentions(decoder_runner, encoded)[29][8]
    np.testing.assert_allclose(array(window["data"][0]["z"]), exact[100:164, 40:104], atol=1e-5)
    assert array(whole["data"][0]["z"]).shape == (256, 256)
    np.testing.assert_allclose(array(whole["data"][0]["z"]).max(), exact.max(), atol=1e-5)
    assert window["data"][0]["zmax"] == whole["data"][0]["zmax"] < 1  # one colour scale
    links = re.findall(r'<a href="app/static/([^"]+)" download="([^"]+)"',
                       "".join(element.value for element in at.html))
    stem = "HuggingFaceTB_SmolLM2-135M-Instruct"
    assert [name for _, name in links] == [f"{stem}_L29H8_{count}tokens.npz"]
    with np.load(STATIC_DIR / links[0][0], allow_pickle=False) as head:  # small: written at once
        np.testing.assert_allclose(head["weights"], exact, atol=1e-5)
    assert at.button(key="all_export_thumbs_npz").label == (  # 30 x 9 x 64 x 64: asked for
        "Prepare every head's thumbnail as NPZ")


def test_a_long_inputs_head_and_thumbnails_download_as_npz_without_pickles():
    import io
    import json

    from viz.export import head_npz, thumbnails_npz

    weights = np.tril(np.ones((5, 5), np.float32))
    weights /= weights.sum(axis=-1, keepdims=True)
    tokens = ("a", "b", "c", "d", "e")
    with np.load(io.BytesIO(head_npz(weights, tokens, "SmolLM2", 3, 4)), allow_pickle=False) as f:
        np.testing.assert_array_equal(f["weights"], weights)
        assert tuple(f["tokens"]) == tokens
        assert json.loads(str(f["metadata"]))["layer"] == 3
    pooled = np.zeros((2, 3, 4, 4), np.float32)
    with np.load(io.BytesIO(thumbnails_npz(pooled, tokens, "SmolLM2")), allow_pickle=False) as f:
        assert f["weights"].shape == (2, 3, 4, 4)
        assert "max-pooled" in json.loads(str(f["metadata"]))["maps"]


def test_a_spread_out_causal_heads_colours_are_not_set_by_its_first_rows():
    """Row i of an even causal head holds 1 / (i + 1): the first rows' large weights must not
    make the other 4,000 rows colourless; the pooled map and the exact window share one top."""
    from models.analysis.pooling import pool
    from viz.long_view import pooled_head_figure, window_figure

    count = 1024
    weights = np.tril(np.ones((count, count), np.float32)) / np.arange(1, count + 1)[:, None]
    pooled = pool(weights)
    top = float(pooled.tops)
    assert 1 / count < top < 0.1
    tokens = tuple(f"t{i}" for i in range(count))
    assert pooled_head_figure(pooled, 0, 0).data[0].zmax == top
    assert window_figure(weights, tokens, 0, 0, 500, 0, top=top).data[0].zmax == top

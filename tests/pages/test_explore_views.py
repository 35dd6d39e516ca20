"""The all-heads mosaic, the arithmetic of one row, and the exports (issue 3, views 1 and 3)."""

import json
import re

import numpy as np
import pytest

import torch

from models.analysis.pooling import max_pool
from models.analysis.thumbnails import thumbnails
from models.teaching.arithmetic import row_arithmetic
from models.loading.pretrained import DEFAULT_MODEL
from models.hooks.record import AttentionRecord
from models.scratch.build import random_encoder
from models.loading.kinds import PRETRAINED, SCRATCH_COPIED, SCRATCH_RANDOM
from models.loading.source import LoadedSource, ModelSource
from models.loading.kinds.scratch_random import scratch_config
from models.loading.tokenize import encode
from tests.reference import reference_attentions
from tests.app_support import array, figures, run_page, texts
from viz.export import JSON_DECIMALS, head_csv, layer_json, load_npz, record_npz
from viz.overview import all_heads_figure, tiled

TEXT = "Time flies like an arrow."


def synthetic(tokens=10, layers=2, heads=3, seed=0):
    raw = np.random.default_rng(seed).random((layers, heads, tokens, tokens))
    return AttentionRecord(tokens=tuple(f"t{i}" for i in range(tokens)),
                           weights=raw / raw.sum(-1, keepdims=True), source="synthetic")


def test_max_pool_keeps_a_thin_diagonal_visible():
    eye = np.eye(512, dtype=np.float32)[None]
    pooled = max_pool(eye, 64)
    assert pooled.shape == (1, 64, 64)
    np.testing.assert_array_equal(np.diag(pooled[0]), 1.0)
    small = np.random.default_rng(0).random((2, 5, 5))
    np.testing.assert_array_equal(max_pool(small, 64), small)  # short maps are not resampled


def test_mosaic_tiles_layers_down_and_heads_across_in_percent():
    record = synthetic(tokens=6, layers=2, heads=3)
    tiles = tiled(thumbnails(record).values)
    assert tiles.shape == (12, 18) and tiles.dtype == np.uint8
    np.testing.assert_array_equal(tiles[6:12, 12:18], np.rint(record.weights[1, 2] * 100))


def test_overview_at_512_tokens_stays_light():
    record = synthetic(tokens=512, layers=6, heads=12)
    figure = all_heads_figure(thumbnails(record), selected=(2, 5))
    assert np.asarray(figure.data[0].z).shape == (6 * 64, 12 * 64)
    assert len(figure.to_json()) < 600_000  # bytes sent; the exact head is drawn separately
    assert figure.layout.shapes[-1].line.color == "#d62728"
    assert list(figure.layout.xaxis.ticktext) == [f"H{h}" for h in range(12)]


def test_a_model_with_more_layers_than_heads_runs_its_layers_across():
    record = synthetic(tokens=6, layers=5, heads=2)
    figure = all_heads_figure(thumbnails(record), selected=(3, 1))
    z = np.asarray(figure.data[0].z)
    assert z.shape == (2 * 6, 5 * 6)  # heads down, layers across: wider than tall
    for layer in range(5):
        for head in range(2):  # every tile is its own head, cell by cell
            np.testing.assert_array_equal(z[head * 6:(head + 1) * 6, layer * 6:(layer + 1) * 6],
                                          np.rint(record.weights[layer, head] * 100))
    assert list(figure.layout.xaxis.ticktext) == [f"L{l}" for l in range(5)]
    assert list(figure.layout.yaxis.ticktext) == [f"H{h}" for h in range(2)]
    selected = figure.layout.shapes[-1]
    assert (selected.x0, selected.y0) == (3 * 6 - 0.5, 1 * 6 - 0.5)  # layer 3 across, head 1 down
    (tiles,) = [trace for trace in figure.data if trace.name == "tiles"]
    for (layer, head), x, y in zip(tiles.customdata, tiles.x, tiles.y):  # a click opens its head
        assert (x, y) == ((layer + 0.5) * 6 - 0.5, (head + 0.5) * 6 - 0.5)
    assert figure.layout.width > figure.layout.height
    smollm2 = all_heads_figure(thumbnails(synthetic(tokens=4, layers=30, heads=9)))
    # 30 labels side by side would stand on end and run into the title: every 2nd is named
    assert list(smollm2.layout.xaxis.ticktext) == [f"L{l}" for l in range(0, 30, 2)]
    assert list(smollm2.layout.xaxis.tickvals) == [(l + 0.5) * 4 - 0.5 for l in range(0, 30, 2)]
    assert list(smollm2.layout.yaxis.ticktext) == [f"H{h}" for h in range(9)]


@pytest.mark.parametrize("kind", [PRETRAINED, SCRATCH_COPIED, SCRATCH_RANDOM])
def test_softmax_row_shown_is_the_models_row(default_model, kind):
    runner = ModelSource(kind, DEFAULT_MODEL, 3).load(pretrained=lambda name: default_model)
    trace = runner.run(TEXT)
    encoded = encode(default_model.tokenizer, TEXT, None, 512)
    with torch.inference_mode():  # the model's own weights, outside any capture
        if kind is PRETRAINED:
            reference = runner.model(**encoded.model_inputs(), output_attentions=True).attentions
        else:
            reference = runner.model(encoded.input_ids).attentions
    record = trace.record
    for layer, head, query in [(0, 0, 0), (record.num_layers - 1, record.num_heads - 1, 5), (1, 2, 7)]:
        row = row_arithmetic(trace, layer, head, query)
        np.testing.assert_allclose(row.weights, reference[layer][0, head, query], atol=1e-5)
        np.testing.assert_allclose(row.scaled, row.dots / np.sqrt(row.query.shape[-1]), rtol=1e-6)
        np.testing.assert_allclose(row.output, row.model_output, atol=1e-5)
        assert row.scale == pytest.approx(np.sqrt(row.query.shape[-1]))


def test_causal_encoder_row_masks_future_keys(default_model):
    config = scratch_config(len(default_model.tokenizer))
    encoder = random_encoder(config.__class__(**{**config.__dict__, "causal": True}), 0)
    runner = LoadedSource(ModelSource(SCRATCH_RANDOM, DEFAULT_MODEL), encoder,
                          default_model.tokenizer, 512, "positions")
    trace = runner.run(TEXT)
    row = row_arithmetic(trace, 1, 1, 3)
    assert row.allowed.tolist() == [True] * 4 + [False] * 4
    assert np.all(row.weights[4:] == 0)
    np.testing.assert_allclose(row.weights, trace.record.weights[1, 1, 3], atol=1e-5)
    assert trace.record.masks == ("causal",)


def test_exports_round_trip_with_tokens_and_model_name():
    record = synthetic(tokens=4)
    restored = load_npz(record_npz(record))
    np.testing.assert_array_equal(restored.weights, record.weights)
    assert restored.tokens == record.tokens and restored.source == "synthetic"
    half = load_npz(record_npz(record, half_precision=True))
    np.testing.assert_allclose(half.weights, record.weights, rtol=1e-3, atol=1e-4)
    assert half.tokens == record.tokens
    payload = json.loads(layer_json(record, 1))
    assert payload["tokens"] == list(record.tokens) and payload["source"] == "synthetic"
    assert payload["layer"] == 1 and payload["decimals"] == JSON_DECIMALS
    np.testing.assert_allclose(np.array(payload["weights"]), record.weights[1],
                               atol=0.5 * 10**-JSON_DECIMALS + 1e-9)
    with pytest.raises(ValueError):
        layer_json(record, 2)
    lines = head_csv(record, 1, 2).decode().splitlines()
    assert lines[0].split(",")[1:] == ["#0 t0", "#1 t1", "#2 t2", "#3 t3"]
    np.testing.assert_allclose([float(v) for v in lines[2].split(",")[1:]],
                               record.weights[1, 2, 1], rtol=1e-5)


def test_exports_at_512_tokens_stay_small():
    """Every head of a 512-token MiniLM-shaped record: no export near the 400+ MB of old JSON."""
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((6, 12, 512, 512)).astype(np.float32) * 3  # (L, H, Q, K)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    record = AttentionRecord(tokens=tuple(f"t{i}" for i in range(512)),
                             weights=weights / weights.sum(-1, keepdims=True), source="long")
    full, half = len(record_npz(record)), len(record_npz(record, half_precision=True))
    assert full < record.weights.nbytes and half < 0.6 * full
    assert len(layer_json(record, 5)) < 30 * 2**20
    np.testing.assert_allclose(load_npz(record_npz(record, True)).weights, record.weights,
                               rtol=1e-3, atol=1e-5)


def test_all_heads_page_shows_the_mosaic_and_the_exact_head(default_model):
    at = run_page("all_heads", state={"all_layer": 4, "all_head": 9})
    mosaic_figure, head_figure = figures(at)
    expected = reference_attentions(default_model, TEXT)
    z = array(mosaic_figure["data"][0]["z"]).reshape(6 * 8, 12 * 8)
    np.testing.assert_array_equal(z[32:40, 72:80], np.rint(expected[4, 9] * 100))
    np.testing.assert_allclose(array(head_figure["data"][0]["z"]), expected[4, 9], atol=1e-5)
    stem = "sentence-transformers_all-MiniLM-L6-v2"  # short: every export is a link at once
    links = re.findall(r'<a href="app/static/exports/[^"]+" download="([^"]+)"',
                       "".join(element.value for element in at.html))
    assert links == [f"{stem}_L4H9.csv", f"{stem}_L4.json", f"{stem}.npz"]


def test_arithmetic_page_shows_the_models_row(default_model):
    at = run_page("row_arithmetic", state={"arith_layer": 2, "arith_head": 5, "arith_query": 3})
    steps = figures(at)[0]
    expected = reference_attentions(default_model, TEXT)[2, 5, 3]
    np.testing.assert_allclose(array(steps["data"][2]["y"]), expected, atol=1e-5)
    table = at.dataframe[0].value
    np.testing.assert_allclose(table["softmax weight"].to_numpy(), expected, atol=1e-5)
    assert list(table["key"]) == ["[CLS]", "time", "flies", "like", "an", "arrow", ".", "[SEP]"]
    assert "matches the model's own output" in texts(at)


def test_token_options_apply_to_views():
    at = run_page("attention_maps", text="Tokenization matters",
                  state={"sb_merge_words": True, "sb_hide_special": True})
    labels = figures(at)[0]["layout"]["xaxis"]["ticktext"]
    assert labels == ["tokenization", "matters"]
    assert "renormalised" in texts(at)


def test_arithmetic_page_says_token_options_do_not_apply():
    at = run_page("row_arithmetic", state={"sb_merge_words": True})
    assert "whatever the sidebar's token options say" in texts(at)
    assert len(at.dataframe[0].value) == 8  # every model token, [CLS] and [SEP] included


def test_exports_of_a_rectangular_cross_attention_record():
    """Cross-attention: target queries x source keys; every export keeps both token lists."""
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 4, 6)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    record = AttentionRecord(tokens=("la", "voiture", "rouge", "</s>"), weights=weights,
                             source="toy", key_tokens=("the", "red", "car", "is", "fast", "</s>"))
    lines = head_csv(record, 1, 2).decode().splitlines()
    assert lines[0].split(",")[1:] == ["#0 the", "#1 red", "#2 car", "#3 is", "#4 fast", "#5 </s>"]
    assert [line.split(",")[0] for line in lines[1:]] == ["#0 la", "#1 voiture", "#2 rouge", "#3 </s>"]
    restored = load_npz(record_npz(record))
    assert restored.key_tokens == record.key_tokens and restored.tokens == record.tokens
    np.testing.assert_array_equal(restored.weights, record.weights)
    payload = json.loads(layer_json(record, 0))
    assert payload["shape"]["key"] == 6 and payload["key_tokens"][1] == "red"

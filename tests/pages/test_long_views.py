"""Long inputs on the attention-maps and head-statistics pages: per-head statistics measured layer
by layer as a streamed forward computes each layer, equal to those of a full record, and both
pages reading a decoder input longer than a full trace keeps."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.reducer import stream_into
from models.analysis.statistics import NUMERIC_COLUMNS, Statistics, head_statistics
from models.analysis.token_batch import TokenBatch, is_punctuation
from models.hooks.record import AttentionRecord
from models.hooks.streaming import prepare, stream
from models.limits import EXACT_MAP_TOKENS
from models.analysis.pooling import max_pool
from tests.app_support import array, figures, run_page, texts
from tests.long_support import full_attentions

WORDS = ("time flies like an arrow , fruit flies like a banana . " * 400).split()
LONG_STATE = {"sb_kind": "decoder"}


def text_of(count: int) -> str:
    return " ".join(WORDS[:count])


def streamed_statistics(runner, text: str, pair: str | None = None):
    encoded, _ = prepare(runner, text, pair)
    statistics = Statistics()
    tokens = TokenBatch.of_encoded(encoded, runner.causal)
    stream(runner, text, pair, stream_into(statistics, tokens))
    return statistics.result().table()


def assert_same_statistics(table, expected, atol: float = 1e-6) -> None:
    assert len(table) == len(expected)
    assert list(table.columns) == list(expected.columns)
    for column in NUMERIC_COLUMNS:
        np.testing.assert_allclose(table[column], expected[column], rtol=0, atol=atol,
                                   err_msg=column)
    assert list(table["label"]) == list(expected["label"])


def reference_statistics(maps: np.ndarray, special: tuple[int, ...], punctuation: list[int]):
    """The statistics of one square (H, Q, K) layer by their definitions, in float64."""
    weights = maps.astype(np.float64)
    count = weights.shape[-1]
    live = weights.sum(-1) > 1e-3
    logs = np.log2(weights, out=np.zeros_like(weights), where=weights > 0)
    distance = np.abs(np.subtract.outer(np.arange(count), np.arange(count)))
    per_row = {
        "entropy_bits": -(weights * logs).sum(-1),
        "mean_distance": (weights * distance).sum(-1),
        "cls": weights[..., list(special[:1])].sum(-1),
        "sep": weights[..., list(special[1:])].sum(-1),
        "first": weights[..., 0],
        "punctuation": weights[..., punctuation].sum(-1),
        "self": np.diagonal(weights, axis1=-2, axis2=-1),
    }
    return {name: np.where(live, values, 0).sum(-1) / live.sum(-1)
            for name, values in per_row.items()}


def test_streamed_statistics_of_a_decoder_equal_those_of_its_full_record(decoder_runner):
    text = text_of(260)
    full = decoder_runner.run(text).record
    assert 250 < full.num_tokens <= decoder_runner.max_tokens  # still short enough for a full trace
    expected = head_statistics(full)
    assert_same_statistics(streamed_statistics(decoder_runner, text), expected)
    # and the layer-by-layer arithmetic is the plain definition, computed in float64
    punctuation = [p for p, token in enumerate(full.tokens)
                   if p not in full.special_positions and is_punctuation(token)]
    assert len(punctuation) > 30
    for layer in (0, full.num_layers - 1):
        reference = reference_statistics(full.layer(layer), full.special_positions, punctuation)
        rows = expected[expected["layer"] == layer]
        for name, values in reference.items():
            np.testing.assert_allclose(rows[name], values, rtol=0, atol=2e-5, err_msg=name)


def test_streamed_statistics_of_an_encoder_pair_equal_those_of_its_full_record(encoder_runner):
    text, pair = text_of(60), "the banana flies , like time ."
    full = encoder_runner.run(text, pair).record
    assert full.tokens[0] == "[CLS]" and len(full.special_positions) == 3  # [CLS], 2 x [SEP]
    expected = head_statistics(full)
    assert expected["sep"].max() > 0.05 and expected["cls"].max() > 0.05
    assert_same_statistics(streamed_statistics(encoder_runner, text, pair), expected)


def test_the_pages_read_a_long_decoder_input_whole(decoder_runner):
    text = text_of(EXACT_MAP_TOKENS + 40)  # drawn pooled, beside an exact window
    encoded, _ = prepare(decoder_runner, text, None)
    count = len(encoded.tokens)
    assert count > decoder_runner.max_tokens
    exact = full_attentions(decoder_runner, encoded)

    maps = run_page(text=text, state={  # the default page: attention maps
        **LONG_STATE, "sb_read_all": True, "maps_layer": 29, "maps_head": 8,
        "maps_window_query": 100, "maps_window_key": 40})
    assert f"Read all {count:,} tokens" in maps.toggle(key="sb_read_all").label
    whole, window, grid = figures(maps)
    assert f"all {count} tokens" in whole["layout"]["title"]["text"]
    np.testing.assert_allclose(array(window["data"][0]["z"]), exact[29][8][100:164, 40:104],
                               rtol=0, atol=1e-5)
    # the layer's other heads: their thumbnails, pooled from the whole input
    assert "max-pooled" in grid["layout"]["title"]["text"]
    np.testing.assert_allclose(array(grid["data"][3]["z"]), max_pool(exact[29][3][None], 64)[0],
                               atol=6e-4)  # drawn to 3 decimals
    assert f'download="HuggingFaceTB_SmolLM2-135M-Instruct_L29H8_{count}tokens.npz"' in "".join(
        element.value for element in maps.html)  # one head: a link at once
    assert maps.button(key="maps_export_thumbs_npz").label == (
        "Prepare every head's thumbnail as NPZ")

    stats = run_page("head_statistics", text=text, state={
        **LONG_STATE, "sb_read_all": True,
        "stats_table": {"selection": {"rows": [14], "columns": []}}})  # layer 1, head 5
    assert f"Read all {count:,} tokens" in stats.toggle(key="sb_read_all").label
    table = stats.dataframe[0].value
    assert len(table) == 30 * 9 and list(table.columns[:3]) == ["layer", "head", "label"]
    expected = head_statistics(AttentionRecord(
        encoded.tokens, layers=tuple(exact), source="exact", masks=("causal",),
        special_positions=encoded.special_positions))
    assert {"norm_cls", "norm_sep"} <= set(table.columns)  # the stream hands on value norms
    assert_same_statistics(table.drop(columns=["norm_cls", "norm_sep"]), expected, atol=1e-5)
    assert f"all {count:,} tokens" in texts(stats)
    grid, opened, _ = figures(stats)
    assert array(grid["data"][0]["z"]).shape == (30, 9)
    assert opened["layout"]["title"]["text"].startswith(f"Layer 1 · Head 5: all {count} tokens")
    np.testing.assert_allclose(array(opened["data"][0]["z"]).max(), exact[1][5].max(), atol=1e-5)


def test_long_rollout_figures_draw_the_pooled_maps():
    from models.analysis.pooling import pooled_map
    from viz import rollout

    count, cells = 40, 8
    tokens = ("<s>",) + tuple(f"w{i}" for i in range(1, count))
    rng = np.random.default_rng(6)
    raw, rolled = (pooled_map(rng.random((cells, cells)), count, count, cells) for _ in range(2))
    left, right = rollout.long_rollout_figures(raw, rolled, 3, tokens)
    np.testing.assert_array_equal(np.asarray(left.data[0].z), raw.values)
    np.testing.assert_array_equal(np.asarray(right.data[0].z), rolled.values)
    assert left.data[0].zmax == float(raw.tops) and right.data[0].zmax == float(rolled.tops)
    assert left.layout.title.text.startswith("Raw attention · layer 3")
    assert right.layout.title.text.startswith("Rollout · layers 0 to 3")
    assert all("max-pooled" in figure.layout.title.text for figure in (left, right))
    hover = np.asarray(left.data[0].customdata)
    assert hover.shape == (cells, cells, 2)
    assert hover[0, 1, 0] == "0–4 (&lt;s&gt; … w4)" and hover[0, 1, 1] == "5–9 (w5 … w9)"
    assert left.layout.height == rollout.LONG_ROLLOUT_HEIGHT_PX
    short = pooled_map(rng.random((cells, cells)), cells, cells, cells)
    exact, _ = rollout.long_rollout_figures(short, short, 0, tokens[:cells])
    assert "max-pooled" not in exact.layout.title.text
    assert np.asarray(exact.data[0].customdata)[2, 3, 1] == "3 (w3)"
    with pytest.raises(ValueError):
        rollout.long_rollout_figures(raw, rolled, 0, tokens[:5])

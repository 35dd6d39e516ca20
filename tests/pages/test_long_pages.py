"""The pages that read a long decoder input whole beyond the maps, statistics and all heads:
rollout, head detectors and compare take their numbers from the one streamed forward, and they
equal the same functions run on the full forward's maps; the long views' window sliders travel in
links."""

from __future__ import annotations


import numpy as np
import pytest

from models.analysis.compare import jensen_shannon_bits
from models.analysis.detectors import first_token_scores, previous_token_scores
from models.analysis.pooling import max_pool
from models.analysis.roles import role_distribution
from models.analysis.rollout import ROLLOUT_CELLS, attention_rollout, head_average
from models.hooks.record import AttentionRecord
from models.limits import EXACT_MAP_TOKENS
from models.hooks.access_base import window_of
from tests.app_support import array, figures, run_page, texts
from tests.long_support import full_record
from tests.pages.test_links import open_link, rerun

WORDS = ("time flies like an arrow , fruit flies like a banana . " * 400).split()
# More tokens than the decoder's full trace keeps (352), and than a head drawn cell by cell has
# (EXACT_MAP_TOKENS): its heads are drawn pooled, beside an exact window.
LONG_TEXT = " ".join(WORDS[:EXACT_MAP_TOKENS + 40])
DECODER = {"sb_kind": "decoder"}


@pytest.fixture(scope="module")
def long_record(decoder_runner) -> AttentionRecord:
    """The long text's record from the model's own forward with output_attentions."""
    return full_record(decoder_runner, LONG_TEXT)


def test_rollout_reads_a_long_input_whole_and_equals_the_full_maps_rollout(long_record):
    at = run_page("rollout", text=LONG_TEXT, state={**DECODER, "sb_read_all": True,
                                                    "rollout_layer": 17})
    rolled, raw = figures(at)  # the rollout first, on the first screen
    assert rolled["layout"]["title"]["text"].startswith("Rollout · layers 0 to 17")
    assert raw["layout"]["title"]["text"].startswith("Raw attention · layer 17")
    count = long_record.num_tokens
    assert f"{count:,}" in texts(at)
    expected_raw = max_pool(head_average(long_record)[17][None].astype(np.float32),
                            ROLLOUT_CELLS)[0]
    expected_rolled = max_pool(attention_rollout(long_record)[17][None].astype(np.float32),
                               ROLLOUT_CELLS)[0]
    np.testing.assert_allclose(array(raw["data"][0]["z"]), expected_raw, atol=1e-5)
    np.testing.assert_allclose(array(rolled["data"][0]["z"]), expected_rolled, atol=1e-4)
    assert array(rolled["data"][0]["z"]).shape == (ROLLOUT_CELLS, ROLLOUT_CELLS)


@pytest.mark.parametrize("name, reference", [("previous-token", previous_token_scores),
                                             ("first-token sink", first_token_scores)])
def test_sentence_detectors_score_every_token_of_a_long_input(long_record, name, reference):
    at = run_page("head_detectors", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "detectors_kind": name})
    (grid,) = figures(at)
    np.testing.assert_allclose(array(grid["data"][0]["z"]), reference(long_record), atol=1e-5)
    assert f"all {long_record.num_tokens:,} tokens" in texts(at)
    assert "were dropped" not in texts(at)  # the full trace (and its notice) never ran


def test_the_separator_detector_says_why_a_decoder_text_has_nothing_to_measure():
    at = run_page("head_detectors", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "detectors_kind": "[SEP] sink"})
    assert not figures(at)
    assert "no [SEP]-like special token" in texts(at)


def test_compare_ranks_a_long_and_a_short_input_by_the_roles_of_their_heads(
        decoder_runner, long_record):
    second = "Fruit flies like a banana."
    at = run_page("compare", text=LONG_TEXT, state={**DECODER, "sb_read_all": True})
    table = at.dataframe[0].value
    short = decoder_runner.run(second).record
    expected = jensen_shannon_bits(role_distribution(long_record), role_distribution(short))
    ranked = expected[table["layer"].to_numpy(), table["head"].to_numpy()]
    np.testing.assert_allclose(table["role_jsd"], ranked, atol=1e-5)
    np.testing.assert_allclose(table["difference"], ranked, atol=1e-5)
    assert list(table["difference"]) == sorted(table["difference"], reverse=True)
    assert "aligned_jsd" not in table
    first_map, second_map = figures(at)[1], figures(at)[-1]  # the first: pooled, and a window
    assert f"all {long_record.num_tokens:,} tokens" in first_map["layout"]["title"]["text"]
    assert array(second_map["data"][0]["z"]).shape == (short.num_tokens,) * 2


def test_a_long_views_window_travels_in_its_link(decoder_runner, long_record):
    at = open_link("all_heads", {"text": LONG_TEXT, "model": "decoder", "long": "true",
                                 "layer": "29", "head": "8", "window_query": "100",
                                 "window_key": "40"})
    window = figures(at)[2]
    exact = long_record.layer(29)[8]
    np.testing.assert_allclose(array(window["data"][0]["z"]), exact[100:164, 40:104], atol=1e-5)
    slider = next(s for s in at.main.get("slider") if s.label == "Window: first key")
    slider.set_value(60)
    rerun(at)
    assert at.query_params["window_key"] == "60" and at.query_params["window_query"] == "100"


def test_one_row_of_a_long_input_is_the_models_own_row_with_its_vectors(long_record):
    query = long_record.num_tokens - 20
    at = run_page("row_arithmetic", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "arith_layer": 15, "arith_head": 4,
                         "arith_position": query})
    table = at.dataframe[0].value
    exact = long_record.layer(15)[4][query]
    assert len(table) == long_record.num_tokens
    np.testing.assert_allclose(table["softmax weight"], exact, atol=1e-5)
    steps = figures(at)[0]
    shown = [int(label.rsplit("#", 1)[1]) for label in steps["data"][2]["x"]]
    assert len(shown) == 48 and shown == sorted(shown)
    assert set(shown) == set(np.argsort(-exact)[:48].tolist())  # the strongest keys
    low, high = steps["layout"]["yaxis3"]["range"]  # the softmax bars: scaled to the tallest
    assert low == 0 and exact[shown].max() <= high < 1
    check = next(s.value for s in at.success if "weighted sum of the value vectors" in s.value)
    assert float(check.split("within ")[1].split(",")[0]) < 1e-5
    assert "were dropped" not in texts(at)


def test_bertviz_draws_an_exact_window_of_every_layer_of_a_long_input(long_record):
    from tests.pages.test_bertviz_page import page_data
    from viz.bertviz_views import WEIGHT_DECIMALS

    at = run_page("bertviz_views", text=LONG_TEXT,
                  state={**DECODER, "sb_read_all": True, "bertviz_window_start": 100})
    assert f"Tokens 100–163 of all {long_record.num_tokens:,} tokens" in texts(at)
    (frame,) = at.get("iframe")
    window = window_of(long_record.tokens, long_record.weights[:, :, 100:164, 100:164], 100,
                       long_record.special_positions, long_record.source, causal=True)
    assert window.tokens == long_record.tokens[100:164] and "window" in window.masks
    drawn = page_data(frame.proto.srcdoc)["attention"][0]
    assert len(drawn["left_text"]) == window.num_tokens == 64
    np.testing.assert_allclose(np.array(drawn["attn"]), window.weights,
                               atol=10 ** -WEIGHT_DECIMALS)


def test_the_long_mosaic_can_colour_each_head_up_to_its_own_top(long_record):
    from models.analysis.pooling import tile_tops

    plain = figures(run_page("all_heads", text=LONG_TEXT, state={**DECODER, "sb_read_all": True}))[0]
    scaled = figures(run_page("all_heads", text=LONG_TEXT,
                              state={**DECODER, "sb_read_all": True, "all_tile_scale": True}))[0]
    pooled = max_pool(long_record.weights, 64)  # (L, H, 64, 64)
    tops = tile_tops(pooled)
    assert np.all(tops <= 1) and tops.min() < 0.5  # some heads are spread thin
    expected = np.minimum(pooled / tops[..., None, None], 1.0)
    tiles = array(scaled["data"][0]["z"]).reshape(9, 64, 30, 64).transpose(2, 0, 1, 3)  # L across
    np.testing.assert_allclose(tiles, np.rint(expected * 100), atol=1)
    assert array(scaled["data"][0]["z"]).mean() > array(plain["data"][0]["z"]).mean()
    assert scaled["data"][0]["colorbar"]["title"]["text"] == "% of the head's top"
    assert plain["data"][0]["colorbar"]["title"]["text"] == "weight %"

"""The masks, scaling and positions pages under AppTest: the values in the figures they render."""

from __future__ import annotations

import math

import numpy as np

from tests.app_support import array, figures, run_page, texts

TEXT = "Time flies like an arrow."  # 8 tokens with [CLS] and [SEP]
SHORT, LONG = "The cat sat.", "A much longer sentence about the dog that chased the cat."


def by_title(figs: list[dict]) -> dict[str, dict]:
    return {figure["layout"]["title"]["text"]: figure for figure in figs}


def above_diagonal(count: int) -> np.ndarray:
    return np.triu(np.ones((count, count), dtype=bool), k=1)


def test_causal_page_shows_each_step_of_the_mask():
    at = run_page("causal_masks", text=TEXT)
    assert at.title[0].value == "Causal and padding masks"  # as the menu calls it
    figs = figures(at)
    assert len(figs) == 6
    side, mask, raw, masked, softmax, padding = figs
    above = above_diagonal(8)

    bidirectional, causal = (array(trace["z"]) for trace in side["data"])
    assert bidirectional.shape == causal.shape == (8, 8)
    assert np.all(bidirectional > 0) and np.all(causal[above] == 0.0)
    np.testing.assert_allclose(causal.sum(axis=1), 1.0, atol=1e-5)

    assert np.all(np.isnan(array(mask["data"][0]["z"])[above]))
    assert np.all(array(mask["data"][0]["z"])[~above] == 1.0)

    raw_z = array(raw["data"][0]["z"])
    assert np.all(np.isfinite(raw_z)) and len(raw["data"]) == 1  # nothing masked yet

    masked_z = array(masked["data"][0]["z"])
    assert np.all(np.isnan(masked_z[above])) and np.all(np.isfinite(masked_z[~above]))
    np.testing.assert_allclose(masked_z[~above], raw_z[~above])
    # The colour scale spans the allowed cells only, and the grey layer covers the masked ones.
    assert masked["data"][0]["zmin"] == np.nanmin(masked_z)
    assert masked["data"][0]["zmax"] == np.nanmax(masked_z)
    overlay = array(masked["data"][1]["z"])
    assert masked["data"][1]["name"] == "masked" and masked["data"][1]["showscale"] is False
    assert np.all(np.isfinite(overlay[above])) and np.all(np.isnan(overlay[~above]))
    assert "masked" in masked["data"][1]["hovertemplate"]

    weights = array(softmax["data"][0]["z"])
    assert np.all(weights[above] == 0.0)
    np.testing.assert_allclose(weights, causal, atol=1e-5)
    # Row 0 sees only itself; softmax of the allowed raw scores reproduces every row.
    assert weights[0, 0] == 1.0
    row = np.exp(raw_z[4, :5] - raw_z[4, :5].max())
    np.testing.assert_allclose(weights[4, :5], row / row.sum(), atol=1e-5)

    text = texts(at)
    assert "0.0e+00" in text or "e-0" in text  # the recomputation agrees with the encoder
    assert "exactly 0 weight" in text
    short, long = (array(trace["z"]) for trace in padding["data"])
    assert short.shape == long.shape


def test_padding_mask_zeroes_padded_keys_and_forgetting_it_does_not():
    masked_at = run_page("causal_masks", text=TEXT,
                         state={"masks_first": SHORT, "masks_second": LONG})
    short_tokens = 6  # [CLS] the cat sat . [SEP]
    padding = figures(masked_at)[-1]
    short, long = (array(trace["z"]) for trace in padding["data"])
    assert short.shape[0] > short_tokens
    assert np.all(short[:, short_tokens:] == 0.0)
    assert np.all(short[:, :short_tokens] >= 0) and np.all(long > 0)
    assert "[PAD]" in padding["layout"]["xaxis"]["ticktext"]
    assert "Sentence 1: 6 tokens" in str(padding["layout"]["annotations"])

    forgot_at = run_page("causal_masks", text=TEXT,
                         state={"masks_first": SHORT, "masks_second": LONG, "masks_forget": True})
    unmasked = array(figures(forgot_at)[-1]["data"][0]["z"])
    assert np.all(unmasked[:, short_tokens:] > 0.0)
    assert [w.value for w in forgot_at.warning if "[PAD]" in w.value]


def test_equal_lengths_have_no_padding_and_other_heads_and_weights_work():
    at = run_page("causal_masks", text=TEXT,
                  state={"masks_first": "One two.", "masks_second": "Three four.",
                         "masks_layer": 2, "masks_head": 1, "masks_weights": "copied",
                         "masks_steps_of": "bidirectional"})
    assert "no padding" in texts(at)
    figs = figures(at)
    assert figs[0]["layout"]["title"]["text"] == "Layer 2 · Head 1"
    assert "encoder with sentence-transformers/all-MiniLM-L6-v2's weights, causal" in texts(at)
    # The bidirectional steps mask nothing: no grey layer, no NaN.
    assert len(figs[3]["data"]) == 1 and np.all(np.isfinite(array(figs[3]["data"][0]["z"])))


def test_scaling_page_measures_growth_and_saturation():
    at = run_page("scaling", state={"scaling_dk": 1024, "scaling_keys": 8, "scaling_seed": 3})
    dots, bars, curve = figures(at)
    measured = next(t for t in dots["data"] if t["name"].startswith("measured"))
    dims, values = array(measured["customdata"])[:, 0], array(measured["y"])
    np.testing.assert_allclose(array(measured["x"]), np.sqrt(dims))  # spaced by √d by default
    assert dims[0] == 1 and dims[-1] == 10_000 and np.all(np.diff(values) > 0)
    ratio = values / np.sqrt(2 * dims / math.pi)
    assert abs(ratio[-1] - 1) < 0.06 and abs(ratio[0] - math.sqrt(2 / math.pi)) < 0.06
    highlight = next(t for t in dots["data"] if t["name"].startswith("your d_k"))
    assert list(array(highlight["x"])) == [32] and list(array(highlight["customdata"])) == [1024]
    assert "approximation" in str(dots["layout"]["annotations"])

    metrics = {m.label: float(m.value.split()[0]) for m in at.metric}
    unscaled = metrics["Entropy, unscaled"]
    scaled = metrics["Entropy, scaled by 1/√1024"]
    assert metrics["Uniform (maximum)"] == 3.0 and scaled > unscaled + 1.0
    unscaled_bars, scaled_bars = (array(trace["y"]) for trace in bars["data"])
    assert len(unscaled_bars) == 8 and unscaled_bars.max() > scaled_bars.max()
    np.testing.assert_allclose([unscaled_bars.sum(), scaled_bars.sum()], 1.0, atol=1e-9)

    lines = {t["name"]: array(t["y"]) for t in curve["data"]}
    assert lines["unscaled"][-1] < 0.5 < 2.0 < lines["scaled by 1/√d"][-1]


def test_the_scaling_note_in_presenter_mode_is_wrapped_once():
    import textwrap

    from viz.scaling import APPROXIMATION_SHORT, SCALE_NOTES, SQRT_SCALE
    from viz.style import PRESENTER_NOTE_CHARS

    dots = figures(run_page("scaling", state={"sb_presenter": True}))[0]
    note = next(a for a in dots["layout"]["annotations"] if "approximation" in a["text"])
    # each sentence broken at the presenter's width once (wrapped first for the column, then
    # again narrower, it read "... anything that / grows like √d is a / straight line ...")
    assert note["text"] == "<br>".join(part for line in (SCALE_NOTES[SQRT_SCALE],
                                                         APPROXIMATION_SHORT)
                                       for part in textwrap.wrap(line, PRESENTER_NOTE_CHARS))


def test_positions_page_shows_sinusoids_and_similarities():
    at = run_page("positions", state={"positions_count": 16, "positions_dim": 32})
    sinusoid, sinusoid_similarity, learned = figures(at)
    encoding = array(sinusoid["data"][0]["z"])
    assert encoding.shape == (16, 32)
    assert np.all(encoding[0, 0::2] == 0.0) and np.all(encoding[0, 1::2] == 1.0)
    assert encoding[1, 0] == round(math.sin(1.0), 3)
    for figure in (sinusoid_similarity, learned):
        similarity = array(figure["data"][0]["z"])
        assert similarity.shape == (16, 16)
        np.testing.assert_allclose(np.diag(similarity), 1.0, atol=1e-3)
    assert learned["layout"]["title"]["text"].startswith("Learned by")


def test_causal_page_explains_missing_input():
    at = run_page("causal_masks", text="   ")
    assert not figures(at)
    assert [i.value for i in at.info if "Type a sentence" in i.value]
    at = run_page("causal_masks", text=TEXT, state={"masks_first": ""})
    assert len(figures(at)) == 5
    assert [i.value for i in at.info if "two sentences" in i.value]

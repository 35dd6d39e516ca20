"""The encoder–decoder page in AppTest: the toy translator (trained once per test session, the
app's own settings, then read from the disk cache like a server would) and a tiny T5."""

from __future__ import annotations

import re

import numpy as np
import pytest

from transformers import GPT2Config, GPT2LMHeadModel

from models.teaching.trained_translator import cache_folder, is_cached, save
from tests.app_support import array, figure_titled, figures, run_page, shown, texts
from tests.loading.test_hf_seq2seq import build, save_tokenizer
from tests.scratch.test_seq2seq import real_training
from ui.seq2seq_cache import TOY_SETTINGS

PAGE = "cross_attention"
GUARD = "Something went wrong"


@pytest.fixture(scope="module", autouse=True)
def toy_on_disk():
    """The page reads the toy model from the disk cache; put this session's training there."""
    if not is_cached(TOY_SETTINGS):
        save(real_training(), cache_folder(TOY_SETTINGS))


def test_toy_translation_with_every_view():
    at = run_page(PAGE)
    assert not at.error, [e.value for e in at.error]
    assert "Translation: **la voiture rouge est rapide** (the grammar's own translation)" in texts(at)
    row, heatmap = [f for f in figures(at) if f["layout"]["title"]["text"] == "Layer 0 · Head 0"]
    row_z, z = array(row["data"][0]["z"]), array(heatmap["data"][0]["z"])
    assert row_z.shape == (1, 5) and z.shape == (6, 5)  # target queries x source keys
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(row_z[0], z[0], atol=1e-5)  # step 1 is the first row
    assert heatmap["layout"]["xaxis"]["ticktext"] == ["the", "red", "car", "is", "fast"]
    assert heatmap["layout"]["yaxis"]["ticktext"] == ["&lt;bos&gt;", "la", "voiture", "rouge", "est", "rapide"]
    assert "Step 1 of 6: reading *<bos>*, the decoder wrote **la**" in texts(at)
    mosaic = array(figure_titled(at, "All 2 layers × 4 heads")["data"][0]["z"])
    assert mosaic.shape == (2 * 6, 4 * 5)
    loss = figure_titled(at, "Training loss")
    assert len(loss["data"][0]["y"]["bdata"] if isinstance(loss["data"][0]["y"], dict) else
               loss["data"][0]["y"]) > 0
    snapshots = figure_titled(at, "Cross-attention of layer 0, head 0 while the model learns")
    assert len(snapshots["data"]) == TOY_SETTINGS.snapshots
    assert re.search(r"\d+\.\d%", at.metric[0].value) and float(at.metric[0].value[:-1]) >= 95
    html = at.get("iframe")[0].proto.srcdoc
    assert "voiture" in html and "fast" in html
    assert not re.search(r"<script[^>]*\bsrc\s*=", html)


def test_step_slider_and_the_other_two_kinds():
    at = run_page(PAGE)
    at.slider(key="xattn_step").set_value(2).run()
    assert "Step 3 of 6: reading *<bos> la voiture*, the decoder wrote **rouge**" in texts(at)
    at.radio(key="xattn_kind").set_value("decoder").run()
    z = array(figures(at)[1]["data"][0]["z"])
    assert z.shape == (6, 6) and np.all(z[np.triu_indices(6, k=1)] == 0.0)
    at.radio(key="xattn_kind").set_value("encoder").run()
    z = array(figures(at)[1]["data"][0]["z"])
    assert z.shape == (5, 5)
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
    assert not at.error


@pytest.mark.parametrize("source, message", [
    ("", "Type an English sentence to translate"),
    ("the purple car is zorg", "'purple' and 'zorg' are not in the toy model's vocabulary"),
    (" ".join(["red"] * 13), "The sentence has 13 words and the toy model takes at most 12"),
])
def test_bad_source_gives_one_sentence_and_the_page_keeps_working(source, message):
    at = run_page(PAGE, state={"xattn_source": source})
    assert len(at.error) == 1 and message in shown(at.error[0].value)
    assert GUARD not in at.error[0].value
    assert at.title[0].value.startswith("Cross-attention")
    at.text_input(key="xattn_source").set_value("she sees the green books").run()
    assert not at.error and "elle voit les livres verts" in texts(at)


def test_retrain_and_watch_shows_this_sessions_training():
    at = run_page(PAGE)
    at.number_input(key="xattn_retrain_steps").set_value(20).run()
    at.button(key="xattn_retrain").click().run()
    assert not at.error
    assert "this session's retraining, 20 steps" in texts(at)
    snapshots = figure_titled(at, "Cross-attention of layer 0, head 0 while the model learns")
    assert [a["text"] for a in snapshots["layout"]["annotations"]][:2] == [
        "before training", "after 4 steps"]


def test_a_hugging_face_encoder_decoder_through_the_load_box(tmp_path):
    folder = build("t5", tmp_path / "t5")
    build_gpt2 = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=40,
                               n_positions=16)).save_pretrained(build_gpt2)
    save_tokenizer(build_gpt2)
    at = run_page(PAGE, state={"xattn_model": "hub"})
    assert "t5-small or Helsinki-NLP/opus-mt-en-fr" in texts(at)
    at.text_input(key="xattn_hf_input").set_value(str(build_gpt2))
    at.button(key="xattn_hf_load").click().run()
    assert len(at.error) == 1 and "decoder only" in shown(at.error[0].value)
    at.text_input(key="xattn_hf_input").set_value(str(folder))
    at.button(key="xattn_hf_load").click().run()
    at.text_input(key="xattn_target").set_value("la voiture rouge est rapide").run()
    assert not at.error, [e.value for e in at.error]
    assert "Read by" in texts(at) and "la voiture rouge est rapide" in texts(at)
    heatmap = figures(at)[1]
    z = array(heatmap["data"][0]["z"])
    assert z.shape == (6, 6)  # <pad> + 5 target words x 5 source words + </s>
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
    assert heatmap["layout"]["xaxis"]["ticktext"][-1] == "&lt;/s&gt;"
    at.text_input(key="xattn_target").set_value(" ".join(["rouge"] * 70)).run()
    assert len(at.error) == 1 and "The target text is 71 tokens long" in shown(at.error[0].value)

"""The pages of the chapter concepts that had none: masked-word filling with a masked LM
pretrained here, bertviz's neuron view of our models, and the n² cost of attention."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from models.experiments import masked_lm
from models.teaching.attention_cost import MINILM, crossover_tokens
from tests.app_support import array, figures, run_page, texts

FEW_STEPS = replace(masked_lm.DEFAULT_SETTINGS, steps=4, warmup_steps=1, batch_size=4,
                    hidden_size=16, num_heads=2, num_layers=1, intermediate_size=32)


def test_the_masked_lm_page_pretrains_once_keeps_it_and_fills_the_mask(monkeypatch, tmp_path,
                                                                       default_model):
    monkeypatch.setattr(masked_lm, "DEFAULT_SETTINGS", FEW_STEPS)
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))
    at = run_page("masked_lm")
    key = masked_lm.cache_key(default_model.tokenizer, masked_lm.read_corpus(), FEW_STEPS)
    assert not masked_lm.is_kept(key) and not figures(at)  # opening the page trains nothing
    assert "has not been pretrained on this machine yet" in texts(at)
    at.button(key="mlm_pretrain").click().run()
    assert masked_lm.is_kept(key)  # on disk under the app's cache folder after the first run
    at = run_page("masked_lm")  # a new session reads it back
    assert not at.get("button") or "mlm_pretrain" not in [b.key for b in at.button]
    kept = masked_lm.load(masked_lm.cache_folder(key))
    loss = next(f for f in figures(at) if "Masked-word loss" in f["layout"]["title"]["text"])
    np.testing.assert_allclose(array(loss["data"][0]["y"]), kept.losses, atol=1e-5)
    fillers = next(f for f in figures(at) if "fillers for the mask" in f["layout"]["title"]["text"])
    assert len(fillers["data"][0]["y"]) == 10
    maps = [f for f in figures(at) if f["data"][0]["type"] == "heatmap"]
    assert maps and "[MASK]" in json.dumps(maps[0]["data"][0]["y"])
    recipe = at.dataframe[0].value
    assert list(recipe.columns) == ["token", "the model reads", "chosen for the loss"]
    changed = recipe[recipe["chosen for the loss"] == "yes: replaced by [MASK]"]
    assert (changed["the model reads"] == "[MASK]").all()
    assert "15%" in texts(at)


def test_the_masked_lm_page_asks_for_a_mask_when_the_text_has_none(monkeypatch, tmp_path,
                                                                   default_model):
    monkeypatch.setattr(masked_lm, "DEFAULT_SETTINGS", FEW_STEPS)
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))
    masked_lm.pretrained(default_model.tokenizer, settings=FEW_STEPS)
    at = run_page("masked_lm", state={"mlm_text": "No mask here."})
    assert "Type [MASK] where a word should go" in texts(at)


def test_the_neuron_view_page_draws_bertviz_with_our_vectors():
    at = run_page("neuron_view", text="The cat sat on the mat.")
    (html,) = [element.proto.srcdoc for element in at.get("iframe")]
    assert "function showComputation(" in html and "cdnjs" not in html
    assert '"left_text": ["[CLS]", "the", "cat"' in html


def test_the_neuron_view_page_refuses_a_long_text_in_one_sentence():
    at = run_page("neuron_view", text=" ".join(["word"] * 60))
    assert not at.get("iframe")
    assert "The neuron view draws up to" in texts(at)


def test_the_cost_page_shows_the_arithmetic_and_measures_when_asked():
    at = run_page("attention_cost")
    (flops,) = figures(at)
    lengths = array(flops["data"][0]["x"])
    quadratic, linear = array(flops["data"][0]["y"]), array(flops["data"][1]["y"])
    np.testing.assert_allclose(quadratic[1:] / quadratic[:-1], (lengths[1:] / lengths[:-1]) ** 2)
    np.testing.assert_allclose(linear[1:] / linear[:-1], lengths[1:] / lengths[:-1])
    assert f"{crossover_tokens(MINILM):,} tokens" in texts(at)
    # the crossover's line and its label where they cross (a log axis places an annotation by
    # the logarithm of its x, a shape by x itself)
    crossover = crossover_tokens(MINILM)
    assert flops["layout"]["xaxis"]["type"] == "log"
    (line,) = flops["layout"]["shapes"]
    assert line["x0"] == line["x1"] == crossover
    (label,) = [note for note in flops["layout"]["annotations"] if "equal at" in note["text"]]
    assert label["xref"] == "x" and abs(label["x"] - np.log10(crossover)) < 1e-9
    assert 10 ** label["x"] < lengths.max() and 10 ** label["x"] > lengths.min()  # on the figure
    at.button(key="cost_measure").click().run()
    measured = figures(at)[-1]
    assert "Measured on this machine" in measured["layout"]["title"]["text"]
    memory = [d for d in measured["data"] if d["name"].startswith("scores and weights")][0]
    sizes = array(memory["x"])
    np.testing.assert_allclose(array(memory["y"]) * 2**20, 2 * 12 * sizes ** 2 * 4)

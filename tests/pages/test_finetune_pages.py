"""The encoder-layer and fine-tuning pages under AppTest: the values they show."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from models.experiments.classifier import (encoder_record, predict_one, pretrained_classifier,
                               scratch_classifier, scratch_encoder_config, with_head)
from models.experiments.finetune import PRETRAINED, SCRATCH, default_settings, finetune
from models.experiments.labelled_data import load_shipped
from models.loading.pretrained import DEFAULT_MODEL
from tests.app_support import array, figures, run_page, texts
from ui import finetune_cache
from models.analysis.compare import compare_heads

TEXT = "Time flies like an arrow."  # 8 tokens with [CLS] and [SEP]
REVIEW = "The waiter was friendly and the soup was delicious."


def by_title(at) -> dict[str, dict]:
    return {figure["layout"]["title"]["text"]: figure for figure in figures(at)}


def step_shapes(figure: dict) -> list[str]:
    """The shapes written on the right of the steps figure, in order."""
    return [re.sub(r"</?b>", "", text) for text in figure["data"][1]["text"]]


# --- inside one encoder layer -------------------------------------------------------------------


@pytest.mark.parametrize("layer", [0, 5])
def test_layer_page_shows_minilm_shapes_and_its_own_attention(default_model, layer):
    at = run_page("encoder_layer", text=TEXT, state={"encoder_layer_layer": layer,
                                                      "encoder_layer_head": 7})
    assert not at.error, [e.value for e in at.error]
    figs = by_title(at)
    steps = figs[f"One input through layer {layer}, step by step (live shapes)"]
    shapes = step_shapes(steps)
    assert len(shapes) == 25
    assert shapes[:6] == ["(1, 8, 384)"] * 6  # tokens, positions, segments, sum, norm, input
    assert shapes[9:13] == ["(1, 12, 8, 32)"] * 3 + ["(1, 12, 8, 8)"]  # Q, K, V heads; scores
    assert shapes[14] == "(1, 12, 8, 8)" and shapes[19] == "(1, 8, 384)"
    assert shapes[20] == shapes[21] == "(1, 8, 1536)" and shapes[-1] == "(1, 8, 384)"
    with torch.inference_mode():
        inputs = default_model.tokenizer(TEXT, return_tensors="pt")
        own = default_model.model(**inputs, output_attentions=True)
    head_map = figs[f"Layer {layer} · head 7 · sentence 0 of the batch: softmax(QKᵀ/√d_k)"]
    np.testing.assert_allclose(array(head_map["data"][0]["z"]),
                               own.attentions[layer][0, 7].numpy(), atol=1e-5)
    check = next(s.value for s in at.success if "running model" in s.value)
    final = float(re.search(r"own output to within ([0-9.e+-]+)", check).group(1))
    assert final <= 1e-5
    matrices = figs["Attention: queries, keys, values, output"]
    assert [a["text"] for a in matrices["layout"]["annotations"]] == [
        "W_Q (384, 384)", "W_K (384, 384)", "W_V (384, 384)", "W_O (384, 384)"]
    assert array(matrices["data"][0]["z"]).shape == (48, 48)
    weights = default_model.model.encoder.layer[layer].attention.self.query.weight.detach().T.numpy()
    assert array(matrices["data"][0]["z"])[0, 0] == pytest.approx(
        weights[:8, :8].ravel()[np.abs(weights[:8, :8]).argmax()], abs=1e-6)
    ffn = figs["Feed-forward: widen, then narrow again"]
    assert [a["text"] for a in ffn["layout"]["annotations"]] == ["W_1 (384, 1536)",
                                                                 "W_2 (1536, 384)"]


def test_layer_page_from_scratch_seed_004_batch_with_padding():
    at = run_page("encoder_layer", text=TEXT, state={"encoder_layer_kind": "scratch",
                                                      "encoder_layer_layer": 1})
    assert not at.error, [e.value for e in at.error]
    figs = by_title(at)
    shapes = step_shapes(figs["One input through layer 1, step by step (live shapes)"])
    assert "(16, 32, 64)" == shapes[5]  # seed 004's batch entering the layer
    assert shapes[9:13] == ["(16, 8, 32, 8)"] * 3 + ["(16, 8, 32, 32)"]
    assert shapes[13] == "(16, 1, 32, 32)"  # the padding mask
    assert shapes[20] == "(16, 32, 256)" and shapes[-1] == "(16, 32, 64)"
    title = "Layer 1 · head 0 · sentence 0 of the batch: softmax(QKᵀ/√d_k)"
    head_map = array(figs[title]["data"][0]["z"])
    assert head_map.shape == (32, 32)
    assert np.all(head_map[:, 8:] == 0.0)  # the sentence has 8 real tokens, then padding
    np.testing.assert_allclose(head_map.sum(axis=1), 1.0, atol=1e-5)
    assert "8 real tokens and 24 padding tokens" in texts(at)
    assert "Head size d_k = D / H = 8" in texts(at)
    assert [a["text"] for a in figs["Feed-forward: widen, then narrow again"]["layout"][
        "annotations"]] == ["W_1 (64, 256)", "W_2 (256, 64)"]


def test_layer_page_sizes_are_settable():
    at = run_page("encoder_layer", text=TEXT, state={
        "encoder_layer_kind": "scratch", "encoder_layer_hidden": 96, "encoder_layer_heads": 3,
        "encoder_layer_batch": 2, "encoder_layer_length": 12, "encoder_layer_norm": "pre"})
    assert not at.error, [e.value for e in at.error]
    shapes = step_shapes(figures(at)[0])
    assert shapes[5] == "(2, 12, 96)" and shapes[6] == "(2, 12, 96)"  # input, pre-attention norm
    assert shapes[10] == "(2, 3, 12, 32)"
    assert "pre-norm" in texts(at)


# --- fine-tuning --------------------------------------------------------------------------------


def quick_result(default_model, data, kind: str, epochs: int):
    """A really trained (if briefly: 3 steps) result under the page's own settings."""
    settings = default_settings(kind, epochs)
    classifier = (pretrained_classifier(default_model.model, 2, settings.pooling, settings.seed)
                  if kind == PRETRAINED else
                  scratch_classifier(scratch_encoder_config(len(default_model.tokenizer)), 2,
                                     settings.pooling, settings.seed))
    result = finetune(classifier, default_model.tokenizer, data, settings, max_steps=3)
    finetune_cache.store().put(finetune_cache.training_key(DEFAULT_MODEL, data, settings), result)
    return result


def test_fine_tuning_page_shows_the_trained_models(default_model):
    data = load_shipped()
    minilm = quick_result(default_model, data, PRETRAINED, 1)
    scratch = quick_result(default_model, data, SCRATCH, 1)
    trainings = finetune_cache.store().trainings
    at = run_page("fine_tuning", text=REVIEW, state={"fine_tuning_epochs": 1})
    assert not at.error, [e.value for e in at.error]
    assert finetune_cache.store().trainings == trainings  # shown from the cache, not retrained
    metrics = {m.label: m for m in at.metric}
    shown = metrics[f"Held-out accuracy, {DEFAULT_MODEL} (pretrained)"]
    assert shown.value == f"{minilm.held_out_accuracy:.1%}"
    assert metrics["Held-out accuracy, from-scratch encoder (random start)"].value == \
        f"{scratch.held_out_accuracy:.1%}"
    figs = by_title(at)
    counts = figs["The labelled sentences, per class"]["data"]
    assert list(counts[0]["x"]) == ["negative", "positive"]
    np.testing.assert_array_equal(array(counts[0]["y"]), [105, 105])
    np.testing.assert_array_equal(array(counts[1]["y"]), [35, 35])
    accuracy = figs["Held-out accuracy (sentences never trained on)"]["data"]
    np.testing.assert_allclose(array(accuracy[0]["y"]),
                               [e.held_out_accuracy for e in minilm.epochs])
    np.testing.assert_allclose(array(accuracy[2]["y"]), [0.5, 0.5])  # chance, two classes
    loss = figs["Loss (cross-entropy) while training"]["data"]
    np.testing.assert_allclose(array(loss[0]["y"]), minilm.step_losses, rtol=1e-6)

    after = predict_one(minilm.classifier, default_model.tokenizer, REVIEW, 64, data.class_names)
    assert metrics["After fine-tuning"].value == f"{after.label} ({after.confidence:.1%})"
    untrained = with_head(minilm.classifier, default_model.model, minilm.initial_head)
    first = predict_one(untrained, default_model.tokenizer, REVIEW, 64, data.class_names)
    assert metrics["Before (fresh head, untrained)"].value == \
        f"{first.label} ({first.confidence:.1%})"
    before = encoder_record(default_model.model, default_model.tokenizer, REVIEW, 512, "b")
    tuned = encoder_record(minilm.classifier.encoder, default_model.tokenizer, REVIEW, 512, "a")
    expected = compare_heads(before, tuned)
    accuracy_table, table = (frame.value for frame in at.dataframe)
    assert accuracy_table["held-out accuracy after"].tolist() == [minilm.held_out_accuracy,
                                                                  scratch.held_out_accuracy]
    assert len(table) == 72 and expected.iloc[0]["difference"] > 0  # every head, ranked
    assert table["difference"].is_monotonic_decreasing
    assert (table.iloc[0]["layer"], table.iloc[0]["head"]) == (expected.iloc[0]["layer"],
                                                               expected.iloc[0]["head"])
    assert table.iloc[0]["difference"] == pytest.approx(expected.iloc[0]["difference"], abs=1e-4)
    layer, head = int(expected.iloc[0]["layer"]), int(expected.iloc[0]["head"])
    cls_row = figs[f"The [CLS] row of layer {layer}, head {head}: where it looks"]["data"]
    np.testing.assert_allclose(array(cls_row[0]["y"]), before.head(layer, head)[0], atol=1e-5)
    np.testing.assert_allclose(array(cls_row[1]["y"]), tuned.head(layer, head)[0], atol=1e-5)


def test_uploaded_csv_trains_once_and_bad_csv_trains_nothing(default_model, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # a machine that never trained
    rows = [("I loved it, truly wonderful", 1), ("Awful and boring, never again", 0),
            ("A delight from start to end", 1), ("Broken on arrival, so annoying", 0)] * 4
    good = ("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows)).encode()
    at = run_page("fine_tuning", text=REVIEW, state={"fine_tuning_data": "uploaded",
                                                      "fine_tuning_epochs": 1})
    assert not at.error
    at.file_uploader(key="fine_tuning_upload").upload("bad.csv", b"text,label\ngood,1\nbad,x\n",
                                                     "text/csv")
    at.run()
    assert [e.value for e in at.error] == [
        "Row 3's label 'x' is not a whole number (labels are 0, 1, \u2026)."]
    assert "fine_tuning_train" not in [b.key for b in at.button]  # nothing to train on

    at.file_uploader(key="fine_tuning_upload").clear().upload("mine.csv", good, "text/csv")
    at.run()
    assert not at.error and "mine.csv: 12 sentences to train on, 4 held out" in texts(at)
    counts = by_title(at)["The labelled sentences, per class"]["data"]
    assert list(counts[0]["x"]) == ["0", "1"]
    np.testing.assert_array_equal(array(counts[0]["y"]), [6, 6])  # trained on
    np.testing.assert_array_equal(array(counts[1]["y"]), [2, 2])  # held out
    before = finetune_cache.store().trainings
    at.button(key="fine_tuning_train").click().run()
    assert not at.error, [e.value for e in at.error]
    assert finetune_cache.store().trainings == before + 2  # MiniLM and the from-scratch encoder
    assert len([m for m in at.metric if m.label.startswith("Held-out accuracy")]) == 2
    at.run()  # a rerun (or another session) reuses the trained models
    assert finetune_cache.store().trainings == before + 2 and not at.error
    assert len(list(tmp_path.glob("classifier-*/training.json"))) == 2  # kept on disk

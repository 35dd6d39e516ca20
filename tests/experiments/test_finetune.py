"""Labelled data, the classification head, seeded fine-tuning, and the train-once cache."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from models.experiments.classifier import (SequenceClassifier, predict, pretrained_classifier,
                               scratch_classifier, tokenize, with_head)
from models.experiments.finetune import (PRETRAINED, SCRATCH, FinetuneSettings, default_settings,
                             finetune)
from models.experiments.labelled_data import (LabelledData, LabelledDataError, load_shipped,
                                              parse_csv)
from models.limits import KIB, LABELLED_ROWS, UPLOAD_BYTES
from models.teaching.layer_walk import scratch_walk_config
from models.store.byte_cache import Budget, Store
from ui.finetune_cache import POLL_SECONDS, TrainedModels, training_key

SENTENCES = [f"sentence number {i}" for i in range(12)]


def csv_of(rows, header: str | None = "text,label") -> bytes:
    lines = ([header] if header else []) + [f"{text},{label}" for text, label in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


# --- data ---------------------------------------------------------------------------------------


def test_shipped_data_is_balanced_with_a_balanced_held_out_split():
    data = load_shipped()
    assert 240 <= len(data.texts) <= 300
    assert data.class_names == ("negative", "positive")
    assert data.class_counts() == (140, 140)
    held_texts, held_labels = data.part(held_out=True)
    assert len(held_texts) == 70 and held_labels.count(0) == held_labels.count(1) == 35
    assert len(set(data.texts)) == len(data.texts)  # no sentence twice
    train_texts, _ = data.part(held_out=False)
    assert not set(train_texts) & set(held_texts)
    assert load_shipped().fingerprint == data.fingerprint  # fixed, not reshuffled per load


@pytest.mark.parametrize("raw, message", [
    (csv_of([(t, 1) for t in SENTENCES]),
     "Every row has label 1; a classifier needs at least two classes."),
    (b"text,label\nfine day,1\nbad day,\n", "Row 3 has no label."),
    (b"text,label\nfine day,1\nbad day\n", "Row 3 has no label."),
    (b"text,label\nfine day,1\nbad day,negative\n",
     "Row 3's label 'negative' is not a whole number (labels are 0, 1, \u2026)."),
    (b"text,label\nfine day,1\nbad day,0.5\n",
     "Row 3's label '0.5' is not a whole number (labels are 0, 1, \u2026)."),
    (b"text,label\nfine day,1\n  ,0\n", "Row 3 has an empty text."),
    (csv_of([(f"s{i}", i % 2) for i in range(LABELLED_ROWS + 1)]),
     f"The file has {LABELLED_ROWS + 1} rows; the limit is {LABELLED_ROWS}."),
    (b"text,label\ncaf\xe9,1\n",
     "The file is not UTF-8 text (byte 0xe9 at position 14); save it as a UTF-8 CSV."),
    (b"x" * (UPLOAD_BYTES + 1), f"The file is 257 KB; the limit is {UPLOAD_BYTES // KIB} KB."),
    (b"", "The file has no rows."),
    (b"text,label\n", "The file has a header but no sentences."),
    (csv_of([(t, i % 2) for i, t in enumerate(SENTENCES[:5])]),
     "Label 0 has only 3 rows; each class needs at least 4."),
    (b"text,label\nfine day,1,extra\nbad day,0\n",
     "Row 2 has 3 columns; the file needs 2: text, label."),
])
def test_bad_csv_gives_one_sentence(raw, message):
    with pytest.raises(LabelledDataError) as caught:
        parse_csv(raw)
    assert str(caught.value) == message
    assert str(caught.value).count(". ") == 0  # one sentence


def test_good_csv_with_and_without_header():
    rows = [(t, i % 3 + 1) for i, t in enumerate(SENTENCES)]  # labels 1, 2, 3
    with_header, without = parse_csv(csv_of(rows)), parse_csv(csv_of(rows, header=None))
    assert with_header.texts == without.texts == tuple(SENTENCES)
    assert with_header.class_names == ("1", "2", "3")
    assert with_header.labels[:3] == (0, 1, 2)
    assert with_header.held_out == without.held_out  # the seeded split is fixed
    assert [sum(1 for i, h in enumerate(with_header.held_out) if h and with_header.labels[i] == c)
            for c in range(3)] == [1, 1, 1]
    quoted = parse_csv(b'text,label\n' + b'"good, really good",1\n"bad, so bad",0\n' * 4)
    assert quoted.texts[0] == "good, really good"


# --- the classification head --------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_pooling_matches_the_encoder_and_ignores_padding(default_model, pooling):
    classifier = pretrained_classifier(default_model.model, 2, pooling, seed=3)
    texts = ["A short one.", "A somewhat longer sentence than the first one is."]
    inputs = tokenize(default_model.tokenizer, texts, 64)
    with torch.inference_mode():
        hidden = default_model.model(**inputs).last_hidden_state  # the original, untouched model
        mask = inputs["attention_mask"][0].bool()
        expected = hidden[0, 0] if pooling == "cls" else hidden[0, mask].mean(dim=0)
        pooled = classifier.pool(classifier.hidden(**inputs), inputs["attention_mask"])
        alone = classifier(**tokenize(default_model.tokenizer, texts[:1], 64))
        batched = classifier(**inputs)
    torch.testing.assert_close(pooled[0], expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=0)
    assert classifier.encoder is not default_model.model  # training never touches the cache


def test_head_is_seeded_and_a_bad_pooling_raises(default_model):
    first = SequenceClassifier(torch.nn.Identity(), 8, 3, "mean", seed=5)
    second = SequenceClassifier(torch.nn.Identity(), 8, 3, "mean", seed=5)
    assert torch.equal(first.head.weight, second.head.weight)
    with pytest.raises(ValueError, match="pooling"):
        SequenceClassifier(torch.nn.Identity(), 8, 2, "max")
    with pytest.raises(ValueError, match="epochs"):
        FinetuneSettings(epochs=0)
    with pytest.raises(ValueError, match="encoder"):
        FinetuneSettings(encoder="other")


# --- fine-tuning --------------------------------------------------------------------------------


def test_short_seeded_finetune_lowers_the_loss_and_repeats(default_model):
    data = load_shipped()
    settings = replace(default_settings(PRETRAINED, epochs=1), batch_size=16)
    steps = 6
    runs = []
    for _ in range(2):
        classifier = pretrained_classifier(default_model.model, 2, settings.pooling, settings.seed)
        texts, _ = data.part(held_out=True)
        before = predict(classifier, default_model.tokenizer, list(texts), settings.max_tokens)
        reported = []
        result = finetune(classifier, default_model.tokenizer, data, settings,
                          progress=lambda fraction, message: reported.append(fraction),
                          max_steps=steps)
        runs.append((result, before))
    result, before = runs[0]
    assert len(result.step_losses) == steps
    assert [e.epoch for e in result.epochs] == [0, 1]
    assert result.epochs[1].held_out_loss < result.epochs[0].held_out_loss
    assert result.epochs[1].held_out_accuracy > result.epochs[0].held_out_accuracy
    assert np.mean(result.step_losses[-2:]) < np.mean(result.step_losses[:2])
    assert reported[-1] == 1.0 and reported == sorted(reported)
    assert runs[1][0].step_losses == result.step_losses  # same seed, same training
    assert not result.classifier.training
    # The "before" classifier (pretrained encoder + the saved initial head) predicts what the
    # classifier predicted before any training.
    untrained = with_head(result.classifier, default_model.model, result.initial_head)
    texts, _ = data.part(held_out=True)
    np.testing.assert_allclose(predict(untrained, default_model.tokenizer, list(texts), 64),
                               before, atol=1e-5)


def test_from_scratch_classifier_learns_its_training_sentences(default_model):
    """A tiny from-scratch encoder can memorise a few sentences (the training loss falls)."""
    texts = tuple(f"{word} {i}" for i, word in enumerate(["good", "bad"] * 8))
    labels = tuple(i % 2 for i in range(16))
    data = LabelledData("tiny", texts, labels, tuple(i >= 12 for i in range(16)), ("a", "b"))
    config = scratch_walk_config(len(default_model.tokenizer), 32, 2, 1, "pre")
    settings = FinetuneSettings(encoder=SCRATCH, epochs=15, batch_size=4, learning_rate=3e-3)
    result = finetune(scratch_classifier(config, 2, "mean", 0), default_model.tokenizer, data,
                      settings)
    assert result.epochs[-1].train_loss < 0.5 * result.epochs[1].train_loss
    assert result.train_size == 12 and result.held_out_size == 4


# --- the train-once cache -----------------------------------------------------------------------


def fake_result(tag: str):
    return type("FakeResult", (), {"tag": tag})()


def test_two_threads_asking_at_once_train_once():
    store = TrainedModels(Store("fine-tuned", Budget(entries=2)))
    calls = []

    def train(report):
        calls.append(threading.current_thread().name)
        for step in range(5):
            report(step / 5, f"step {step}")
            time.sleep(POLL_SECONDS)  # longer than a poll, so the waiters see steps
        return fake_result("trained")

    results, progress = [], []
    threads = [threading.Thread(target=lambda: results.append(
        store.result("key", train, lambda fraction, message: progress.append(fraction))))
        for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and store.trainings == 1
    assert results[0] is results[1] and results[0].tag == "trained"
    assert progress  # both waited on the same job and saw its progress
    assert store.result("key", train) is results[0] and len(calls) == 1  # a third call reuses


def test_store_is_bounded_and_a_failed_training_is_not_kept():
    store = TrainedModels(Store("fine-tuned", Budget(entries=2)))
    for tag in ("a", "b", "c"):
        store.put(tag, fake_result(tag))
    assert len(store.results) == 2 and store.get("a") is None and store.get("c").tag == "c"

    def broken(report):
        raise RuntimeError("out of memory")
    with pytest.raises(RuntimeError, match="out of memory"):
        store.result("d", broken)
    assert store.get("d") is None
    assert store.result("d", lambda report: fake_result("d")).tag == "d"  # tried again


def test_training_key_changes_with_data_and_settings():
    data = load_shipped()
    other = parse_csv(csv_of([(t, i % 2) for i, t in enumerate(SENTENCES)]))
    settings = default_settings(PRETRAINED)
    keys = {training_key("m", data, settings), training_key("m", other, settings),
            training_key("m", data, replace(settings, epochs=2)),
            training_key("other", data, settings)}
    assert len(keys) == 4
    assert training_key("m", load_shipped(), default_settings(PRETRAINED)) == \
        training_key("m", data, settings)

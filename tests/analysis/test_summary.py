"""The Summary: every reducer of every layer at once. On real MiniLM and SmolLM2 records it is the
reducers run over the record; streamed layer by layer (models.hooks.streaming.stream) it is the
whole record's Summary; on a real padded batch it is, input by input, each input's Summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from models.analysis.detectors import SENTENCE_DETECTORS, Detectors, NotMeasurable
from models.analysis.norm_shares import NORM_COLUMNS, with_norm_columns
from models.analysis.reducer import reduce_record
from models.analysis.roles import Roles
from models.analysis.rollout import ROLLOUT_CELLS, Rollout
from models.analysis.statistics import NUMERIC_COLUMNS, Statistics, head_statistics
from models.analysis.summary import Summary, SummaryStream, summarise_record
from models.analysis.thumbnails import THUMBNAIL_CELLS, Thumbnails
from models.analysis.token_batch import TokenBatch
from models.hooks.record import AttentionRecord
from models.hooks.streaming import prepare, stream

ATOL = 1e-5
TEXT = "the cat saw the dog , and the dog saw the cat near the old mill ."
PAIR = "a cat , a dog ."
OTHER = "Fruit flies like a banana, time flies like an arrow."


def records(encoder_runner, decoder_runner) -> list[tuple[object, AttentionRecord]]:
    return [(encoder_runner, encoder_runner.run(TEXT, PAIR).record),
            (decoder_runner, decoder_runner.run(TEXT).record)]


def assert_same_summary(summary, expected, atol: float) -> None:
    np.testing.assert_allclose(summary.pooled, expected.pooled, rtol=0, atol=atol)
    pd.testing.assert_frame_equal(summary.statistics, expected.statistics, check_exact=False,
                                  rtol=0, atol=atol)
    assert list(summary.detectors) == list(expected.detectors) == list(SENTENCE_DETECTORS)
    for name, scores in expected.detectors.items():
        if isinstance(scores, str):
            assert summary.detectors[name] == scores
        else:
            np.testing.assert_allclose(summary.detector_scores(name), scores, rtol=0, atol=atol)
    np.testing.assert_allclose(summary.roles, expected.roles, rtol=0, atol=atol)
    np.testing.assert_allclose(summary.rollout_raw, expected.rollout_raw, rtol=0, atol=atol)
    np.testing.assert_allclose(summary.rollout_rolled, expected.rollout_rolled, rtol=0, atol=atol)


def test_the_summary_of_a_record_is_its_reducers_over_the_record(encoder_runner, decoder_runner):
    for _, record in records(encoder_runner, decoder_runner):
        summary = summarise_record(record)
        thumbnails, statistics, detectors, roles, rollout = reduce_record(
            record, Thumbnails(), Statistics(), Detectors(SENTENCE_DETECTORS), Roles(), Rollout())
        np.testing.assert_array_equal(summary.pooled, thumbnails[0].values)
        pd.testing.assert_frame_equal(summary.statistics, statistics.table())
        pd.testing.assert_frame_equal(summary.statistics, head_statistics(record))
        assert list(summary.statistics.columns) == ["layer", "head", "label", *NUMERIC_COLUMNS]
        for name in SENTENCE_DETECTORS:
            np.testing.assert_array_equal(summary.detector_result.scores[name],
                                          detectors.scores[name])
        np.testing.assert_array_equal(summary.roles, roles.of())
        np.testing.assert_array_equal(summary.rollout_rolled, rollout.rolled_pooled[0])
        side = min(record.num_tokens, THUMBNAIL_CELLS)
        assert summary.pooled.shape == (record.num_layers, record.num_heads, side, side)
        side = min(record.num_tokens, ROLLOUT_CELLS)
        assert summary.rollout_raw.shape == (record.num_layers, side, side)
        assert summary.nbytes >= summary.pooled.nbytes + summary.rollout_raw.nbytes * 2
    with pytest.raises(NotMeasurable, match=r"no \[SEP\]"):
        summary.detector_scores("[SEP] sink")  # the decoder has no special token


def test_a_streamed_summary_is_the_whole_records(encoder_runner, decoder_runner):
    for runner, record in records(encoder_runner, decoder_runner):
        pair = PAIR if runner is encoder_runner else None
        encoded, _ = prepare(runner, TEXT, pair)
        done = []
        reduce = SummaryStream(encoded, runner.causal, done.append)
        streamed = stream(runner, TEXT, pair, reduce)
        assert streamed.tokens == record.tokens and done == list(range(1, record.num_layers + 1))
        assert_same_summary(reduce.summary(streamed), summarise_record(record), ATOL)
        other = SummaryStream(prepare(runner, OTHER, None)[0], runner.causal)
        with pytest.raises(ValueError, match="not the ones measured"):
            other.summary(streamed)


def padded_batch(runner, texts: list[str]):
    """Each layer's (B, H, T, T) maps of `texts` through the model as one batch padded on the
    right, the batch's tokens, and each text's own record."""
    tokens = TokenBatch.padded([TokenBatch.of_encoded(runner.encode(text)[0], runner.causal)
                                for text in texts])
    inputs = runner.tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")
    np.testing.assert_array_equal(inputs["attention_mask"].numpy().astype(bool), tokens.real)
    extra = {"use_cache": False} if runner.causal else {}
    with torch.inference_mode():
        output = runner.model(**inputs, output_attentions=True, **extra)
    return [layer.numpy() for layer in output.attentions], tokens


def test_a_real_padded_batch_summarises_each_input_as_alone(encoder_runner, decoder_runner):
    texts = [TEXT, "Birds sing.", OTHER]
    for runner in (encoder_runner, decoder_runner):
        layers, tokens = padded_batch(runner, texts)
        assert tokens.lengths.min() < tokens.real.shape[1]  # some inputs carry padding
        summary = Summary()
        for layer, maps in enumerate(layers):
            summary.add(layer, maps, tokens)
        together = summary.result()
        assert together.num_items == len(texts)
        with pytest.raises(ValueError, match="pick one"):
            together.statistics
        for index, text in enumerate(texts):
            alone = summarise_record(runner.run(text).record)
            assert_same_summary(together.item(index), alone, ATOL)


def test_norms_add_the_norm_based_columns(encoder_runner):
    trace = encoder_runner.run("Time flies like an arrow.")
    record = trace.record
    summary = summarise_record(record, norms=trace.value_norms)
    expected = with_norm_columns(head_statistics(record), record,
                                 record.weights * trace.value_norms[:, :, None, :])
    assert list(summary.statistics.columns) == [*expected.columns]
    assert set(NORM_COLUMNS) <= set(summary.statistics.columns)
    pd.testing.assert_frame_equal(summary.statistics, expected, check_exact=False, rtol=0,
                                  atol=ATOL)
    reducer = Summary()
    tokens = TokenBatch.of_record(record)
    reducer.add(0, record.layer(0)[None], tokens, trace.value_norms[0][None])
    with pytest.raises(ValueError, match="every layer"):
        reducer.add(1, record.layer(1)[None], tokens)


def test_a_summary_needs_square_maps():
    record = AttentionRecord(tokens=("a", "b"), key_tokens=("x", "y", "z"),
                             weights=np.full((1, 1, 2, 3), 1 / 3), source="hand")
    with pytest.raises(ValueError, match="square"):
        summarise_record(record)

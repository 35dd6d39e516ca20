"""One model source, one run path, one trace: checked against each model's own plain forward.

Every kind goes through ModelSource.load(...).run(text): the from-scratch encoder, the real
MiniLM, the real SmolLM2, a tiny GPT-2 and a tiny masked-LM BERT built here. The references are
the models' own outputs from a call outside the app's capture.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from models.loading.decoder import DEFAULT_DECODER
from models.loading.pretrained import DEFAULT_MODEL
from models.hooks.record import AttentionRecord
from models.loading.kinds import DECODER, PRETRAINED, SCRATCH_COPIED, SCRATCH_RANDOM
from models.loading.source import ModelSource
from tests.reference import reference_attentions
from tests.tiny_models import tiny_gpt2, tiny_masked_lm

TEXT = "Time flies like an arrow."


def plain_forward(model, inputs: dict, **extra):
    with torch.inference_mode():
        return model(**inputs, output_attentions=True, **extra)


def test_encoder_source_trace_is_the_models_own_forward(default_model):
    runner = ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: default_model)
    trace = runner.run(TEXT, "Fruit flies like a banana.")
    expected = reference_attentions(default_model, TEXT, "Fruit flies like a banana.")
    np.testing.assert_array_equal(trace.record.weights, expected)  # the same eager arithmetic
    layers, heads, tokens, _ = trace.record.weights.shape
    assert trace.query.shape == trace.key.shape == trace.value.shape == (layers, heads, tokens, 32)
    assert trace.record.is_pair and trace.predictions is None and not trace.rotary
    for layer in (0, layers - 1):
        assert trace.masked_softmax_difference(layer) < 1e-5  # numpy against torch's softmax
    # each head's context is its weights times its values, as the model computed them
    np.testing.assert_allclose(trace.context[2], trace.record.weights[2] @ trace.value[2], atol=1e-5)
    assert runner.limit_reason == "positions" and runner.max_tokens == 512


def test_scratch_source_runs_through_the_same_path(default_model):
    runner = ModelSource(SCRATCH_RANDOM, DEFAULT_MODEL, 5).load(
        pretrained=lambda name: default_model)
    trace = runner.run(TEXT)
    ids = default_model.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        own = runner.model(ids).attentions
    for layer, weights in enumerate(own):
        np.testing.assert_array_equal(trace.record.weights[layer], weights[0].numpy())
    assert trace.record.source == "from-scratch encoder, random weights (seed 5)"
    other = ModelSource(SCRATCH_RANDOM, DEFAULT_MODEL, 6).load(
        pretrained=lambda name: default_model).run(TEXT)
    assert np.abs(other.record.weights - trace.record.weights).max() > 1e-3


def test_copied_weights_refused_from_a_non_bert(tmp_path, default_model):
    tiny = tiny_gpt2(tmp_path, default_model)
    with pytest.raises(Exception, match="only from a BERT"):
        ModelSource(SCRATCH_COPIED, "x").load(pretrained=lambda name: tiny)


def test_smollm2_trace_predictions_and_rotated_vectors(smollm2_model):
    runner = ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: smollm2_model)
    assert runner.rotary and runner.causal and runner.limit_reason == "memory"
    text = "The capital of France is"
    trace = runner.run(text)
    inputs = dict(smollm2_model.tokenizer(text, return_tensors="pt"))
    output = plain_forward(smollm2_model.model, inputs, use_cache=False)
    for layer, weights in enumerate(output.attentions):
        np.testing.assert_allclose(trace.record.weights[layer], weights[0].numpy(), atol=1e-5)
    assert trace.record.masks == ("causal",)
    assert trace.kv_group == 3 and trace.key.shape[1] == 3 and trace.query.shape[1] == 9
    first = trace.predictions.next_token.candidates[0]
    assert first.text == " Paris"
    expected = torch.softmax(output.logits[0, -1].float(), -1)
    assert first.probability == pytest.approx(float(expected.max()), abs=1e-5)
    positions = trace.predictions.positions.positions
    assert len(positions) == trace.record.num_tokens - 1
    came = inputs["input_ids"][0, 2]
    assert positions[1].actual.probability == pytest.approx(
        float(torch.softmax(output.logits[0, 1].float(), -1)[came]), abs=1e-5)


def test_truncation_notice_names_the_memory_limit(smollm2_model):
    runner = ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: smollm2_model)
    trace = runner.run("word " * (runner.max_tokens + 40))
    assert trace.record.num_tokens == runner.max_tokens and trace.record.dropped_tokens > 0
    notice = runner.limit_notice(trace.record.dropped_tokens)
    assert f"keeps at most {runner.max_tokens} tokens" in notice and "fits in memory" in notice


def test_tiny_gpt2_trace_equals_its_forward(tmp_path, default_model):
    loaded = tiny_gpt2(tmp_path, default_model)
    runner = ModelSource(DECODER, str(tmp_path)).load(decoder=lambda name: loaded)
    trace = runner.run(TEXT)
    encoded = loaded.tokenizer(TEXT, return_tensors="pt")  # a decoder reads no segment ids
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    output = plain_forward(loaded.model, inputs, use_cache=False)
    for layer, weights in enumerate(output.attentions):
        np.testing.assert_allclose(trace.record.weights[layer], weights[0].numpy(), atol=1e-5)
    assert not runner.rotary and trace.kv_group == 1
    probabilities = torch.softmax(output.logits[0, -1], -1)
    best = trace.predictions.next_token.candidates[0]
    assert best.probability == pytest.approx(float(probabilities.max()), abs=1e-5)
    assert best.token_id == int(probabilities.argmax())


def test_masked_lm_fills_the_mask_with_its_own_probabilities(tmp_path):
    model, tokenizer = tiny_masked_lm(tmp_path)
    runner = ModelSource(PRETRAINED, str(tmp_path)).load()
    assert runner.mask_token == "[MASK]"
    text = "time flies like [MASK] arrow ."
    trace = runner.run(text)
    inputs = dict(tokenizer(text, return_tensors="pt"))
    output = plain_forward(model, inputs)
    for layer, weights in enumerate(output.attentions):
        np.testing.assert_allclose(trace.record.weights[layer], weights[0].numpy(), atol=1e-5)
    (fillers,) = trace.predictions.masks
    assert fillers.position == 4 and len(fillers.candidates) == 10
    expected = torch.softmax(output.logits[0, 4], -1)
    top = expected.topk(10)
    assert [c.token_id for c in fillers.candidates] == top.indices.tolist()
    np.testing.assert_allclose([c.probability for c in fillers.candidates], top.values.numpy(),
                               atol=1e-5)
    assert runner.run("time flies like an arrow .").predictions.masks == ()


def test_an_encoder_without_a_head_has_no_predictions(default_model):
    """The embedded MiniLM ships no masked-LM weights: no head, so no predictions are made up."""
    assert default_model.lm_model is None
    runner = ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: default_model)
    assert runner.mask_token is None
    assert runner.run("time flies like [MASK] arrow").predictions is None


def test_record_copies_are_validated_again():
    weights = np.full((1, 1, 2, 2), 0.5, dtype=np.float32)
    record = AttentionRecord(tokens=("a", "b"), weights=weights, source="x")
    with pytest.raises(ValueError):
        replace(record, tokens=("a",))


def test_trace_norm_based_attention_equals_the_direct_computation(default_model, smollm2_model):
    """||alpha f(x)|| from the trace's value norms (Gram matrices) equals the direct
    ||alpha_ij v_j W_O^h|| of models.analysis.norms on the captured run, BERT and GQA alike."""
    from models.hooks.capture import run_captured
    from models.analysis.norms import norm_maps

    for runner in (ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda n: default_model),
                   ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda n: smollm2_model)):
        trace = runner.run(TEXT)
        ids = torch.tensor([trace.input_ids])
        direct = norm_maps(run_captured(runner.model, {"input_ids": ids}))
        for layer in (0, trace.record.num_layers - 1):
            np.testing.assert_allclose(trace.norm_weights(layer), direct[layer], rtol=1e-4,
                                       atol=1e-5)


def test_a_trace_keeps_the_maps_the_model_wrote_without_copying_them(default_model):
    from models.hooks.capture import run_captured
    from models.loading.tokenize import encode
    from models.hooks.trace import trace_from_run

    runner = ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: default_model)
    encoded = encode(runner.tokenizer, TEXT, None, runner.max_tokens)
    run = run_captured(runner.model, encoded.model_inputs())
    trace = trace_from_run(run, encoded, "MiniLM", causal=False)
    assert all(np.shares_memory(trace.record.layer(index), captured.weights.numpy())
               for index, captured in enumerate(run.layers))
    np.testing.assert_array_equal(trace.record.weights,
                                  reference_attentions(default_model, TEXT, None))

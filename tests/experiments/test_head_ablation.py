"""Ablation and knockout on tiny BERT / GPT-2 / Llama models with random weights
(tests/analysis/head_models.py) and on tiny fine-tuned classifiers, against the same computation
done by hand on the model's weights (zeroed output columns, one ablation at a time)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, GPT2LMHeadModel, LlamaForCausalLM

from models.experiments import ablation, targets

from models.hooks.attention import ATTENTION_NAME
from models.hooks.capture import Intervention
from models.hooks.install import install
from models.experiments.classifier import SequenceClassifier, scratch_classifier
from models.scratch.config import EncoderConfig
from models.loading.tokenize import EncodedText
from viz.head_analysis import importance_map, most_important
from tests.analysis.head_models import (INIT, LONGER, SENTENCE, Ids,  # noqa: F401 (fixtures)
                                        gpt2_tokenizer, llama_input, plain_logits, tiny_bert,
                                        tiny_gpt2, tiny_llama)

ATOL = 1e-5


def test_ablating_a_head_whose_output_is_zero_changes_nothing(tiny_gpt2, gpt2_tokenizer):
    model = copy.deepcopy(tiny_gpt2)
    width, head_width, layer, head = 32, 8, 1, 2
    with torch.no_grad():  # GPT-2's c_attn is Conv1D: (in, 3 * D) holding q | k | v
        start = 2 * width + head * head_width
        model.transformer.h[layer].attn.c_attn.weight[:, start:start + head_width] = 0.0
        model.transformer.h[layer].attn.c_attn.bias[start:start + head_width] = 0.0
    prepared = targets.prepare(model, gpt2_tokenizer, 64, LONGER, True, "tiny gpt2")
    target = targets.target_from_text(prepared, gpt2_tokenizer, "cat")
    for mode in ablation.ABLATION_MODES:
        result = ablation.ablate_heads(model, prepared, gpt2_tokenizer, target, [(layer, head)],
                                       mode)
        assert result.after.log_probability == pytest.approx(result.before.log_probability,
                                                             abs=1e-5)
        np.testing.assert_allclose(result.after.record.weights, result.before.record.weights,
                                   atol=1e-5)
    other = ablation.ablate_heads(model, prepared, gpt2_tokenizer, target, [(0, 0)])
    assert abs(other.change) > 0  # a head with an output does change the prediction


def zero_output_columns(model, layer: int, head: int, head_width: int):
    """A copy of `model` with head `head`'s slice of layer `layer`'s W_O set to 0 by hand."""
    edited = copy.deepcopy(model)
    columns = slice(head * head_width, (head + 1) * head_width)
    with torch.no_grad():
        if isinstance(edited, LlamaForCausalLM):
            edited.model.layers[layer].self_attn.o_proj.weight[:, columns] = 0.0
        elif isinstance(edited, GPT2LMHeadModel):  # Conv1D: (in, out), so rows are the input
            edited.transformer.h[layer].attn.c_proj.weight[columns, :] = 0.0
        else:
            edited.bert.encoder.layer[layer].attention.output.dense.weight[:, columns] = 0.0
    return edited


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_zero_ablation_equals_zeroing_the_heads_output_weights_by_hand(
        name, tiny_llama, tiny_gpt2, tiny_bert, gpt2_tokenizer, default_model):
    heads = [(1, 2), (0, 3)]
    if name == "llama":
        model, tokenizer, prepared = tiny_llama, Ids(), llama_input()
        target = targets.next_token_target(prepared, tokenizer, 7)
    elif name == "gpt2":
        model, tokenizer = tiny_gpt2, gpt2_tokenizer
        prepared = targets.prepare(model, tokenizer, 64, LONGER, True, "tiny gpt2")
        target = targets.target_from_text(prepared, tokenizer, "mat")
    else:
        model, tokenizer = tiny_bert, default_model.tokenizer
        prepared = targets.prepare(model, tokenizer, 64, SENTENCE, False, "tiny bert")
        prepared, target = targets.with_mask(prepared, tokenizer, 2)
        assert prepared.encoded.tokens[2] == "[MASK]" and target.text == "flies"
    edited = model
    for layer, head in heads:
        edited = zero_output_columns(edited, layer, head, 8)
    result = ablation.ablate_heads(model, prepared, tokenizer, target, heads)
    logits = plain_logits(edited, prepared)[0, target.position]
    expected = torch.log_softmax(logits, dim=-1)[target.token_id]
    assert result.after.log_probability == pytest.approx(float(expected), abs=ATOL)
    before = torch.log_softmax(plain_logits(model, prepared)[0, target.position], -1)
    assert result.before.log_probability == pytest.approx(float(before[target.token_id]),
                                                          abs=ATOL)
    assert abs(result.after.log_probability - result.before.log_probability) > 100 * ATOL
    assert result.before.candidates[0].probability >= result.before.probability


def test_mean_ablation_puts_the_heads_mean_output_at_every_position(tiny_llama):
    prepared = llama_input()
    base = ablation.plain_run(tiny_llama, prepared)
    mean = ablation.mean_head_outputs(base)  # (L, H, Dh)
    edit = Intervention(head_scale=ablation.ablation_scale(3, 4, [(2, 1)]),
                        head_replacement=mean)
    run = ablation.plain_run(tiny_llama, prepared, edit)
    context = run.layers[2].context[0]  # (T, H, Dh)
    np.testing.assert_allclose(context[:, 1].numpy(), mean[2, 1].expand(9, -1).numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(context[:, 0].numpy(), base.layers[2].context[0, :, 0].numpy(),
                               atol=1e-5)  # the other heads of the layer are untouched


def test_batched_importance_grid_equals_one_ablation_at_a_time(tiny_llama):
    prepared = llama_input()
    target = targets.next_token_target(prepared, Ids(), 11)
    calls = []
    grid = ablation.importance_grid(tiny_llama, prepared, target, batch_size=5,
                                    progress=lambda done, total: calls.append((done, total)))
    assert grid.shape == (3, 4)
    assert calls == [(5, 12), (10, 12), (12, 12)]
    for layer in range(3):
        for head in range(4):
            single = ablation.ablate_heads(tiny_llama, prepared, Ids(), target, [(layer, head)])
            change = single.after.log_probability - single.before.log_probability
            assert float(grid[layer, head]) == pytest.approx(change, abs=ATOL)
    mean_grid = ablation.importance_grid(tiny_llama, prepared, target, ablation.MEAN,
                                         batch_size=12)
    single = ablation.ablate_heads(tiny_llama, prepared, Ids(), target, [(2, 3)], ablation.MEAN)
    assert float(mean_grid[2, 3]) == pytest.approx(
        single.after.log_probability - single.before.log_probability, abs=ATOL)
    table = most_important(grid.numpy(), 3)
    assert abs(table.iloc[0, 2]) == pytest.approx(float(grid.abs().max()))
    figure = importance_map(grid.numpy(), "t11")
    assert figure.data[0].zmid == 0.0 and np.asarray(figure.data[0].z).shape == (3, 4)


def test_knockout_of_no_edges_equals_the_plain_run_and_blocked_edges_get_no_weight(tiny_gpt2,
                                                                                   gpt2_tokenizer):
    prepared = targets.prepare(tiny_gpt2, gpt2_tokenizer, 64, LONGER, True, "tiny gpt2")
    count = prepared.num_tokens
    plain = ablation.plain_run(tiny_gpt2, prepared)
    nothing = ablation.plain_run(tiny_gpt2, prepared, Intervention(
        blocked=torch.zeros(2, count, count, dtype=torch.bool)))
    torch.testing.assert_close(nothing.logits, plain.logits, rtol=0, atol=0)
    target = targets.target_from_text(prepared, gpt2_tokenizer, "mat")
    query, keys = count - 1, [1, 2, 3]
    result = ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, query, keys, [1])
    after = result.after.record.weights
    assert np.all(after[1, :, query, keys] == 0.0)
    np.testing.assert_allclose(after[0], result.before.record.weights[0], atol=1e-5)
    np.testing.assert_allclose(after[1].sum(axis=-1), 1.0, atol=1e-5)
    assert result.change != 0.0
    with pytest.raises(ValueError, match="keep at least one key"):
        ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, 2, [0, 1, 2], [0])
    with pytest.raises(ValueError, match="at least one key"):
        ablation.knockout(tiny_gpt2, prepared, gpt2_tokenizer, target, 2, [], [0])


def test_models_without_a_prediction_head_say_so(default_model):
    model = install(default_model.model)  # plain eager attention outside a capture
    assert targets.prediction_kind(model, default_model.tokenizer, False) is None
    prepared = targets.prepare(model, default_model.tokenizer, 64, SENTENCE, False, "MiniLM")
    target = targets.Target(1, 100, "x")
    with pytest.raises(targets.NoPrediction, match="^MiniLM has no prediction head"):
        ablation.ablate_heads(model, prepared, default_model.tokenizer, target, [(0, 0)])
    with pytest.raises(ValueError, match="Choose at least one head"):
        ablation.ablate_heads(model, prepared, default_model.tokenizer, target, [])



def test_grid_batches_shrink_for_long_inputs(tiny_llama):
    short = ablation.plain_run(tiny_llama, llama_input())
    assert ablation.grid_batch_size(short, llama_input()) == ablation.DEFAULT_BATCH
    # A long input: 3 layers x 4 heads x 1000^2 weights x 4 bytes = 48 MB per ablation
    long_ids = torch.arange(1000)[None] % 64  # (1, T)
    encoded = EncodedText(input_ids=long_ids, attention_mask=torch.ones_like(long_ids),
                          token_type_ids=None, tokens=tuple("t" for _ in range(1000)),
                          segment_ids=(0,) * 1000, special_positions=(), dropped_tokens=0)
    prepared = targets.PreparedInput(encoded, {"input_ids": long_ids}, True, "long")
    assert ablation.grid_batch_size(short, prepared) == ablation.GRID_BUDGET_BYTES // (
        3 * 4 * 1000 * 1000 * 4 + 64 * 4)




# A fine-tuned classifier's class probability as the target

CLASSES = ("negative", "positive", "neutral")


@pytest.fixture(scope="module")
def tiny_classifiers(default_model) -> dict[str, SequenceClassifier]:
    """A tiny BERT (plain eager attention, not yet switched to the capture) and a tiny
    from-scratch encoder, each under a classification head, with random weights."""
    torch.manual_seed(3)
    config = BertConfig(vocab_size=len(default_model.tokenizer), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=INIT)
    bert = BertModel(config, add_pooling_layer=False).eval()
    bert.set_attn_implementation("eager")
    scratch = scratch_classifier(EncoderConfig(vocab_size=len(default_model.tokenizer),
                                               hidden_size=32, num_heads=4, num_layers=2,
                                               intermediate_size=64, max_positions=64), 3)
    with torch.no_grad():  # a head larger than BERT's initialiser, so classes differ visibly
        scratch.head.weight.normal_(0.0, 0.3)
    bert_classifier = SequenceClassifier(bert, 32, 3, pooling="cls", seed=4).eval()
    with torch.no_grad():
        bert_classifier.head.weight.normal_(0.0, 0.3)
    return {"bert": bert_classifier, "scratch": scratch}


def classifier_input(classifier, tokenizer) -> targets.PreparedInput:
    return targets.prepare(classifier, tokenizer, 64, SENTENCE, False, "tiny classifier")


def class_log_probabilities(classifier, prepared) -> torch.Tensor:
    with torch.inference_mode():
        inputs = prepared.inputs
        logits = classifier(inputs["input_ids"], inputs["attention_mask"],
                            inputs.get("token_type_ids"))  # (1, C)
    return torch.log_softmax(logits[0], dim=-1)


def without_head_outputs(classifier, heads, head_width: int = 8):
    """A copy of the classifier with each head's columns of its layer's W_O set to 0 by hand."""
    edited = copy.deepcopy(classifier)
    with torch.no_grad():
        for layer, head in heads:
            columns = slice(head * head_width, (head + 1) * head_width)
            if isinstance(edited.encoder, BertModel):
                edited.encoder.encoder.layer[layer].attention.output.dense.weight[:, columns] = 0
            else:
                edited.encoder.layers[layer].attention.output.weight[:, columns] = 0
    return edited


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_ablation_equals_zeroing_the_heads_output_weights_by_hand(
        name, tiny_classifiers, default_model):
    classifier = tiny_classifiers[name]
    labels = targets.ClassLabels(CLASSES)
    assert targets.prediction_kind(classifier, labels, False) == targets.CLASS_PROBABILITY
    prepared = classifier_input(classifier, default_model.tokenizer)
    heads = [(1, 2), (0, 3)]
    plain = class_log_probabilities(classifier, prepared)
    for index, class_name in enumerate(CLASSES):
        target = targets.class_target(labels, index)
        result = ablation.ablate_heads(classifier, prepared, labels, target, heads)
        expected = class_log_probabilities(without_head_outputs(classifier, heads), prepared)
        assert result.before.log_probability == pytest.approx(float(plain[index]), abs=ATOL)
        assert result.after.log_probability == pytest.approx(float(expected[index]), abs=ATOL)
        assert result.after.target.text == class_name
        assert abs(result.after.log_probability - result.before.log_probability) > 100 * ATOL
        assert {c.text for c in result.before.candidates} == set(CLASSES)
        assert result.before.candidates[0].probability == pytest.approx(
            float(plain.exp().max()), abs=ATOL)
        assert result.after.record.weights.shape == (2, 4, prepared.num_tokens,
                                                     prepared.num_tokens)
    if name == "bert":  # the capture was switched on for the encoder the test left on eager
        assert classifier.encoder.config._attn_implementation == ATTENTION_NAME
    predicted = ablation.predict(classifier, prepared, labels)
    assert predicted.target.token_id == int(plain.argmax())


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_grid_batched_equals_one_at_a_time(name, tiny_classifiers, default_model):
    classifier = tiny_classifiers[name]
    labels = targets.ClassLabels(CLASSES)
    prepared = classifier_input(classifier, default_model.tokenizer)
    target = targets.class_target(labels, 1)
    for mode in ablation.ABLATION_MODES:
        grid = ablation.importance_grid(classifier, prepared, target, mode, batch_size=3)
        assert grid.shape == (2, 4)
        for layer in range(2):
            for head in range(4):
                single = ablation.ablate_heads(classifier, prepared, labels, target,
                                               [(layer, head)], mode)
                assert float(grid[layer, head]) == pytest.approx(
                    single.after.log_probability - single.before.log_probability, abs=ATOL)
    whole = ablation.importance_grid(classifier, prepared, target)  # default batch: all at once
    torch.testing.assert_close(whole, ablation.importance_grid(classifier, prepared, target,
                                                               batch_size=1), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", ["bert", "scratch"])
def test_classifier_knockout_of_no_edges_equals_the_plain_run(name, tiny_classifiers,
                                                              default_model):
    classifier = tiny_classifiers[name]
    labels = targets.ClassLabels(CLASSES)
    prepared = classifier_input(classifier, default_model.tokenizer)
    count = prepared.num_tokens
    plain = ablation.plain_run(classifier, prepared)
    nothing = ablation.plain_run(classifier, prepared, Intervention(
        blocked=torch.zeros(2, count, count, dtype=torch.bool)))
    torch.testing.assert_close(nothing.logits, plain.logits, rtol=0, atol=0)
    torch.testing.assert_close(plain.logits[0, 0].log_softmax(-1),
                               class_log_probabilities(classifier, prepared), rtol=0, atol=ATOL)
    target = targets.class_target(labels, 0)
    result = ablation.knockout(classifier, prepared, labels, target, 0, [1, 2, 3], [0, 1])
    assert result.before.log_probability == pytest.approx(
        float(class_log_probabilities(classifier, prepared)[0]), abs=ATOL)
    assert np.all(result.after.record.weights[:, :, 0, [1, 2, 3]] == 0.0)
    assert result.change != 0.0
    with pytest.raises(ValueError, match="not one of the classifier's 3"):
        targets.class_target(labels, 3)

"""The layer walk: every step's shape is the model's own, and its last step is the layer's output."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import DistilBertConfig, DistilBertModel
from transformers.models.bert import modeling_bert

from models.hooks import attention, points
from models.hooks.run import Run, run_model
from models.scratch import attention as scratch_attention
from models.scratch.build import random_encoder
from models.teaching.layer_walk import (WalkUnavailable, batch_texts, encode_batch,
                                       scratch_walk_config, walk_layer)

TEXT = "Time flies like an arrow."  # 8 tokens with [CLS] and [SEP]
OTHERS = ("The soup was cold and bland.", "What a lovely afternoon in the park!",
          "I would not recommend this phone to anyone.")
POST_NORM_KEYS = ("tokens", "positions", "segments", "embedding_sum", "embeddings", "layer_input",
                  "query", "key", "value", "query_heads", "key_heads", "value_heads", "scores",
                  "mask", "weights", "head_outputs", "concatenated", "attention_output",
                  "residual_1", "attention_norm", "expanded", "activated", "contracted",
                  "residual_2", "feed_forward_norm")
PRE_NORM_KEYS = ("tokens", "positions", "segments", "embedding_sum", "embeddings", "layer_input",
                 "attention_norm", "query", "key", "value", "query_heads", "key_heads",
                 "value_heads", "scores", "mask", "weights", "head_outputs", "concatenated",
                 "attention_output", "residual_1", "feed_forward_norm", "expanded", "activated",
                 "contracted", "residual_2")


def hooked_steps_match(walk) -> None:
    """Every step the model keeps a tensor for has that tensor's shape and (almost) its values."""
    compared = [step for step in walk.steps if step.model_shape is not None]
    assert len(compared) >= 15
    for step in compared:
        assert step.shape == step.model_shape, step.key
        scale = max(1.0, float(np.abs(step.value).max()))  # float32 rounding grows with size
        # the walk's own arithmetic against the model's kernels: float32 across code paths
        assert step.difference is not None and step.difference <= 1e-5 * scale, (step.key,
                                                                                step.difference)


@pytest.fixture(scope="module")
def captured_attention(monkeypatch_module):
    """Wrap BERT's eager attention so the test sees the per-head q, k, v, weights and outputs.
    A run's attention is otherwise lean_eager (models/hooks/attention.py, the same numbers bit for
    bit: tests/hooks/test_lean_attention.py); here the model's own function runs, spied on."""
    seen = []
    monkeypatch_module.setattr(attention, "LEAN_FAMILIES", frozenset())
    original = modeling_bert.eager_attention_forward

    def spy(module, query, key, value, attention_mask, **kwargs):
        output, weights = original(module, query, key, value, attention_mask, **kwargs)
        seen.append(dict(query=query.clone(), key=key.clone(), value=value.clone(),
                         weights=weights.clone(), output=output.clone()))
        return output, weights

    monkeypatch_module.setattr(modeling_bert, "eager_attention_forward", spy)
    return seen


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


@pytest.mark.parametrize("texts", [(TEXT,), (TEXT, *OTHERS)], ids=["one", "padded-batch"])
@pytest.mark.parametrize("layer", [0, 3])
def test_minilm_walk_matches_every_intermediate(default_model, captured_attention, texts, layer):
    batch = encode_batch(default_model.tokenizer, texts)
    captured_attention.clear()
    walk = walk_layer(default_model.model, batch, layer, "MiniLM")
    inside = captured_attention[layer]  # the model's own per-head tensors for this layer
    assert tuple(step.key for step in walk.steps) == POST_NORM_KEYS
    hooked_steps_match(walk)
    for key, name in (("query_heads", "query"), ("key_heads", "key"), ("value_heads", "value"),
                      ("weights", "weights")):
        assert walk.step(key).shape == tuple(inside[name].shape), key
        np.testing.assert_allclose(walk.step(key).value, inside[name].numpy(), atol=1e-5)
    own_heads = inside["output"].transpose(1, 2)  # HF returns (B, Q, H, Dh); the walk keeps (B, H, Q, Dh)
    assert walk.step("head_outputs").shape == tuple(own_heads.shape)
    np.testing.assert_allclose(walk.step("head_outputs").value, own_heads.numpy(), atol=1e-5)
    batch_size, tokens = batch.shape
    assert walk.step("layer_input").shape == (batch_size, tokens, 384)
    assert walk.step("scores").shape == (batch_size, 12, tokens, tokens)
    assert walk.step("expanded").shape == (batch_size, tokens, 1536)
    assert walk.matrix("W_Q").shape == (384, 384) and walk.matrix("W_1").shape == (384, 1536)
    # The final step against the model's own hidden state (read without any hook).
    with torch.inference_mode():
        reference = default_model.model(input_ids=batch.input_ids,
                                        attention_mask=batch.attention_mask,
                                        token_type_ids=batch.token_type_ids,
                                        output_hidden_states=True).hidden_states[layer + 1]
    np.testing.assert_allclose(walk.steps[-1].value, reference.numpy(), atol=1e-5)
    assert walk.final_difference <= 1e-5
    if len(texts) > 1:  # padded keys get exactly no weight, in every row of every head
        for item, length in enumerate(batch.lengths):
            assert np.all(walk.step("weights").value[item, :, :, length:] == 0.0)
        assert min(batch.lengths) < tokens


def scratch_batch(tokenizer, batch_size: int, length: int):
    return encode_batch(tokenizer, batch_texts(TEXT, OTHERS, batch_size), length=length)


@pytest.mark.parametrize("norm_style", ["pre", "post"])
@pytest.mark.parametrize("hidden_size, num_heads, batch_size, length", [
    (64, 8, 16, 32),  # seed 004's (16, 32, 64) batch with 8 heads, padded to 32 tokens
    (96, 3, 2, 10),
    (48, 12, 1, 6),  # cut to 6 tokens: no padding
])
def test_scratch_walk_sizes_and_output(default_model, norm_style, hidden_size, num_heads,
                                       batch_size, length):
    config = scratch_walk_config(len(default_model.tokenizer), hidden_size, num_heads, 2, norm_style)
    encoder = random_encoder(config, seed=4)
    batch = scratch_batch(default_model.tokenizer, batch_size, length)
    layer = 1
    walk = walk_layer(encoder, batch, layer)
    head_size = hidden_size // num_heads
    assert walk.head_size == head_size and walk.norm_style == norm_style
    assert tuple(step.key for step in walk.steps) == (PRE_NORM_KEYS if norm_style == "pre"
                                                      else POST_NORM_KEYS)
    hooked_steps_match(walk)
    shapes = {step.key: step.shape for step in walk.steps}
    assert shapes["layer_input"] == (batch_size, length, hidden_size)
    assert shapes["positions"] == (1, length, hidden_size)
    assert shapes["query_heads"] == (batch_size, num_heads, length, head_size)
    assert shapes["scores"] == shapes["weights"] == (batch_size, num_heads, length, length)
    assert shapes["mask"] == (batch_size, 1, length, length)
    assert shapes["expanded"] == (batch_size, length, 4 * hidden_size)

    with torch.inference_mode():
        output = encoder(batch.input_ids, batch.token_type_ids, batch.attention_mask)
        block = encoder.layers[layer]
        hidden = output.hidden_states[layer]
        attention_input = block.attention_norm(hidden) if norm_style == "pre" else hidden
        query, key, value = block.attention.project(attention_input)  # the model's own split
        reference_heads = F.scaled_dot_product_attention(query, key, value, attn_mask=output.mask)
        reference_scores = query @ key.transpose(-2, -1) / math.sqrt(head_size)  # (B, H, Q, K)
    for name, tensor in (("query_heads", query), ("key_heads", key), ("value_heads", value),
                         ("scores", reference_scores), ("mask", output.mask),
                         ("head_outputs", reference_heads)):
        assert walk.step(name).shape == tuple(tensor.shape), name
        np.testing.assert_allclose(walk.step(name).value, tensor.numpy(), atol=1e-5)
    np.testing.assert_allclose(walk.step("weights").value, output.attentions[layer].numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(walk.steps[-1].value, output.hidden_states[layer + 1].numpy(),
                               atol=1e-5)
    if batch_size == 16:
        assert batch.shape == (16, 32) and min(batch.lengths) < 32  # real padding in the batch
        for item, count in enumerate(batch.lengths):
            assert np.all(walk.step("weights").value[item, :, :, count:] == 0.0)
        assert not walk.step("mask").value[0, 0, 0, batch.lengths[0]:].any()


def test_scores_over_root_head_size(default_model):
    """The scores step is QKᵀ/√d_k of the split heads (computed here by hand for one head)."""
    walk = walk_layer(default_model.model, encode_batch(default_model.tokenizer, [TEXT]), 1)
    q = walk.step("query_heads").value[0, 5]  # (T, Dh)
    k = walk.step("key_heads").value[0, 5]
    np.testing.assert_allclose(walk.step("scores").value[0, 5], q @ k.T / math.sqrt(32), atol=1e-5)
    np.testing.assert_allclose(walk.head_weights(0, 5).sum(axis=-1), 1.0, atol=1e-5)


def test_bad_requests_raise(default_model):
    batch = encode_batch(default_model.tokenizer, [TEXT])
    with pytest.raises(ValueError, match="layer must be in"):
        walk_layer(default_model.model, batch, 6)
    encoder = random_encoder(scratch_walk_config(len(default_model.tokenizer), 32, 4, 1, "pre"), 0)
    encoder.train()
    with pytest.raises(ValueError, match="eval mode"):
        walk_layer(encoder, batch, 0)
    distil = DistilBertModel(DistilBertConfig(vocab_size=64, dim=16, n_heads=2, n_layers=1,
                                              hidden_dim=32)).eval()
    with pytest.raises(WalkUnavailable, match="distilbert"):
        walk_layer(distil, batch, 0)
    with pytest.raises(ValueError, match="needs some text"):
        encode_batch(default_model.tokenizer, [" "])
    with pytest.raises(ValueError, match="other sentences"):
        batch_texts(TEXT, (), 4)


def hook_count(model: torch.nn.Module) -> int:
    return sum(len(module._forward_hooks) + len(module._forward_pre_hooks)
               for module in model.modules())


@pytest.mark.parametrize("which", ["minilm", "scratch"])
def test_the_walk_leaves_no_hook_behind(default_model, which, monkeypatch):
    """The walk is one run: nothing is attached to the shared model, before, during or after
    (counted inside the forward by a spy on each layer's attention arithmetic)."""
    if which == "minilm":
        model, module, function = default_model.model, modeling_bert, "eager_attention_forward"
    else:
        model = random_encoder(scratch_walk_config(len(default_model.tokenizer), 32, 4, 2,
                                                   "pre"), 2)
        module, function = scratch_attention, "masked_softmax"
    original = getattr(module, function)
    during = []

    def spy(*args, **kwargs):
        during.append(hook_count(model))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, function, spy)
    before = hook_count(model)
    walk_layer(model, encode_batch(default_model.tokenizer, [TEXT, OTHERS[0]]), 1)
    assert hook_count(model) == before
    assert during == [before, before]  # layers 0 and 1 ran; the walk stopped after layer 1
    if which == "scratch":
        assert before == 0  # the from-scratch encoder calls its points itself


def walk_numbers(walk) -> dict[str, np.ndarray]:
    return {step.key: step.value for step in walk.steps}


@pytest.mark.parametrize("which", ["minilm", "scratch"])
def test_a_walk_and_another_sessions_forward_at_once_each_get_their_own_numbers(default_model,
                                                                                which):
    """The server shares one model between sessions: a walk in one thread and another session's
    edited forward (a different batch, layer 1's heads zeroed) in another, started together
    many times, each give exactly what they give alone."""
    model = default_model.model if which == "minilm" else random_encoder(
        scratch_walk_config(len(default_model.tokenizer), 32, 4, 2, "post"), 1)
    batch = scratch_batch(default_model.tokenizer, 2, 12)
    other = scratch_batch(default_model.tokenizer, 3, 7)  # a different shape on purpose
    other_inputs = dict(input_ids=other.input_ids, attention_mask=other.attention_mask,
                        token_type_ids=other.token_type_ids)

    def walk():
        return walk_numbers(walk_layer(model, batch, 1))

    def other_session():
        run = Run(cache=[points.resid_post(1)],
                  edits={points.z(1): lambda value, name: torch.zeros_like(value)})
        run_model(model, other_inputs, run)
        return run[points.resid_post(1)]

    alone_walk, alone_other = walk(), other_session()
    rounds, start = 8, threading.Barrier(2)
    results = {"walk": [], "other": []}
    errors = []

    def repeat(name, job):
        try:
            for _ in range(rounds):
                start.wait()
                results[name].append(job())
        except Exception as error:  # noqa: BLE001 - the main thread reports it
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=repeat, args=("walk", walk)),
               threading.Thread(target=repeat, args=("other", other_session))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results["walk"]) == len(results["other"]) == rounds
    for numbers in results["walk"]:
        assert numbers.keys() == alone_walk.keys()
        for key, value in numbers.items():
            np.testing.assert_allclose(value, alone_walk[key], atol=1e-5, err_msg=key)
    for value in results["other"]:
        torch.testing.assert_close(value, alone_other, atol=1e-5, rtol=0)
    with torch.inference_mode():  # the edit was real: the plain forward differs
        plain = Run(cache=[points.resid_post(1)])
        run_model(model, other_inputs, plain)
    assert (plain[points.resid_post(1)] - alone_other).abs().max() > 1e-3

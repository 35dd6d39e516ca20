"""The single-head importance grid reuses the plain run's layers below each batch: its cells are
the plain per-head forward (each head zeroed by a hand-written torch hook on the output
projection's input, no hook engine involved), on a tiny Llama and on the real SmolLM2, and the
layers it runs are only those from each batch's first head's layer on."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from models.experiments import ablation, targets
from models.hooks.install import install
from models.loading.tokenize import EncodedText

ATOL = 1e-5
SENTENCE = ("When Mary and John went to the store, John gave a drink to Mary because she was "
            "thirsty after the long walk home from the old market by the river in the town")


@pytest.fixture(scope="module")
def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(7)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, initializer_range=0.2)
    return install(LlamaForCausalLM(config).eval())


def tiny_input() -> targets.PreparedInput:
    ids = torch.tensor([[5, 17, 33, 8, 41, 17, 33, 2, 60]])  # (1, T)
    encoded = EncodedText(
        input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=None,
        tokens=tuple(f"t{i}" for i in ids[0].tolist()), segment_ids=(0,) * ids.size(1),
        special_positions=(), dropped_tokens=0)
    return targets.PreparedInput(encoded, {"input_ids": ids,
                                            "attention_mask": encoded.attention_mask},
                                  True, "tiny llama")


def zeroed_head_log_probability(model, inputs: dict, layer: int, head: int,
                                target: targets.Target) -> float:
    """The target's log-probability with head `head` of layer `layer` zeroed by hand: its slice
    of the output projection's input (B, T, H * Dh) set to 0, in a plain forward."""
    attention = model.model.layers[layer].self_attn
    width = attention.head_dim

    def zero(module, args):
        context = args[0].clone()  # (B, T, H * Dh)
        context[..., head * width:(head + 1) * width] = 0.0
        return (context,)

    handle = attention.o_proj.register_forward_pre_hook(zero)
    try:
        with torch.inference_mode():
            logits = model(**inputs, use_cache=False).logits  # (1, T, V)
    finally:
        handle.remove()
    return float(torch.log_softmax(logits[0, target.position].float(), -1)[target.token_id])


def plain_log_probability(model, inputs: dict, target: targets.Target) -> float:
    with torch.inference_mode():
        logits = model(**inputs, use_cache=False).logits
    return float(torch.log_softmax(logits[0, target.position].float(), -1)[target.token_id])


def test_each_cell_is_the_plain_forward_with_that_head_zeroed_and_lower_layers_are_not_rerun(
        tiny_llama):
    prepared = tiny_input()
    target = targets.Target(prepared.num_tokens - 1, 11, "t11")
    items_per_layer = [0, 0, 0]

    def counter(layer: int):
        def count(module, args, kwargs, output):
            items_per_layer[layer] += kwargs["hidden_states"].size(0) if "hidden_states" in \
                kwargs else args[0].size(0)
        return count

    handles = [tiny_llama.model.layers[layer].self_attn.register_forward_hook(
        counter(layer), with_kwargs=True) for layer in range(3)]
    try:
        grid = ablation.importance_grid(tiny_llama, prepared, target, batch_size=5)
    finally:
        for handle in handles:
            handle.remove()
    # The plain run (one item, every layer), then batches of heads 0-4 (from layer 0), 5-9
    # (from layer 1: head 5 is layer 1's head 1) and 10-11 (from layer 2).
    assert items_per_layer == [1 + 5, 1 + 5 + 5, 1 + 5 + 5 + 2]
    plain = plain_log_probability(tiny_llama, prepared.inputs, target)
    for layer in range(3):
        for head in range(4):
            zeroed = zeroed_head_log_probability(tiny_llama, prepared.inputs, layer, head, target)
            assert float(grid[layer, head]) == pytest.approx(zeroed - plain, abs=ATOL)
    assert float(grid.abs().max()) > 1e-3  # the heads matter: the comparison could fail


def test_smollm2s_grid_is_the_plain_per_head_forward(smollm2_model):
    model, tokenizer = smollm2_model.model, smollm2_model.tokenizer
    prepared = targets.prepare(model, tokenizer, 12, SENTENCE, True, "SmolLM2")
    assert prepared.num_tokens == 12
    target = ablation.predict(model, prepared, tokenizer, keep_record=False).target
    grid = ablation.importance_grid(model, prepared, target)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    assert grid.shape == (layers, heads) and bool(torch.isfinite(grid).all())
    plain = plain_log_probability(model, prepared.inputs, target)
    assert math.isclose(plain, math.log(ablation.predict(model, prepared, tokenizer, target,
                                                         False).probability), abs_tol=ATOL)
    for layer, head in ((0, 0), (1, 8), (13, 4), (14, 0), (29, 8)):  # batch edges and middles
        zeroed = zeroed_head_log_probability(model, prepared.inputs, layer, head, target)
        assert float(grid[layer, head]) == pytest.approx(zeroed - plain, abs=ATOL), (layer, head)

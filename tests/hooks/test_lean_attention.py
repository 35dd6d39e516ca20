"""`lean_eager` (models/hooks/attention.py) against the families' own eager attention: the same
numbers bit for bit, for grouped and plain heads and every kind of mask, on random inputs; where
in place cannot give the same it is the family's own function (gradients flow). The app's runs of
the embedded models against their plain forwards, bit for bit, are in test_source_trace.py."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, LlamaConfig
from transformers.models.bert import modeling_bert
from transformers.models.llama import modeling_llama

from models.hooks.attention import LEAN_FAMILIES, lean_eager

MIN = torch.finfo(torch.float32).min


def llama_module() -> torch.nn.Module:
    config = LlamaConfig(hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                         intermediate_size=32, num_hidden_layers=1, vocab_size=10)
    return modeling_llama.LlamaAttention(config, layer_idx=0).eval()


def bert_module() -> torch.nn.Module:
    config = BertConfig(hidden_size=96, num_attention_heads=6, intermediate_size=32,
                        num_hidden_layers=1, vocab_size=10)
    return modeling_bert.BertSelfAttention(config).eval()


def masks(batch: int, queries: int, keys: int) -> dict[str, torch.Tensor | None]:
    causal = torch.full((queries, keys), MIN).triu(1 + keys - queries)[None, None]
    padding = torch.zeros(batch, 1, 1, keys)
    padding[-1, ..., keys - 3:] = MIN  # the last input's last three keys are padding
    return {"none": None, "causal": causal.expand(batch, 1, queries, keys),
            "padding": padding, "causal_and_padding": causal + padding}


def inputs(module, batch: int, queries: int, keys: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    heads, width = 6, 16
    kv_heads = getattr(module, "num_key_value_groups", None)
    kv_heads = heads // kv_heads if kv_heads else heads
    return (torch.randn(batch, heads, queries, width, generator=generator) * 3,
            torch.randn(batch, kv_heads, keys, width, generator=generator),
            torch.randn(batch, kv_heads, keys, width, generator=generator))


@pytest.mark.parametrize("family", ["llama", "bert"])
@pytest.mark.parametrize("mask", ["none", "causal", "padding", "causal_and_padding"])
def test_lean_attention_is_the_familys_eager_bit_for_bit(family, mask, monkeypatch):
    module = llama_module() if family == "llama" else bert_module()
    assert type(module).__module__ in LEAN_FAMILIES
    family_module = modeling_llama if family == "llama" else modeling_bert
    eager = family_module.eager_attention_forward

    def not_called(*args, **kwargs):
        raise AssertionError("lean_eager fell back to the family's function")
    for seed, (batch, queries, keys) in enumerate([(2, 37, 37), (1, 130, 130), (2, 5, 41)]):
        query, key, value = inputs(module, batch, queries, keys, seed)
        additive = masks(batch, queries, keys)[mask]
        with torch.inference_mode():
            expected = eager(module, query, key, value, additive, scaling=0.25, dropout=0.0)
            monkeypatch.setattr(family_module, "eager_attention_forward", not_called)
            lean = lean_eager(module, query, key, value, additive, scaling=0.25, dropout=0.0)
            monkeypatch.undo()
        for got, want in zip(lean, expected):
            assert got.shape == want.shape and torch.equal(got, want), (family, mask, seed)


def test_where_in_place_cannot_serve_the_familys_own_runs_and_gradients_flow():
    module = llama_module()
    query, key, value = inputs(module, 1, 9, 9, 0)
    query.requires_grad_(True)
    mask = masks(1, 9, 9)["causal"]
    context, weights = lean_eager(module, query, key, value, mask, scaling=0.25)
    expected = modeling_llama.eager_attention_forward(module, query, key, value, mask,
                                                      scaling=0.25)
    assert torch.equal(context, expected[0]) and torch.equal(weights, expected[1])
    context.sum().backward()
    assert query.grad is not None and query.grad.abs().sum() > 0
    wider = masks(2, 9, 9)["padding"]  # a mask of two inputs widens one input's scores
    with torch.inference_mode():
        got = lean_eager(module, query.detach(), key, value, wider, scaling=0.25)
        want = modeling_llama.eager_attention_forward(module, query.detach(), key, value, wider,
                                                      scaling=0.25)
    assert got[1].shape == (2, 6, 9, 9) and torch.equal(got[1], want[1])
    half = [tensor.detach().to(torch.bfloat16) for tensor in (query, key, value)]
    with torch.inference_mode():
        got = lean_eager(module, *half, mask.to(torch.bfloat16), scaling=0.25)
        want = modeling_llama.eager_attention_forward(module, *half, mask.to(torch.bfloat16),
                                                      scaling=0.25)
    assert got[1].dtype == want[1].dtype and torch.equal(got[1], want[1])

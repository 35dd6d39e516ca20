"""Direct logit attribution (models/experiments/logit_attribution.py): the shares add up to the
model's own logit difference, and each head's and MLP's share is what a hand-written reading of
a plain forward gives (torch hooks on the output projection, the MLP and the final norm, the
norm's formula written out); a post-norm model is refused in one sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.experiments import logit_attribution, targets
from models.experiments.contrast import logit_difference, prompt
from tests.interventions.conftest import GPT2_CLEAN, IOI_CLEAN
from tests.interventions.support import one_sentence

CASES = [("decoder_runner", IOI_CLEAN, "Mary", "John"), ("tiny_gpt2", GPT2_CLEAN, "rug", "mat"),
         ("biased_gpt2", GPT2_CLEAN, "rug", "mat")]


@pytest.mark.parametrize("name, text, answer, wrong", CASES, ids=[c[0] for c in CASES])
def test_the_shares_add_up_to_the_models_logit_difference(request, name, text, answer, wrong):
    loaded = request.getfixturevalue(name)
    shares = logit_attribution.logit_attribution(loaded, text, answer, wrong)
    given = prompt(loaded, text)
    difference = logit_difference(loaded, given, answer, wrong)
    with torch.inference_mode():
        logits = loaded.model(**given.batched(loaded.model, 1)).logits[0, -1].double()
    own = float(logits[difference.answer] - logits[difference.wrong])
    assert shares.logit_difference == pytest.approx(own, abs=1e-5 * max(1.0, abs(own)))
    # float32 parts summed on another path than the model's own logits: float32's ~1e-5 of
    # the logits' scale, as above (an absolute 1e-7 is tighter than float32 keeps there)
    assert shares.total == pytest.approx(own, rel=1e-4, abs=1e-5 * max(1.0, abs(own)))
    parts = shares.parts()
    assert len(parts) == shares.heads.size + shares.mlps.size + 2
    assert sum(value for _, value in parts) == pytest.approx(shares.total, rel=1e-12)
    largest = shares.largest(3)
    assert [abs(value) for _, value in largest] == sorted(
        (abs(value) for _, value in parts), reverse=True)[:3]


def _captured(model, modules: dict[str, torch.nn.Module], given) -> dict[str, torch.Tensor]:
    """Each module's first input (name ending in "in") or output, from one plain forward."""
    seen, handles = {}, []
    for name, module in modules.items():
        if name.endswith("in"):
            handles.append(module.register_forward_pre_hook(
                lambda _, args, name=name: seen.__setitem__(name, args[0].detach().clone())))
        else:
            handles.append(module.register_forward_hook(
                lambda _, args, out, name=name: seen.__setitem__(name, out.detach().clone())))
    try:
        with torch.inference_mode():
            model(**given.batched(model, 1))
    finally:
        for handle in handles:
            handle.remove()
    return seen


@torch.no_grad()  # the hand-written reading differentiates nothing
def test_each_share_of_the_decoder_is_read_by_hand(decoder_runner):
    """Llama: RMSNorm x / sqrt(mean(x²) + eps) * g, no biases; head h writes W_O[:, h] z_h."""
    model = decoder_runner.model
    shares = logit_attribution.logit_attribution(decoder_runner, IOI_CLEAN, "Mary", "John")
    given = prompt(decoder_runner, IOI_CLEAN)
    layers = model.model.layers
    modules = {"norm in": model.model.norm, "embed": model.model.embed_tokens}
    for index, layer in enumerate(layers):
        modules[f"o{index} in"] = layer.self_attn.o_proj
        modules[f"mlp{index}"] = layer.mlp
    seen = _captured(model, modules, given)
    last = given.num_tokens - 1
    stream = seen["norm in"][0, last].double()  # (D,)
    norm = model.model.norm
    scale = torch.sqrt((stream ** 2).mean() + norm.variance_epsilon)
    unembed = model.lm_head.weight.double()
    ids = shares.difference
    read = norm.weight.double() * (unembed[ids.answer] - unembed[ids.wrong]) / scale  # (D,)
    heads = model.config.num_attention_heads
    for index, layer in enumerate(layers):
        z = seen[f"o{index} in"][0, last].double().view(heads, -1)  # (H, Dh)
        weight = layer.self_attn.o_proj.weight.double()  # (D, H*Dh)
        for head in range(heads):
            columns = slice(head * z.size(1), (head + 1) * z.size(1))
            expected = float(weight[:, columns] @ z[head] @ read)
            assert shares.heads[index, head] == pytest.approx(expected, abs=1e-5)
        assert shares.mlps[index] == pytest.approx(float(seen[f"mlp{index}"][0, last].double()
                                                         @ read), abs=1e-5)
    assert shares.embeddings == pytest.approx(float(seen["embed"][0, last].double() @ read),
                                              abs=1e-5)
    assert shares.biases == 0.0 and shares.scale == pytest.approx(float(scale), rel=1e-6)
    assert np.abs(shares.heads).max() > 1.0  # a real model: some heads write the answer


@torch.no_grad()
def test_a_layernorm_model_centres_each_share_and_counts_its_biases(biased_gpt2):
    """GPT-2: LayerNorm (x - mean) / sqrt(var + eps) * g + beta; c_proj has a bias."""
    model = biased_gpt2.model
    shares = logit_attribution.logit_attribution(biased_gpt2, GPT2_CLEAN, "rug", "mat")
    given = prompt(biased_gpt2, GPT2_CLEAN)
    blocks = model.transformer.h
    modules = {"ln_f in": model.transformer.ln_f}
    for index, block in enumerate(blocks):
        modules[f"c_proj{index} in"] = block.attn.c_proj
        modules[f"mlp{index}"] = block.mlp
    seen = _captured(model, modules, given)
    last = given.num_tokens - 1
    stream = seen["ln_f in"][0, last]
    ln_f = model.transformer.ln_f
    scale = torch.sqrt(stream.var(unbiased=False) + ln_f.eps)
    direction = model.lm_head.weight[shares.difference.answer] - \
        model.lm_head.weight[shares.difference.wrong]
    read = ln_f.weight * direction / scale

    def share(vector: torch.Tensor) -> float:
        return float((vector - vector.mean()) @ read)

    heads = model.config.n_head
    biases = float(ln_f.bias @ direction)
    for index, block in enumerate(blocks):
        z = seen[f"c_proj{index} in"][0, last].view(heads, -1)  # (H, Dh)
        weight = block.attn.c_proj.weight  # Conv1D: (H*Dh, D)
        for head in range(heads):
            rows = slice(head * z.size(1), (head + 1) * z.size(1))
            assert shares.heads[index, head] == pytest.approx(share(z[head] @ weight[rows]),
                                                              abs=1e-12)
        assert shares.mlps[index] == pytest.approx(share(seen[f"mlp{index}"][0, last]),
                                                   abs=1e-12)
        biases += share(block.attn.c_proj.bias)
    assert shares.biases == pytest.approx(biases, abs=1e-12)
    assert abs(biases) > 1e-3


def test_what_direct_attribution_refuses_is_one_sentence(tiny_bert, encoder_runner,
                                                         decoder_runner):
    with pytest.raises(logit_attribution.NotDecomposable) as raised:
        logit_attribution.logit_attribution(tiny_bert, "the cat sat like a [MASK] .", "cat",
                                            "banana")
    assert "post-norm" in str(raised.value) and one_sentence(str(raised.value))
    with pytest.raises(targets.NoPrediction):
        logit_attribution.logit_attribution(encoder_runner, "Time flies.", "time", "flies")
    with pytest.raises(ValueError) as raised:
        logit_attribution.logit_attribution(decoder_runner, IOI_CLEAN, "Mary", "Mary")
    assert one_sentence(str(raised.value))


def test_a_final_norm_that_is_not_what_it_says_is_refused(double_gpt2, monkeypatch):
    """A norm whose output is not LayerNorm's formula (here: its weight seen doubled)."""
    ln_f = double_gpt2.model.transformer.ln_f
    monkeypatch.setattr(logit_attribution, "_final_norm", lambda loaded, module: (
        logit_attribution._FinalNorm(2 * module.weight.detach(), module.bias.detach(), True,
                                     module.eps)))
    with pytest.raises(logit_attribution.NotDecomposable) as raised:
        logit_attribution.logit_attribution(double_gpt2, GPT2_CLEAN, "rug", "mat")
    assert "final norm" in str(raised.value) and one_sentence(str(raised.value))
    assert ln_f.weight.abs().max() > 0

"""Attribution patching (models/experiments/attribution.py): each estimate is the directional
derivative of the logit difference along (clean - corrupted), checked against a central finite
difference in float64 taken with hand-written torch hooks on the model (no hook engine); it is
exact patching where the metric is linear in the activation; it costs one clean forward, one
corrupted forward and one backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.experiments import attribution, patching, patching_cost
from models.experiments.attribution import agreement
from tests.interventions.support import experiment, one_sentence

STEP = 1e-6  # float64: the central difference's error grows as STEP²


def _plain_metric(found, inputs, hooks=()) -> float:
    """The logit difference of a plain forward of the model, with torch pre-hooks on modules
    (each called as hook(module, args, kwargs))."""
    handles = [module.register_forward_pre_hook(hook, with_kwargs=True) for module, hook in hooks]
    try:
        with torch.inference_mode():
            logits = found.loaded.model(**inputs).logits  # (1, T, V)
    finally:
        for handle in handles:
            handle.remove()
    row = logits[0, found.difference.position]
    return float(row[found.difference.answer] - row[found.difference.wrong])


def _inputs(found, prompt) -> dict:
    return {**prompt.inputs, "use_cache": False}


def _layer_inputs(found, prompt) -> tuple[torch.Tensor, ...]:
    """Every block's input from transformers' own hidden states (GPT-2: hidden_states[l] is
    what block l reads)."""
    with torch.inference_mode():
        output = found.loaded.model(**_inputs(found, prompt), output_hidden_states=True)
    return output.hidden_states


def _heads_input(found, prompt, layer: int) -> torch.Tensor:
    """(1, T, H*Dh) what the output projection of `layer` reads: the heads side by side."""
    seen = []
    module = found.loaded.model.transformer.h[layer].attn.c_proj
    handle = module.register_forward_pre_hook(lambda _, args: seen.append(args[0].clone()))
    try:
        with torch.inference_mode():
            found.loaded.model(**_inputs(found, prompt))
    finally:
        handle.remove()
    return seen[0]


def _central_difference(found, module, change: torch.Tensor) -> float:
    """d metric along `change` (added to the module's first input) at the corrupted run."""
    inputs = _inputs(found, found.pair.corrupted)

    def moved(by: float) -> float:
        def shift(_, args, kwargs):
            if args:
                return (args[0] + by * change, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": kwargs["hidden_states"] + by * change}
        return _plain_metric(found, inputs, [(module, shift)])
    return (moved(STEP) - moved(-STEP)) / (2 * STEP)


def test_each_residual_estimate_is_the_directional_derivative_by_finite_difference(request):
    found = experiment(request, "double_gpt2")
    grids = attribution.attribution_patching(found.loaded, found.pair, found.difference)
    estimated = grids.raw(patching.RESID_PRE) - grids.corrupted_metric  # (L, T)
    clean = _layer_inputs(found, found.pair.clean)
    corrupted = _layer_inputs(found, found.pair.corrupted)
    blocks = found.loaded.model.transformer.h
    checked = 0
    for layer in range(len(blocks)):
        for position in range(found.pair.num_tokens):
            change = torch.zeros_like(corrupted[layer])
            change[0, position] = clean[layer][0, position] - corrupted[layer][0, position]
            finite = _central_difference(found, blocks[layer], change)
            assert estimated[layer, position] == pytest.approx(finite, abs=1e-7 * max(
                1.0, abs(finite))), (layer, position)
            checked += abs(finite) > 1e-6
    assert checked >= 10  # most cells move the metric: the check is not of zeros


def test_each_head_estimate_is_the_directional_derivative_by_finite_difference(request):
    found = experiment(request, "double_gpt2")
    grids = attribution.attribution_patching(found.loaded, found.pair, found.difference)
    heads_estimated = grids.raw(patching.HEAD) - grids.corrupted_metric  # (L, H)
    positions_estimated = grids.raw(patching.HEAD_POSITION, 1) - grids.corrupted_metric  # (H, T)
    blocks = found.loaded.model.transformer.h
    heads = heads_estimated.shape[1]
    for layer in range(len(blocks)):
        clean = _heads_input(found, found.pair.clean, layer)
        corrupted = _heads_input(found, found.pair.corrupted, layer)
        width = clean.size(-1) // heads
        for head in range(heads):
            columns = slice(head * width, (head + 1) * width)
            change = torch.zeros_like(corrupted)
            change[..., columns] = clean[..., columns] - corrupted[..., columns]
            finite = _central_difference(found, blocks[layer].attn.c_proj, change)
            assert heads_estimated[layer, head] == pytest.approx(finite, abs=1e-7 * max(
                1.0, abs(finite)))
            if layer == 1:
                assert positions_estimated[head].sum() == pytest.approx(
                    heads_estimated[layer, head], abs=1e-9)
    assert np.abs(heads_estimated).max() > 1e-4


def test_where_the_metric_is_linear_the_estimate_is_exact_patching(request):
    """Without a final norm, the logits are linear in the last layer's MLP output: patching it
    and its first-order estimate are the same number."""
    found = experiment(request, "linear_gpt2")
    grids = attribution.attribution_patching(found.loaded, found.pair, found.difference)
    exact = patching.patching_grid(found.loaded, found.pair, found.difference, patching.MLP_OUT)
    last = exact.raw.shape[0] - 1
    np.testing.assert_allclose(grids.raw(patching.MLP_OUT)[last], exact.raw[last], rtol=0,
                               atol=1e-10)
    assert np.abs(exact.raw[last] - exact.corrupted_metric).max() > 1e-4
    assert np.abs(grids.raw(patching.MLP_OUT)[0] - exact.raw[0]).max() > 1e-8  # not elsewhere


def test_every_estimate_takes_one_clean_forward_one_corrupted_forward_and_one_backward(
        request, monkeypatch):
    found = experiment(request, "decoder_runner")
    forwards, backwards = [], []
    run_model, grad = patching.run_model, torch.autograd.grad
    monkeypatch.setattr(patching, "run_model", lambda *a, **k: forwards.append(1) or
                        run_model(*a, **k))
    monkeypatch.setattr(attribution, "run_model", lambda *a, **k: forwards.append(1) or
                        run_model(*a, **k))
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: backwards.append(1) or
                        grad(*a, **k))
    grids = attribution.attribution_patching(found.loaded, found.pair, found.difference)
    assert (len(forwards), len(backwards)) == (2, 1)
    assert grids.resid_pre.shape == grids.attn_out.shape == grids.mlp_out.shape == (30, 14)
    assert grids.heads.shape == (30, 9) and grids.head_positions.shape == (30, 9, 14)
    exact = patching.baseline(found.loaded, found.pair, found.difference)
    assert grids.clean_metric == exact.clean_metric
    assert grids.corrupted_metric == pytest.approx(exact.corrupted_metric, abs=1e-5)


def test_agreement_is_the_correlation_and_the_largest_gaps():
    exact = np.array([[0.0, 1.0, 0.5], [0.2, 0.9, 0.1]])
    estimate = np.array([[0.1, 0.2, 0.5], [0.2, 1.0, 0.4]])
    found = agreement(exact, estimate, 2)
    assert found.correlation == pytest.approx(np.corrcoef(exact.ravel(), estimate.ravel())[0, 1])
    assert [cell for cell, _, _ in found.disagreements] == [(0, 1), (1, 2)]
    assert found.disagreements[0][1:] == (1.0, 0.2)
    assert np.isnan(agreement(np.ones((2, 2)), estimate[:, :2], 1).correlation)


def test_an_attribution_too_large_for_its_budget_is_refused_with_its_size(request, monkeypatch):
    found = experiment(request, "tiny_gpt2")
    need = attribution.attribution_bytes(found.loaded, found.pair.num_tokens)
    monkeypatch.setattr(attribution, "ATTRIBUTION_BYTES", need - 1)
    with pytest.raises(patching_cost.PatchingTooLarge) as raised:
        attribution.attribution_patching(found.loaded, found.pair, found.difference)
    assert one_sentence(str(raised.value))
    assert f"about {need / 2**20:.0f} MB for its backward pass" in str(raised.value)

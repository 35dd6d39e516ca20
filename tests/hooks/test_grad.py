"""Runs with gradients (`Run(grad=True)`): the cached points stay in the autograd graph, so a
metric of the output can be differentiated with respect to them (what attribution patching
builds on). The reference feeds the same value in by hand, as a leaf tensor, through a
forward pre-hook on the reference's layer; a finite difference along a direction checks the
gradient without autograd's help."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from models.hooks import points
from models.hooks.install import install
from models.hooks.run import Run, run_model

LAYER = 1


def metric(case, output) -> torch.Tensor:
    """A logit difference at the last position, or one direction of a hidden state."""
    if case.has_logits:
        logits = output.logits  # (B, T, V)
        return logits[0, -1, 3] - logits[0, -1, 4]
    hidden = output.last_hidden_state  # (B, T, D)
    weights = torch.linspace(-1.0, 1.0, hidden.size(-1))
    return (hidden[0, 0] * weights).sum()


def _hidden(args, kwargs) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _with_hidden(args, kwargs, value):
    return ((value, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": value})


def by_hand(case, stack: str, value: torch.Tensor) -> torch.Tensor:
    """d metric / d (layer's input), with the input fed in as a leaf by a hand-written hook."""
    leaf = value.detach().clone().requires_grad_(True)
    handle = case.layers(stack)[LAYER].register_forward_pre_hook(
        lambda _, args, kwargs: _with_hidden(args, kwargs, leaf), with_kwargs=True)
    try:
        with torch.enable_grad():
            (gradient,) = torch.autograd.grad(metric(case, case.reference(**case.inputs)), leaf)
    finally:
        handle.remove()
    return gradient


@pytest.mark.parametrize("kind", ["scratch-pre", "scratch-post", "minilm", "smollm2", "gpt2",
                                  "bert-mlm", "distilbert", "t5", "bart",
                                  "scratch-seq2seq-pre"])
def test_a_cached_points_gradient_is_the_hand_fed_leafs(cases, kind):
    case = cases(kind)
    stack = case.first_stack
    name = points.resid_pre(LAYER, stack)
    run = Run(cache=[name, points.pattern(LAYER, stack)], grad=True)
    output = run_model(case.model, case.inputs, run)
    value = run[name]
    assert value.requires_grad and run[points.pattern(LAYER, stack)].requires_grad
    (gradient,) = torch.autograd.grad(metric(case, output), value)
    expected = by_hand(case, stack, value)
    scale = max(1.0, float(expected.abs().max()))
    assert float(expected.abs().max()) > 0  # the metric depends on this layer's input
    torch.testing.assert_close(gradient, expected, atol=1e-5 * scale, rtol=0)


def test_a_run_without_grad_keeps_no_graph(cases):
    case = cases("gpt2")
    run = Run(cache=[points.resid_pre(LAYER)])
    run_model(case.model, case.inputs, run)
    assert not run[points.resid_pre(LAYER)].requires_grad


def _double_gpt2(frozen: bool):
    torch.manual_seed(3)
    model = GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=4, n_embd=32, n_positions=32,
                                       vocab_size=50, attn_implementation="eager"))
    model = install(model.double().eval())
    if frozen:
        model.requires_grad_(False)
    return model


@pytest.mark.parametrize("frozen", [False, True], ids=["trainable", "frozen weights"])
def test_the_gradient_matches_a_finite_difference_along_a_direction(frozen):
    """Float64, so a central difference is exact to ~1e-9: the directional derivative autograd
    gives through the cached point equals (f(x + e d) - f(x - e d)) / 2e, with x moved by a
    resid_pre edit. With frozen weights the cached point is still differentiable."""
    model = _double_gpt2(frozen)
    inputs = dict(input_ids=torch.tensor([[5, 9, 14, 2, 33, 7]]), use_cache=False)
    name = points.resid_pre(LAYER)

    def logit_difference(output) -> torch.Tensor:
        return output.logits[0, -1, 3] - output.logits[0, -1, 4]

    run = Run(cache=[name], grad=True)
    (gradient,) = torch.autograd.grad(logit_difference(run_model(model, inputs, run)), run[name])
    direction = torch.randn(run[name].shape, generator=torch.Generator().manual_seed(1),
                            dtype=torch.float64)
    step = 1e-6  # truncation error grows as step² (it was 5e-7 at 1e-5)

    def moved(by: float) -> float:
        shifted = Run(edits={name: lambda value, _: value + by * direction})
        return float(logit_difference(run_model(model, inputs, shifted)))

    finite = (moved(step) - moved(-step)) / (2 * step)
    assert abs(float((gradient * direction).sum()) - finite) < 1e-7 * max(1.0, abs(finite))
    assert abs(finite) > 1e-3

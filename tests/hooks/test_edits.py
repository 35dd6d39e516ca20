"""Edits through hook points, on every model kind, each against the same edit written by hand
as a plain torch hook on the reference (the eager twin with no hook points, or the
from-scratch model itself run with no run active): zeroing one head, patching the residual
stream from another input, blocking attention edges, replacing the stream between the
sublayers.

Dimensions: B batch, T tokens, H heads, Dh head width, Q/K query/key positions.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.experiments.ablation import knockout
from models.experiments.targets import next_token_target, prepare
from models.hooks import points
from models.hooks.run import Run, run_model
from tests.hooks.cases import ENCODER_DECODERS, KINDS, submodule

TOLERANCE = 1e-5
LAYER, HEAD, POSITION = 1, 1, 2
CHANGED = 1e-4  # an edit that changes nothing downstream would prove nothing


def edited_output(case, edits, inputs=None) -> torch.Tensor:
    return case.output(run_model(case.model, inputs or case.inputs, Run(edits=edits)))


def cached(case, names, inputs=None) -> Run:
    run = Run(cache=names)
    run_model(case.model, inputs or case.inputs, run)
    return run


def hooked_reference(case, hooks, inputs=None) -> torch.Tensor:
    """The reference's own forward with hand-written hooks: (module, kind, function) triples,
    kind "pre" (a forward pre-hook with kwargs) or "post" (a forward hook)."""
    handles = []
    for module, kind, function in hooks:
        handles.append(module.register_forward_pre_hook(function, with_kwargs=True)
                       if kind == "pre" else module.register_forward_hook(function))
    try:
        with torch.no_grad():
            return case.output(case.reference(**(inputs or case.inputs)))
    finally:
        for handle in handles:
            handle.remove()


def plain_output(case) -> torch.Tensor:
    with torch.no_grad():
        return case.output(case.reference(**case.inputs))


def assert_same_and_changed(case, got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=0)
    assert (got - plain_output(case)).abs().max() > CHANGED


def _hidden(args, kwargs) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _with_hidden(args, kwargs, value):
    return ((value, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": value})


def _first(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _with_first(output, value):
    return (value, *output[1:]) if isinstance(output, tuple) else value


def head_slots(case, stack: str, module: str) -> tuple[int, int]:
    z = cached(case, [points.z(LAYER, stack, module)])[points.z(LAYER, stack, module)]
    return z.size(2), z.size(3)  # H, Dh


def sites(kinds=KINDS):
    """(kind, stack, attention module) of every attention the edits are tried on."""
    found = []
    for kind in kinds:
        stacks = ("encoder", "decoder") if kind in ENCODER_DECODERS else ("",)
        for stack in stacks:
            found.append((kind, stack, "attn"))
            if stack == "decoder":
                found.append((kind, stack, "cross_attn"))
    return found


@pytest.mark.parametrize("kind, stack, module", sites())
def test_zeroing_one_heads_z_is_a_hand_zeroed_slice_of_W_Os_input(cases, kind, stack, module):
    case = cases(kind)
    heads, width = head_slots(case, stack, module)

    def zero_head(z, name):  # (B, T, H, Dh)
        z = z.clone()
        z[:, :, HEAD] = 0.0
        return z

    got = edited_output(case, {points.z(LAYER, stack, module): zero_head})

    def by_hand(_, args, kwargs):  # W_O's input (B, T, H*Dh): the heads side by side
        joined = _hidden(args, kwargs).clone()
        joined[..., HEAD * width:(HEAD + 1) * width] = 0.0
        return _with_hidden(args, kwargs, joined)

    family = case.family(stack)
    projection = submodule(case.layers(stack)[LAYER],
                           family.cross_out if module == "cross_attn" else family.out)
    expected = hooked_reference(case, [(projection, "pre", by_hand)])
    assert heads > HEAD
    assert_same_and_changed(case, got, expected)


@pytest.mark.parametrize("kind, stack, _", [site for site in sites() if site[2] == "attn"])
def test_patching_resid_pre_from_another_input_is_a_hand_pre_hooks_patch(cases, kind, stack, _):
    case = cases(kind)
    name = points.resid_pre(LAYER, stack)
    donor = cached(case, [name], case.donor_inputs)[name]  # (B, T, D)

    def patch(value, _name):
        value = value.clone()
        value[:, POSITION] = donor[:, POSITION]
        return value

    got = edited_output(case, {name: patch})
    layer = case.layers(stack)[LAYER]
    kept = {}

    def keep(_, args, kwargs):
        kept["donor"] = _hidden(args, kwargs).clone()

    hooked_reference(case, [(layer, "pre", keep)], case.donor_inputs)
    torch.testing.assert_close(kept["donor"], donor, atol=TOLERANCE, rtol=0)

    def by_hand(_, args, kwargs):
        value = _hidden(args, kwargs).clone()
        value[:, POSITION] = kept["donor"][:, POSITION]
        return _with_hidden(args, kwargs, value)

    assert_same_and_changed(case, got, hooked_reference(case, [(layer, "pre", by_hand)]))


@pytest.mark.parametrize("kind, stack, _", [site for site in sites() if site[2] == "attn"])
def test_replacing_resid_mid_is_a_hand_edit_of_the_stream_between_the_sublayers(cases, kind,
                                                                                 stack, _):
    """Pre-norm layers form resid_mid = resid_pre + attn_out themselves (the engine edits it
    through the attention's output); by hand: the attention's output is changed so that the
    sum is the new value. Post-norm layers: by hand, the output of the norm that makes it."""
    case = cases(kind)
    name = points.resid_mid(LAYER, stack)
    donor = cached(case, [name], case.donor_inputs)[name]  # (B, T, D)

    def replace(value, _name):
        value = value.clone()
        value[:, POSITION] = donor[:, POSITION]
        return value

    edited = Run(cache=[name], edits={name: replace})
    got = case.output(run_model(case.model, case.inputs, edited))
    torch.testing.assert_close(edited[name][:, POSITION], donor[:, POSITION], atol=0, rtol=0)
    layer, family = case.layers(stack)[LAYER], case.family(stack)
    if case.pre_norm:
        entering = {}

        def keep_input(_, args, kwargs):
            entering["x"] = _hidden(args, kwargs)

        def by_hand(_, args, output):
            attended = _first(output).clone()
            attended[:, POSITION] = donor[:, POSITION] - entering["x"][:, POSITION]
            return _with_first(output, attended)

        hooks = [(layer, "pre", keep_input),
                 (submodule(layer, family.attention), "post", by_hand)]
    else:
        def by_hand(_, args, output):
            stream = _first(output).clone()
            stream[:, POSITION] = donor[:, POSITION]
            return _with_first(output, stream)

        hooks = [(submodule(layer, family.mid), "post", by_hand)]
    assert_same_and_changed(case, got, hooked_reference(case, hooks))


QUERY, KEYS = 4, (0, 2)


def block(blocked: torch.Tensor):
    def edit(scores, name):  # (B, H, Q, K)
        return scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return edit


@pytest.mark.parametrize("kind, stack, module", sites())
def test_blocking_edges_in_the_scores_is_a_hand_masked_attention(cases, kind, stack, module,
                                                                 monkeypatch):
    """The blocked entries get exactly no weight, every row still sums to 1, and the forward is
    the model's own attention given the same edges masked by hand: transformers' eager
    attention function with the edges added to its mask, or the from-scratch attention module
    called with them removed from its bool mask."""
    case = cases(kind)
    pattern = points.pattern(LAYER, stack, module)
    queries, keys = cached(case, [pattern])[pattern].shape[-2:]
    blocked = torch.zeros(queries, keys, dtype=torch.bool)  # (Q, K)
    blocked[min(QUERY, queries - 1), list(KEYS)] = True
    edited = Run(cache=[pattern], edits={points.scores(LAYER, stack, module): block(blocked)})
    got = case.output(run_model(case.model, case.inputs, edited))
    weights = edited[pattern]  # (B, H, Q, K)
    assert torch.all(weights[:, :, blocked] == 0.0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5,
                               rtol=0)
    family = case.family(stack)
    attention = submodule(case.layers(stack)[LAYER], family.cross_attention
                          if module == "cross_attn" else family.attention)
    if not case.hugging_face:
        def by_hand(_, args, kwargs):  # forward(x, mask (B, 1, Q, K) True = may attend, ...)
            return (args[0], args[1] & ~blocked, *args[2:]), kwargs

        assert_same_and_changed(case, got, hooked_reference(case, [(attention, "pre", by_hand)]))
        return
    library = __import__(type(attention).__module__, fromlist=["eager_attention_forward"])
    original = library.eager_attention_forward

    def masked_by_hand(called_by, query, key, value, mask, **kwargs):
        if called_by is attention:
            lowest = torch.finfo(query.dtype).min
            extra = torch.zeros(blocked.shape, dtype=query.dtype).masked_fill(blocked, lowest)
            mask = extra if mask is None else (mask + extra).clamp(min=lowest)
        return original(called_by, query, key, value, mask, **kwargs)

    monkeypatch.setattr(library, "eager_attention_forward", masked_by_hand)
    expected = hooked_reference(case, [])
    monkeypatch.undo()
    assert_same_and_changed(case, got, expected)


def test_a_scores_edit_is_the_knockout_experiment(smollm2_model):
    """ablation.knockout (the app's experiment) and a run with the same scores edited agree on
    the target's log-probability and on every layer's weights."""
    model, tokenizer = smollm2_model.model, smollm2_model.tokenizer
    prepared = prepare(model, tokenizer, smollm2_model.max_tokens,
                       "The capital of France is", True, "smollm2")
    target = next_token_target(prepared, tokenizer, tokenizer(" Paris")["input_ids"][0])
    tokens, query, keys, layers = prepared.num_tokens, prepared.num_tokens - 1, (0, 2), (3, 7)
    comparison = knockout(model, prepared, tokenizer, target, query, keys, layers)
    blocked = torch.zeros(tokens, tokens, dtype=torch.bool)
    blocked[query, list(keys)] = True
    names = points.every_layer("pattern", 30)
    run = Run(cache=names, edits={points.scores(layer): block(blocked) for layer in layers})
    logits = run_model(model, dict(prepared.inputs, use_cache=False), run).logits  # (1, T, V)
    log_probability = torch.log_softmax(logits[0, -1], dim=-1)[target.token_id]
    assert float(log_probability) == pytest.approx(comparison.after.log_probability, abs=1e-5)
    assert abs(comparison.after.log_probability - comparison.before.log_probability) > CHANGED
    weights = np.stack([run[name][0].numpy() for name in names])  # (L, H, Q, K)
    np.testing.assert_allclose(weights, comparison.after.record.weights, atol=1e-5)
    assert np.all(weights[list(layers)][:, :, query, list(keys)] == 0.0)

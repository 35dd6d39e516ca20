"""Every model kind's named hook points: the list is what a run visits, and each point holds
what the model computed there, checked against transformers' own outputs (hidden states,
attentions, logits) on an eager twin with no hook points, against hand-written torch hooks on
the modules where the value lives, and against the arithmetic of the residual stream."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from models.hooks import points
from models.hooks.install import point_names
from models.hooks.run import Run, run_model
from tests.hooks.cases import ENCODER_DECODERS, submodule

TOLERANCE = 1e-5


def full_run(case) -> tuple[Run, object]:
    run = Run(cache=lambda name: True)
    return run, run_model(case.model, case.inputs, run)


def reference_forward(case, **flags):
    """The reference model's own forward with no run active (the twin has no points at all)."""
    with torch.no_grad():
        return case.reference(**case.inputs, **flags)


def close(got: torch.Tensor, expected: torch.Tensor, atol: float = TOLERANCE) -> None:
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=atol, rtol=0)


def test_point_names_are_exactly_what_a_full_run_visits(case):
    run, output = full_run(case)
    names = point_names(case.model)
    assert len(names) == len(set(names))
    assert len(run.seen) == len(set(run.seen)), "a point was visited twice"
    assert set(run.seen) == set(names) == set(run.cache)
    layered = [name for name in run.seen if points.parse(name)]
    assert layered == [name for name in names if points.parse(name)]  # in the visiting order
    needed = []
    for stack, layers, _ in case.stacks:
        needed += [points.embed(stack), points._prefixed(stack, points.FINAL)]
        for layer in range(len(layers)):
            needed += [points.resid_pre(layer, stack), points.resid_mid(layer, stack),
                       points.resid_post(layer, stack), points.pattern(layer, stack),
                       points.z(layer, stack), points.attn_out(layer, stack),
                       points.mlp_out(layer, stack)]
            if stack == "decoder":
                needed += [points.pattern(layer, stack, "cross_attn"),
                           points.z(layer, stack, "cross_attn")]
            if case.pre_norm:
                needed += [points.ln1(layer, stack), points.ln2(layer, stack)]
    if case.has_logits:
        needed.append(points.LOGITS)
        close(run[points.LOGITS], output.logits, atol=0)
    assert set(needed) <= set(names), sorted(set(needed) - set(names))
    assert (points.LOGITS in names) == case.has_logits


@dataclass(frozen=True)
class Reference:
    """One stack's hidden states (None where the model hands none back: the from-scratch
    encoder-decoder), attentions and cross-attentions, from the reference's own output."""

    hidden: tuple[torch.Tensor, ...] | None
    attentions: tuple[torch.Tensor, ...]
    cross: tuple[torch.Tensor, ...]


def stack_reference(case, output, stack: str) -> Reference:
    cross = output.cross_attentions if stack == "decoder" else ()
    if stack == "":
        return Reference(output.hidden_states, output.attentions, cross)
    hidden = getattr(output, f"{stack}_hidden_states") if case.hugging_face else None
    return Reference(hidden, getattr(output, f"{stack}_attentions"), cross)


def test_residual_stream_patterns_and_logits_are_the_models_own(case):
    """resid_pre of layer l is transformers' hidden state l, the final norm point its last one,
    the pattern its attention (all bit for bit: the same operations ran), the logits its
    logits. The from-scratch models are read against what their forward hands back."""
    run, _ = full_run(case)
    flags = dict(output_hidden_states=True, output_attentions=True) if case.hugging_face else {}
    reference = reference_forward(case, **flags)
    for stack, layers, _ in case.stacks:
        found = stack_reference(case, reference, stack)
        hidden, attentions, cross = found.hidden, found.attentions, found.cross
        count = len(layers)
        assert len(attentions) == count
        for layer in range(count):
            assert torch.equal(run[points.pattern(layer, stack)], attentions[layer]), layer
            if cross:
                assert torch.equal(run[points.pattern(layer, stack, "cross_attn")], cross[layer])
        if hidden is None:
            continue
        assert len(hidden) == count + 1
        assert torch.equal(run[points.embed(stack)], hidden[0])
        for layer in range(count):
            assert torch.equal(run[points.resid_pre(layer, stack)], hidden[layer]), layer
        final = run[points._prefixed(stack, points.FINAL)]
        assert torch.equal(final, hidden[count])
    if case.has_logits:
        assert torch.equal(run[points.LOGITS], reference.logits)
    else:
        assert torch.equal(run[points.FINAL], reference.last_hidden_state)


def _first(value) -> torch.Tensor:
    return value[0] if isinstance(value, tuple) else value


def hand_captures(case) -> dict[str, torch.Tensor]:
    """The reference's own forward with hand-written torch hooks on the modules where each point
    lives (the layer's input and output, W_O's input and output, the MLP's output, the
    post-norm stream between the sublayers), keyed by the point they should equal."""
    seen: dict[str, torch.Tensor] = {}
    handles = []

    def output_of(name):
        def hook(module, args, output):
            seen[name] = _first(output).detach().clone()
        return hook

    def input_of(name):
        def hook(module, args, kwargs):
            seen[name] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        return hook

    for stack, layers, _ in case.stacks:
        family = case.family(stack)
        for index, layer in enumerate(layers):
            handles.append(layer.register_forward_pre_hook(
                input_of(points.resid_pre(index, stack)), with_kwargs=True))
            handles.append(layer.register_forward_hook(output_of(points.resid_post(index, stack))))
            out = submodule(layer, family.out)
            handles.append(out.register_forward_pre_hook(input_of(f"{stack}.{index}.z"),
                                                         with_kwargs=True))
            handles.append(out.register_forward_hook(output_of(points.attn_out(index, stack))))
            handles.append(submodule(layer, family.mlp).register_forward_hook(
                output_of(points.mlp_out(index, stack))))
            handles.append(submodule(layer, family.up).register_forward_hook(
                output_of(points.mlp_pre(index, stack))))
            handles.append(submodule(layer, family.down).register_forward_pre_hook(
                input_of(points.mlp_post(index, stack)), with_kwargs=True))
            if case.pre_norm:
                handles.append(submodule(layer, family.ln1).register_forward_hook(
                    output_of(points.ln1(index, stack))))
                handles.append(submodule(layer, family.ln2).register_forward_hook(
                    output_of(points.ln2(index, stack))))
            else:
                handles.append(submodule(layer, family.mid).register_forward_hook(
                    output_of(points.resid_mid(index, stack))))
            if stack == "decoder":
                handles.append(submodule(layer, family.cross_out).register_forward_pre_hook(
                    input_of(f"{stack}.{index}.cross_z"), with_kwargs=True))
    try:
        reference_forward(case)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def test_each_point_is_what_a_hand_written_hook_reads_there(case):
    run, _ = full_run(case)
    seen = hand_captures(case)
    for stack, layers, _ in case.stacks:
        for layer in range(len(layers)):
            for name in (points.resid_pre(layer, stack), points.resid_post(layer, stack),
                         points.attn_out(layer, stack), points.mlp_pre(layer, stack),
                         points.mlp_post(layer, stack), points.mlp_out(layer, stack)):
                close(run[name], seen[name])
            if case.pre_norm:
                close(run[points.ln1(layer, stack)], seen[points.ln1(layer, stack)])
                close(run[points.ln2(layer, stack)], seen[points.ln2(layer, stack)])
            z = run[points.z(layer, stack)]  # (B, T, H, Dh)
            assert z.dim() == 4 and z.shape[:2] == run[points.resid_pre(layer, stack)].shape[:2]
            close(z.flatten(2), seen[f"{stack}.{layer}.z"])  # the heads side by side, as W_O reads
            if not case.pre_norm:
                close(run[points.resid_mid(layer, stack)], seen[points.resid_mid(layer, stack)])
            if stack == "decoder":
                close(run[points.z(layer, stack, "cross_attn")].flatten(2),
                      seen[f"{stack}.{layer}.cross_z"])


@pytest.mark.parametrize("kind", ["scratch-pre", "smollm2", "gpt2", "t5", "mbart",
                                  "scratch-seq2seq-pre"])
def test_pre_norm_streams_add_up(cases, kind):
    """x + f(norm(x)): resid_mid = resid_pre + attn_out and resid_post = resid_mid + mlp_out
    (+ the cross-attention's output, W_O of its heads, in a decoder layer)."""
    case = cases(kind)
    run, _ = full_run(case)
    for stack, layers, _ in case.stacks:
        family = case.family(stack)
        for layer in range(len(layers)):
            pre, mid = run[points.resid_pre(layer, stack)], run[points.resid_mid(layer, stack)]
            close(mid, pre + run[points.attn_out(layer, stack)])
            added = run[points.mlp_out(layer, stack)]
            if stack == "decoder":
                cross = run[points.z(layer, stack, "cross_attn")].flatten(2)  # (B, T, D)
                with torch.no_grad():
                    added = added + submodule(layers[layer], family.cross_out)(cross)
            close(run[points.resid_post(layer, stack)], mid + added)


def test_no_point_is_missing_or_extra_in_an_encoder_decoders_stacks(cases):
    """Both stacks of every encoder-decoder have the same points per layer, the decoder's with
    the cross-attention's six beside its self-attention's."""
    for kind in ENCODER_DECODERS:
        names = point_names(cases(kind).model)
        encoder = {n.split(".", 3)[3] for n in names if n.startswith("encoder.blocks.0.")}
        decoder = {n.split(".", 3)[3] for n in names if n.startswith("decoder.blocks.0.")}
        assert decoder - encoder == {f"cross_attn.hook_{k}" for k in points.ATTENTION_POINTS}, kind
        assert encoder <= decoder, kind


def test_a_point_that_is_not_there_is_one_sentence(encoder_runner):
    """A layer past the model's last is named as such; any other unknown name points at
    point_names."""
    from models.hooks.text_run import run_text

    with pytest.raises(ValueError) as refused:
        run_text(encoder_runner, "Time flies.", cache=["blocks.6.hook_resid_post"])
    assert str(refused.value).endswith(
        "has no hook point 'blocks.6.hook_resid_post' (it has layers 0 to 5).")
    with pytest.raises(ValueError, match=r"no hook point 'hook_nonsense' \(point_names\(model\) "
                                         r"lists its \d+\)\.$"):
        run_text(encoder_runner, "Time flies.", cache=["hook_nonsense"])

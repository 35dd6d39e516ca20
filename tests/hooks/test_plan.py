"""Where a run stops (`stop_at`) and where it starts (`LayerPlan(start, start_input)`), on every
model kind: a stopped forward visits nothing after its point, and a forward started at a later
layer from that layer's kept input computes the later layers as the whole forward does."""

from __future__ import annotations

import pytest
import torch

from models.hooks import points
from models.hooks.run import LayerPlan, Run, run_model
from tests.hooks.cases import ENCODER_DECODERS, KINDS

TOLERANCE = 1e-5


def full_run(case) -> tuple[Run, object]:
    run = Run(cache=lambda name: True)
    return run, run_model(case.model, case.inputs, run)


def layer_of(name: str, stack: str) -> int | None:
    point = points.parse(name)
    return point.layer if point is not None and point.stack == stack else None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["resid_post", "pattern"])
def test_stop_at_ends_the_forward_there(cases, kind, where):
    case = cases(kind)
    stack = case.first_stack
    stop = (points.resid_post(0, stack) if where == "resid_post"
            else points.pattern(1, stack))
    full, _ = full_run(case)
    run = Run(cache=lambda name: True, stop_at=stop)
    assert run_model(case.model, case.inputs, run) is None  # the model's output never came
    assert run.seen[-1] == stop
    assert run.seen == full.seen[:len(run.seen)]  # the same points, in order, up to the stop
    assert points.LOGITS not in run.cache
    after = full.seen[len(run.seen):]
    assert points.z(1, stack) in after and not set(after) & set(run.seen)
    for name in run.seen:
        torch.testing.assert_close(run[name], full[name], atol=0, rtol=0)


def plan_sites():
    found = []
    for kind in KINDS:
        stacks = ("encoder", "decoder") if kind in ENCODER_DECODERS else ("",)
        found += [(kind, stack) for stack in stacks]
    return found


@pytest.mark.parametrize("kind, stack", plan_sites())
def test_a_plan_starting_at_a_later_layer_computes_what_the_whole_forward_does(cases, kind,
                                                                              stack):
    case = cases(kind)
    start = case.num_layers(stack) - 1
    full, full_output = full_run(case)
    plan = LayerPlan(start=start, start_input=full[points.resid_pre(start, stack)], stack=stack)
    run = Run(cache=lambda name: True, plan=plan)
    output = run_model(case.model, case.inputs, run)
    layers = {name: layer_of(name, stack) for name in full.seen}
    skipped = [name for name in run.seen if layers.get(name) is not None and layers[name] < start]
    assert not skipped, skipped  # the layers before `start` did not run
    later = [name for name in full.seen if layers[name] is not None and layers[name] >= start]
    assert later and set(later) <= set(run.seen)
    for name in later + [points._prefixed(stack, points.FINAL)]:
        torch.testing.assert_close(run[name], full[name], atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(case.output(output), case.output(full_output), atol=TOLERANCE,
                               rtol=0)

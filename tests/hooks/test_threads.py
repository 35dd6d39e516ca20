"""Sessions share one loaded model. Runs with different edits on the SAME model object at the
same moment (threads released together by a barrier, many rounds) each get exactly what they
get alone: a run's edits live in the run, never on the model (issue 21)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import torch

from models.hooks import points
from models.hooks.capture import run_streamed
from models.hooks.run import Run, run_model

TOLERANCE = 1e-5
ROUNDS = 6
ABLATED = ((0, 1), (3, 4))  # (layer, head)
PATCHED_LAYER, POSITION = 2, 3
READ = (points.resid_post(3), points.pattern(3), points.z(4))


def together(jobs: dict[str, Callable[[], dict[str, torch.Tensor]]],
             rounds: int = ROUNDS) -> dict[str, list[dict[str, torch.Tensor]]]:
    """Every job in its own thread, all released at once by a barrier, `rounds` times."""
    start = threading.Barrier(len(jobs))
    results: dict[str, list] = {name: [] for name in jobs}
    errors: list[BaseException] = []

    def repeat(name, job):
        try:
            for _ in range(rounds):
                start.wait()
                results[name].append(job())
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=repeat, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


def assert_each_as_alone(results, alone) -> None:
    for name, outcomes in results.items():
        assert len(outcomes) == ROUNDS
        for outcome in outcomes:
            assert outcome.keys() == alone[name].keys()
            for key, value in outcome.items():
                torch.testing.assert_close(value, alone[name][key], atol=TOLERANCE, rtol=0,
                                           msg=lambda message: f"{name} {key}: {message}")


def zero_heads(heads):
    def edit(z, name):  # (B, T, H, Dh)
        z = z.clone()
        z[:, :, heads] = 0.0
        return z
    return edit


def sessions(case) -> dict[str, Callable[[], dict[str, torch.Tensor]]]:
    model, inputs = case.model, case.inputs
    donor_run = Run(cache=[points.resid_pre(PATCHED_LAYER)])
    run_model(model, case.donor_inputs, donor_run)
    donor = donor_run[points.resid_pre(PATCHED_LAYER)]

    def patch(value, name):
        value = value.clone()
        value[:, POSITION] = donor[:, POSITION]
        return value

    by_layer: dict[int, list[int]] = {}
    for layer, head in ABLATED:
        by_layer.setdefault(layer, []).append(head)
    ablating = {points.z(layer): zero_heads(heads) for layer, heads in by_layer.items()}

    def session(edits):
        def job():
            run = Run(cache=READ, edits=edits)
            output = case.output(run_model(model, inputs, run))
            return {"output": output, **run.cache}
        return job

    def without_run():  # a forward that knows nothing of runs: the hooks must stay silent
        with torch.inference_mode():
            return {"output": case.output(model(**inputs))}

    return {"ablating": session(ablating), "patching": session({points.resid_pre(
        PATCHED_LAYER): patch}), "plain": session({}), "no run": without_run}


@pytest.mark.parametrize("kind", ["smollm2", "minilm"])
def test_sessions_editing_one_model_at_once_each_get_their_own_result(cases, kind):
    case = cases(kind)
    jobs = sessions(case)
    alone = {name: job() for name, job in jobs.items()}
    plain = alone["plain"]["output"]
    for edited in ("ablating", "patching"):  # the edits are real: alone, they change the output
        assert (alone[edited]["output"] - plain).abs().max() > 1e-3
    torch.testing.assert_close(alone["no run"]["output"], plain, atol=0, rtol=0)
    assert_each_as_alone(together(jobs), alone)


@pytest.mark.parametrize("kind", ["smollm2", "minilm"])
def test_a_streamed_plan_and_a_plain_forward_at_once_each_get_their_own_result(cases, kind):
    """A long input read layer by layer from a kept layer input (LayerPlan start > 0: the
    layers before it are skipped by the shared model's layers) while another session runs the
    whole forward: the skipping is the streamed run's alone."""
    case = cases(kind)
    model, inputs, start = case.model, case.inputs, 2
    kept = Run(cache=[points.resid_pre(start)])
    run_model(model, inputs, kept)

    def streamed():
        layers = {}

        def sink(index, layer):
            layers[f"weights {index}"] = layer.weights
            layers[f"context {index}"] = layer.context

        count = run_streamed(model, inputs, sink, start=start,
                             start_input=kept[points.resid_pre(start)])
        assert count == case.num_layers() - start
        return layers

    def whole():
        run = Run(cache=[points.pattern(layer) for layer in range(case.num_layers())])
        return {"output": case.output(run_model(model, inputs, run)), **run.cache}

    jobs = {"streamed": streamed, "whole": whole}
    alone = {name: job() for name, job in jobs.items()}
    for layer in range(start, case.num_layers()):  # streamed from layer 2 = the whole forward's
        torch.testing.assert_close(alone["streamed"][f"weights {layer}"],
                                   alone["whole"][points.pattern(layer)], atol=TOLERANCE, rtol=0)
    assert "weights 0" not in alone["streamed"]
    assert_each_as_alone(together(jobs), alone)

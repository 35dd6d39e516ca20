"""A generation step with the key/value cache (one new token, `past_key_values`) is a run like
any other: every point is visited, and each holds the last position of the full forward over
the whole sequence (keys and values: all positions, as the cache hands them to attention)."""

from __future__ import annotations

import pytest
import torch

from models.hooks import points
from models.hooks.install import point_names
from models.hooks.run import Run, run_model

TOLERANCE = 1e-5  # times the values' size: a 1-token step and a full forward round apart


@pytest.mark.parametrize("kind", ["smollm2", "gpt2"])
def test_a_one_token_step_visits_every_point_with_the_full_forwards_last_row(cases, kind):
    case = cases(kind)
    model = case.model
    sequence = case.inputs["input_ids"][:1]  # (1, T)
    full = Run(cache=lambda name: True)
    run_model(model, dict(input_ids=sequence, use_cache=False), full)
    prompt = run_model(model, dict(input_ids=sequence[:, :-1], use_cache=True), Run())
    step = Run(cache=lambda name: True)
    output = run_model(model, dict(input_ids=sequence[:, -1:], use_cache=True,
                                   past_key_values=prompt.past_key_values), step)
    assert set(step.seen) == set(point_names(model)) and len(step.seen) == len(set(step.seen))
    tokens = sequence.size(1)
    for name, value in step.cache.items():
        whole = full[name]
        point = points.parse(name)
        if point is not None and point.kind in ("k", "v"):  # (1, Hkv, T, Dh): the cache's all
            expected = whole
        elif point is not None and point.kind in ("q", "scores", "pattern"):  # (1, H, 1, ...)
            expected = whole[:, :, -1:]
        else:  # (1, 1, ...): position-first points
            expected = whole[:, -1:]
        assert value.shape == expected.shape, name
        scale = max(1.0, float(expected.abs().max()))  # float32 rounding grows with size
        torch.testing.assert_close(value, expected, atol=TOLERANCE * scale, rtol=0,
                                   msg=lambda message: f"{name}: {message}")
    assert step[points.pattern(0)].shape[-2:] == (1, tokens)
    logits = full[points.LOGITS][:, -1]  # (1, V)
    torch.testing.assert_close(output.logits[:, -1], logits, rtol=0,
                               atol=TOLERANCE * max(1.0, float(logits.abs().max())))

"""bertviz's neuron view fed from our trace: the q·k / √d products it computes from the vectors it
is given are the model's own attention scores (read at the hook_scores point), their softmax is
the model's own weights, and the page loads nothing from outside."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from models.hooks import points
from models.hooks.run import Run, run_model
from models.teaching.neuron_view import neuron_inputs
from viz.neuron_view import neuron_params, neuron_view_html

TEXT = "Mario is short, but he can jump super high."


def model_scores(runner, text: str) -> list[np.ndarray]:
    """Each layer's scores (H, Q, K) as the model computed them, read at hook_scores."""
    _, inputs = runner.encode(text)
    count = runner.config.num_hidden_layers
    run = Run(cache=[points.scores(layer) for layer in range(count)])
    run_model(runner.model, {**inputs, **({"use_cache": False} if runner.causal else {})}, run)
    return [run.cache[points.scores(layer)][0].float().numpy() for layer in range(count)]


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner"])
def test_the_products_the_view_is_given_are_the_models_scores(which, request):
    runner = request.getfixturevalue(which)
    trace = runner.run(TEXT)
    scores = model_scores(runner, TEXT)
    allowed = trace.allowed  # (Q, K): a causal model's masked cells hold the dtype's minimum
    for layer in (0, trace.record.num_layers // 2, trace.record.num_layers - 1):
        exact = neuron_inputs(trace, layer, decimals=None)
        np.testing.assert_allclose(exact.view_scores[:, allowed], scores[layer][:, allowed],
                                   rtol=1e-5, atol=1e-4)
        rounded = neuron_inputs(trace, layer)
        moved = np.abs(rounded.view_scores - exact.view_scores)
        assert (moved <= rounded.rounding_bound() + 1e-9).all()
        assert float(rounded.rounding_bound().max()) < 0.05
        # what the view shows as the softmax is the model's own weights
        view = np.where(allowed, exact.view_scores, -np.inf)
        weights = np.exp(view - view.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        np.testing.assert_allclose(weights, rounded.weights, atol=1e-5)
    assert exact.causal == runner.causal


def test_grouped_query_heads_get_the_key_head_they_read(decoder_runner):
    trace = decoder_runner.run(TEXT)
    assert trace.kv_group > 1  # SmolLM2: 9 query heads read 3 key heads
    inputs = neuron_inputs(trace, 0, decimals=None)
    for head in range(trace.record.num_heads):
        np.testing.assert_array_equal(inputs.keys[head], trace.key[0][trace.kv_head(head)])


def test_the_page_holds_bertviz_own_drawing_with_our_vectors_and_loads_nothing(encoder_runner):
    trace = encoder_runner.run("The cat <b>sat</b>.")
    inputs = neuron_inputs(trace, 2)
    html = neuron_view_html(inputs, head=1, title="<script>x</script>")
    assert "cdnjs" not in html and not re.search(r"<script[^>]*\bsrc=", html)
    assert "require.config" not in html and "<script>x</script>" not in html
    assert "function showComputation(" in html  # bertviz's own neuron_view.js
    params = neuron_params(inputs, head=1)
    given = params["attention"]["all"]
    assert np.array_equal(np.array(given["queries"][0]), inputs.queries)
    assert np.array_equal(np.array(given["keys"][0]), inputs.keys)
    assert params["head"] == 1 and params["bidirectional"] is True
    start = html.index("window.bertviz_params = ") + len("window.bertviz_params = ")
    embedded = json.loads(html[start:html.index(";</script>", start)])
    assert embedded["attention"]["all"]["left_text"] == given["left_text"]
    assert "<" not in html[start:html.index(";</script>", start)]  # written as \u003c
    with pytest.raises(ValueError, match="does not exist"):
        neuron_inputs(trace, trace.record.num_layers)

"""One attention access for any length: a text kept whole and the same text streamed layer by
layer answer every question with the same numbers (heads, rows with their vectors, windows,
rows of every layer, norm-based maps, the residual stream, any layer's points, predictions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.hooks import points
from models.hooks.access import StreamedAttention, WholeAttention
from models.hooks.streaming import stream

TEXT = ("The old lighthouse keeper climbed the stairs every evening, lit the lamp, and watched "
        "the ships pass the rocks until the morning came back over the sea.")
ATOL = 1e-5  # float32 through two code paths: the whole forward, a layer run from its input


@pytest.fixture(scope="module", params=["decoder_runner", "encoder_runner"])
def both(request, tmp_path_factory):
    """(whole, streamed) accesses of one text on one model."""
    loaded = request.getfixturevalue(request.param)
    trace = loaded.run(TEXT)
    encoded, _ = loaded.encode(TEXT)
    whole = WholeAttention(loaded, encoded, trace)
    streamed = stream(loaded, TEXT, None, lambda layer, maps: None,
                      keep_inputs=tmp_path_factory.mktemp("inputs"))
    yield whole, StreamedAttention(loaded, streamed, summary=None)
    streamed.layer_inputs.delete()


def test_they_read_the_same_tokens_layers_and_heads(both):
    whole, streamed = both
    assert whole.whole and not streamed.whole
    assert whole.tokens == streamed.tokens
    assert (whole.num_layers, whole.num_heads, whole.num_tokens) == \
        (streamed.num_layers, streamed.num_heads, streamed.num_tokens)


def test_every_head_is_the_same_map(both):
    whole, streamed = both
    for layer in (0, whole.num_layers // 2, whole.num_layers - 1):
        for head in (0, whole.num_heads - 1):
            np.testing.assert_allclose(streamed.head(layer, head), whole.head(layer, head),
                                       rtol=0, atol=ATOL)
    with pytest.raises(ValueError, match="is not in a model"):
        streamed.head(whole.num_layers, 0)


def test_rows_carry_the_same_weights_and_vectors(both):
    whole, streamed = both
    rows = range(3, 7)
    for layer in (0, whole.num_layers - 1):
        a, b = whole.rows(layer, rows), streamed.rows(layer, rows)
        for name in ("weights", "query", "key", "value", "context"):
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=0, atol=ATOL,
                                       err_msg=name)
        np.testing.assert_array_equal(a.allowed, b.allowed)
        assert a.scaling == pytest.approx(b.scaling)
        # the rows are the head's map, cut
        np.testing.assert_array_equal(a.weights[1], whole.head(layer, 1)[3:7])


def test_rows_of_every_layer_and_windows_are_the_maps_cut(both):
    whole, streamed = both
    seen = []
    rows = streamed.rows_every_layer(range(5, 8), lambda done, total: seen.append(done))
    assert seen == list(range(1, whole.num_layers + 1))
    expected = np.stack([np.stack([whole.head(l, h) for h in range(whole.num_heads)])[:, 5:8]
                         for l in range(whole.num_layers)])
    np.testing.assert_allclose(rows, expected, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(whole.rows_every_layer(range(5, 8)), expected)
    window = streamed.window(2, 12)
    assert window.tokens == whole.tokens[2:12] and "window" in window.masks
    np.testing.assert_allclose(window.weights, whole.window(2, 12).weights, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(whole.window(2, 12).weights, expected_window(whole, 2, 12))


def expected_window(whole, start, stop):
    return np.stack([np.stack([whole.head(l, h)[start:stop, start:stop]
                               for h in range(whole.num_heads)]) for l in range(whole.num_layers)])


def test_norm_based_maps_agree_and_are_weight_times_value_norm(both):
    whole, streamed = both
    layer, head = whole.num_layers - 1, 2
    np.testing.assert_allclose(streamed.norm_head(layer, head), whole.norm_head(layer, head),
                               rtol=1e-4, atol=ATOL)
    # an independent reference: alpha_ij * ||v_j W_O^h|| from the trace's own vectors
    trace = whole.trace
    value = trace.value[layer][trace.kv_head(head)]  # (K, Dh)
    width = value.shape[-1]
    from models.hooks.install import output_weight
    w_o = output_weight(whole.loaded.model, layer).numpy()[:, head * width:(head + 1) * width]
    norms = np.linalg.norm(value @ w_o.T, axis=-1)  # (K,)
    np.testing.assert_allclose(whole.norm_head(layer, head), whole.head(layer, head) * norms,
                               rtol=1e-4, atol=ATOL)


def test_the_residual_stream_and_any_layers_points(both):
    whole, streamed = both
    last = whole.num_layers
    for place in (0, last // 2, last):
        np.testing.assert_allclose(streamed.residual(place), whole.residual(place), rtol=0,
                                   atol=ATOL)
    layer = last // 2
    names = (points.attn_out(layer), points.mlp_out(layer), points.z(layer))
    from_whole, from_stream = whole.layer_points(layer, names), streamed.layer_points(layer, names)
    for name in names:
        np.testing.assert_allclose(from_stream[name], from_whole[name], rtol=0, atol=ATOL)
    # the layer's own arithmetic: its output is its input plus what its sublayers wrote (pre-norm)
    # or the z point is the trace's head outputs, (T, H, Dh) against (H, T, Dh)
    np.testing.assert_allclose(from_whole[points.z(layer)].transpose(1, 0, 2),
                               whole.trace.context[layer], rtol=0, atol=ATOL)
    if whole.causal:  # SmolLM2 is pre-norm: resid_post = resid_pre + attn_out + mlp_out
        np.testing.assert_allclose(
            whole.residual(layer) + from_whole[points.attn_out(layer)]
            + from_whole[points.mlp_out(layer)], whole.residual(layer + 1), rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match="residual stream has places"):
        whole.residual(last + 1)


def test_predictions_from_the_last_layers_input_are_the_full_forwards(both):
    whole, streamed = both
    expected = whole.predictions()
    found = streamed.predictions()
    if not whole.causal:  # MiniLM has no language-model head: neither makes one up
        assert expected is None and found is None
        return
    assert [c.token_id for c in found.next_token.candidates] == \
        [c.token_id for c in expected.next_token.candidates]
    np.testing.assert_allclose([c.probability for c in found.next_token.candidates],
                               [c.probability for c in expected.next_token.candidates],
                               rtol=1e-4, atol=1e-5)


def test_a_trace_keeps_its_residual_stream_as_the_model_computed_it(decoder_runner):
    trace = decoder_runner.run(TEXT)
    encoded, inputs = decoder_runner.encode(TEXT)
    with torch.inference_mode():
        reference = decoder_runner.model(**inputs, output_hidden_states=True, use_cache=False)
    layers = trace.record.num_layers
    assert trace.residual.shape[:2] == (layers + 1, len(encoded.tokens))
    for place in range(layers):  # each layer's input, exactly
        np.testing.assert_array_equal(trace.residual[place], reference.hidden_states[place][0])


def test_the_summary_of_a_stream_with_value_norms_is_the_whole_inputs(both, tmp_path):
    """The reductions the long stream takes layer by layer (with the value norms it hands on)
    are the ones the whole record gives, norm-based columns included."""
    from models.analysis.summary import SummaryStream

    whole, _ = both
    loaded = whole.loaded
    reduce = SummaryStream(whole.encoded, loaded.causal)
    streamed = stream(loaded, TEXT, None, reduce, keep_inputs=tmp_path, with_norms=True)
    from_stream, from_whole = reduce.summary(streamed), whole.summary()
    assert {"norm_cls", "norm_sep"} <= set(from_whole.statistics.columns)
    np.testing.assert_allclose(from_stream.statistics.drop(columns="label").to_numpy(float),
                               from_whole.statistics.drop(columns="label").to_numpy(float),
                               rtol=0, atol=1e-4)
    assert list(from_stream.statistics["label"]) == list(from_whole.statistics["label"])
    np.testing.assert_allclose(from_stream.pooled, from_whole.pooled, rtol=0, atol=ATOL)
    streamed.layer_inputs.delete()


def test_a_layers_maps_are_its_heads(both):
    whole, streamed = both
    layer = whole.num_layers - 1
    maps = streamed.layer_maps(layer)
    assert maps.shape == (whole.num_heads, whole.num_tokens, whole.num_tokens)
    np.testing.assert_allclose(maps, whole.layer_maps(layer), rtol=0, atol=ATOL)
    for head in (0, whole.num_heads - 1):
        np.testing.assert_array_equal(whole.layer_maps(layer)[head], whole.head(layer, head))
    for access in (whole, streamed):  # a layer that is not there: the sentence names the layer
        with pytest.raises(ValueError) as refused:
            access.layer_maps(whole.num_layers)
        assert str(refused.value) == (f"Layer {whole.num_layers} is not in a model with "
                                      f"{whole.num_layers} layers (0 to {whole.num_layers - 1}).")


def test_read_keeps_a_short_text_whole_and_streams_a_long_one(decoder_runner, tmp_path):
    from models.hooks.access import read

    short = read(decoder_runner, TEXT)
    assert short.whole and short.num_tokens < decoder_runner.max_tokens
    long_text = " ".join([TEXT] * 12)
    seen = []
    long = read(decoder_runner, long_text, folder=tmp_path / "inputs",
                progress=lambda done, total: seen.append((done, total)))
    assert not long.whole and long.num_tokens > decoder_runner.max_tokens
    assert seen[-1] == (long.num_layers, long.num_layers)
    assert long.summary().pooled.shape[:2] == (long.num_layers, long.num_heads)
    cut = read(decoder_runner, long_text, long=False)
    assert cut.whole and cut.num_tokens == decoder_runner.max_tokens
    np.testing.assert_allclose(long.head(5, 2)[:50, :50], cut.head(5, 2)[:50, :50], rtol=0,
                               atol=ATOL)  # causal: the first tokens see the same keys
    long.close()
    assert not (tmp_path / "inputs").exists()

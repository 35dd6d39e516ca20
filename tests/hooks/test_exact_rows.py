"""Some query rows of one layer of a long input, from the layer's kept input: the full forward's
numbers (weights, vectors, row arithmetic), a window of every layer, and clear errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from models.teaching.arithmetic import row_arithmetic, row_arithmetic_from_rows
from models.hooks.capture import run_streamed
from models.hooks.long_rows import exact_rows, window_maps
from models.loading.kinds import DECODER
from models.loading.source import ModelSource
from models.hooks.streaming import layer_from_input, stream
from models.hooks.trace import allowed_positions
from tests.long_support import full_attentions
from tests.tiny_models import tiny_gpt2

WORDS = ("time flies like an arrow fruit flies like a banana " * 50).split()
TEXT = " ".join(WORDS[:150])  # ~150 tokens: within every model's full-trace limit but GPT-2's


@pytest.fixture(scope="module")
def gpt2_runner(tmp_path_factory, default_model):
    loaded = tiny_gpt2(tmp_path_factory.mktemp("gpt2"), default_model)
    return ModelSource(DECODER, "tiny-gpt2").load(decoder=lambda name: loaded)


@pytest.fixture(scope="module")
def streamed(tmp_path_factory, request):
    """streamed(which) -> (runner, the streamed input with its layers' inputs kept, the full
    forward's maps), computed once per runner for the module."""
    done = {}

    def get(which: str):
        if which not in done:
            runner = request.getfixturevalue(which)
            result = stream(runner, TEXT, None, lambda layer, maps: None,
                            keep_inputs=tmp_path_factory.mktemp(which))
            done[which] = runner, result, full_attentions(runner, result.encoded)
        return done[which]

    yield get
    for _, result, _ in done.values():
        result.layer_inputs.delete()


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner", "gpt2_runner"])
def test_rows_from_a_layers_kept_input_are_the_full_forwards_rows(which, streamed):
    runner, result, expected = streamed(which)
    count = result.num_tokens
    allowed = allowed_positions(result.encoded, runner.causal)
    for layer in sorted({0, len(expected) // 2, len(expected) - 1}):
        for rows in (range(count // 2, count // 2 + 7), range(count - 5, count)):
            exact = exact_rows(runner, result.encoded, layer, rows, result.layer_inputs)
            np.testing.assert_allclose(exact.weights, expected[layer][:, rows.start:rows.stop],
                                       rtol=0, atol=1e-5)
            heads, width, head_width = exact.query.shape
            assert (heads, width) == (result.num_heads, len(rows)) and exact.layer == layer
            assert exact.key.shape == exact.value.shape == (heads // exact.kv_group, count,
                                                            head_width)
            assert exact.context.shape == exact.query.shape
            np.testing.assert_array_equal(exact.allowed, allowed[rows.start:rows.stop])
            assert exact.rotary == runner.rotary


def test_rows_and_one_key_value_group_together(streamed):
    """The capture's rows with group_of: only the heads sharing head 4's keys, rows only."""
    runner, result, expected = streamed("decoder_runner")
    weights = layer_from_input(runner, result.encoded, 7, result.layer_inputs, group_of=4,
                               rows=slice(40, 60)).weights[0]  # (G, W, K)
    assert weights.shape == (3, 20, result.num_tokens)  # SmolLM2: 3 query heads per key head
    np.testing.assert_allclose(weights.numpy(), expected[7][3:6, 40:60], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="rows needs stop_after"):
        run_streamed(runner.model, runner.model_inputs(result.encoded), lambda *_: None,
                     rows=slice(0, 1))


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner"])
def test_a_window_of_every_layer_is_the_full_maps_window(which, streamed):
    runner, result, expected = streamed(which)
    seen = []
    maps = window_maps(runner, result.encoded, 30, 62, result.layer_inputs,
                       progress=lambda done, total: seen.append((done, total)))
    full = np.stack(expected)  # (L, H, Q, K)
    assert maps.shape == (len(expected), result.num_heads, 32, 32) and maps.dtype == np.float32
    np.testing.assert_allclose(maps, full[:, :, 30:62, 30:62], rtol=0, atol=1e-5)
    assert seen == [(done, len(expected)) for done in range(1, len(expected) + 1)]


@pytest.mark.parametrize("which", ["encoder_runner", "decoder_runner"])
def test_row_arithmetic_from_rows_is_the_traces(which, streamed):
    runner, result, _ = streamed(which)
    trace = runner.run(TEXT)
    assert trace.record.tokens == result.tokens
    layer, rows = len(trace.scaling) - 2, range(60, 90)
    exact = exact_rows(runner, result.encoded, layer, rows, result.layer_inputs)
    for head in sorted({0, 4, result.num_heads - 1}):
        for query in (60, 77, 89):
            mine = row_arithmetic_from_rows(exact, head, query)
            theirs = row_arithmetic(trace, layer, head, query)
            # the walk itself ends where the model did: its weights and its head output
            np.testing.assert_allclose(mine.weights, exact.weights[head, query - 60], atol=1e-5)
            np.testing.assert_allclose(mine.output, mine.model_output, atol=1e-5)
            for field in dataclasses.fields(theirs):
                a, b = getattr(mine, field.name), getattr(theirs, field.name)
                if isinstance(b, np.ndarray):
                    assert a.shape == b.shape and a.dtype == b.dtype, field.name
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=field.name)
                else:
                    assert a == pytest.approx(b, rel=1e-7), field.name


def test_a_bad_layer_head_or_range_says_what_is_wrong(streamed):
    runner, result, expected = streamed("gpt2_runner")
    encoded, kept, count = result.encoded, result.layer_inputs, result.num_tokens
    for layer in (len(expected), -1):
        with pytest.raises(ValueError, match=f"layer {layer} does not exist: the model has 2"):
            exact_rows(runner, encoded, layer, range(0, 3), kept)
    for rows in (range(count - 2, count + 3), range(-1, 2)):
        with pytest.raises(ValueError, match=f"not within the input's {count} tokens"):
            exact_rows(runner, encoded, 0, rows, kept)
    with pytest.raises(ValueError, match="not within"):
        exact_rows(runner, encoded, 0, range(5, 5), kept)
    with pytest.raises(ValueError, match="contiguous range"):
        exact_rows(runner, encoded, 0, range(0, 10, 2), kept)
    with pytest.raises(ValueError, match=f"not within the input's {count} tokens"):
        window_maps(runner, encoded, count - 4, count + 4, kept)
    exact = exact_rows(runner, encoded, 1, range(10, 20), kept)
    with pytest.raises(ValueError, match="query 20 is not among the rows computed"):
        row_arithmetic_from_rows(exact, 0, 20)
    with pytest.raises(ValueError, match="head 2 does not exist"):
        row_arithmetic_from_rows(exact, 2, 12)


def test_other_sessions_forwards_on_the_shared_model_are_untouched_meanwhile(streamed, tmp_path):
    """The server shares one model between sessions: while one thread computes layers from kept
    inputs (the earlier layers skipped) and another streams a long input (every layer's input
    kept), a third session's ordinary forward must give its own numbers, and keep nothing."""
    import threading

    runner, result, full = streamed("decoder_runner")
    other_text = "Mario is short, but he can jump super high."
    expected = runner.run(other_text).record.weights
    failures: list[str] = []
    done = threading.Event()

    def from_inputs():
        while not done.is_set():
            rows = exact_rows(runner, result.encoded, 20, range(100, 104), result.layer_inputs)
            if not np.allclose(rows.weights, full[20][:, 100:104], atol=1e-5):
                failures.append("rows from kept inputs changed")

    def streaming():
        while not done.is_set():
            stream(runner, TEXT, None, lambda layer, maps: None, keep_inputs=tmp_path / "kept")

    def guarded(work):
        def run():
            try:
                work()
            except Exception as error:  # a failure in a thread must fail the test
                failures.append(f"{work.__name__}: {error!r}")
                done.set()
        return run

    workers = [threading.Thread(target=guarded(from_inputs)),
               threading.Thread(target=guarded(streaming))]
    for worker in workers:
        worker.start()
    try:
        for _ in range(12):
            weights = runner.run(other_text).record.weights
            if not np.allclose(weights, expected, atol=1e-5):
                failures.append("another session's forward changed")
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert failures == []
    kept = np.load(tmp_path / "kept" / "layer-5.npy")
    assert kept.shape[0] == len(result.encoded.tokens)  # only the streaming thread's input


def test_a_deep_copy_of_an_installed_model_runs_its_own_layers(gpt2_runner):
    """Each layer's plan-reading forward is bound to its layer: a copy of the model (fine-tuning
    copies an encoder) must run the copy's weights, not the original's."""
    import copy

    import torch

    from models.hooks.install import stacks

    def decoder_layers(model):
        return stacks(model)[0].layers

    model = gpt2_runner.model
    inputs = {"input_ids": torch.tensor([[5, 9, 3, 7, 1]])}
    with torch.inference_mode():
        before = model.base_model(**inputs).last_hidden_state.clone()
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in decoder_layers(twin)[0].parameters():
            parameter.mul_(3.0)
    with torch.inference_mode():
        changed = twin.base_model(**inputs).last_hidden_state
        again = model.base_model(**inputs).last_hidden_state
    assert decoder_layers(twin)[0].forward.__self__ is decoder_layers(twin)[0]
    assert not torch.allclose(changed, before)
    torch.testing.assert_close(again, before, rtol=0, atol=0)

"""Masks, scaling and positions in models/: values a learner is shown, checked against the maths."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from models.scratch.config import EncoderConfig
from models.teaching.masks import padded_batch, with_mask_style
from models.teaching.positions import (cosine_similarity, learned_position_count, learned_positions,
                              sinusoidal_encoding)
from models.teaching.scaling import (dot_product_experiment, entropy_bits, entropy_curve, softmax,
                            softmax_row)
from models.scratch.build import random_encoder
from models.loading.kinds import SCRATCH_RANDOM
from models.loading.source import LoadedSource, ModelSource

TEXT = "The quick brown fox jumps over the lazy dog."


def small_encoder(vocab_size: int, norm_style: str = "pre", seed: int = 0):
    config = EncoderConfig(vocab_size=vocab_size, hidden_size=32, num_heads=4, num_layers=3,
                           intermediate_size=64, dropout=0.0, norm_style=norm_style)
    return random_encoder(config, seed)


@pytest.fixture(scope="module")
def tokenizer(default_model):
    return default_model.tokenizer


@pytest.fixture(scope="module")
def encoder(tokenizer):
    return small_encoder(len(tokenizer))


def numpy_softmax_allowed(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """An independent softmax over the allowed cells of each row (masked cells 0)."""
    shifted = np.where(mask, scores - np.where(mask, scores, -np.inf).max(-1, keepdims=True), 0)
    exp = np.where(mask, np.exp(shifted), 0.0)
    return exp / exp.sum(-1, keepdims=True)


def trace_of(encoder, tokenizer, text: str = TEXT):
    """The app's one run path (capture, trace) on a from-scratch encoder."""
    source = ModelSource(SCRATCH_RANDOM, "test")
    return LoadedSource(source, encoder, tokenizer, 512, "positions").run(text)


@pytest.mark.parametrize("norm_style", ["pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_traced_scores_give_the_encoders_weights(tokenizer, norm_style, causal):
    encoder = with_mask_style(small_encoder(len(tokenizer), norm_style), causal)
    trace = trace_of(encoder, tokenizer)
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    with torch.inference_mode():
        reference = encoder(ids).attentions  # the encoder's own weights, no capture running
    for layer in range(3):
        scores = trace.scores(layer)
        assert scores.shape == trace.record.weights.shape[1:]
        assert trace.masked_softmax_difference(layer) < 1e-5  # numpy against torch's softmax
        expected = numpy_softmax_allowed(scores.astype(np.float64), trace.allowed)
        np.testing.assert_allclose(trace.record.weights[layer], expected, atol=1e-5)
        np.testing.assert_array_equal(trace.record.weights[layer], reference[layer][0].numpy())
    assert trace.query.shape[-1] == 8


def test_pre_norm_trace_reads_the_normalised_input(tokenizer, encoder):
    """Layer 1's input is a residual sum, not normalised: the captured queries are those of the
    normalised input, as the layer computes them, and differ from the unnormalised ones."""
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    with torch.inference_mode():
        output = encoder(ids)
        block = encoder.layers[1]
        query, key, _ = block.attention.project(block.attention_norm(output.hidden_states[1]))
        unnormed, _, _ = block.attention.project(output.hidden_states[1])
    trace = trace_of(encoder, tokenizer)
    np.testing.assert_allclose(trace.query[1], query[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(trace.key[1], key[0].numpy(), atol=1e-5)
    assert np.abs(trace.query[1] - unnormed[0].numpy()).max() > 1e-2
    np.testing.assert_allclose(trace.scores(1), (query @ key.transpose(-2, -1))[0].numpy()
                               / math.sqrt(query.size(-1)), atol=1e-5)


def test_causal_twin_shares_weights_and_zeroes_the_future(tokenizer, encoder):
    twin = with_mask_style(encoder, causal=True)
    assert twin.config.causal and not encoder.config.causal
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(tensor, twin.state_dict()[name]), name
    bidirectional = trace_of(encoder, tokenizer)
    causal = trace_of(twin, tokenizer)
    count = causal.record.num_tokens
    above = np.triu(np.ones((count, count), dtype=bool), k=1)
    assert np.array_equal(causal.allowed, ~above)
    assert np.all(causal.record.weights[..., above] == 0.0)
    assert np.all(bidirectional.record.weights[..., above] > 0.0)
    np.testing.assert_allclose(causal.record.weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(causal.record.weights[:, :, 0, 0] == 1.0)
    # Layer 0 sees the same embeddings, so its raw scores agree; later layers do not.
    np.testing.assert_allclose(causal.scores(0), bidirectional.scores(0), atol=1e-5)
    assert np.abs(causal.scores(2) - bidirectional.scores(2)).max() > 1e-3
    assert causal.record.masks == ("causal",) and bidirectional.record.masks == ()


def test_padded_keys_get_exactly_zero_weight(tokenizer, encoder):
    batch = padded_batch(encoder, tokenizer, ("A cat.", "A much longer sentence about a dog."),
                         "test")
    short, long = batch.lengths
    assert short < long == batch.num_tokens and batch.is_padded
    assert batch.masked[0].tokens[short:] == ("[PAD]",) * (long - short)
    assert np.all(batch.masked[0].weights[..., short:] == 0.0)
    assert batch.masked[0].masks == ("padding",)
    np.testing.assert_allclose(batch.masked[0].weights.sum(-1), 1.0, atol=1e-5)
    # With the mask the short sentence is as if alone; without it, padding takes weight.
    assert batch.alone_difference[0] < 1e-5
    assert batch.unmasked_difference[0] > 1e-2
    assert batch.unmasked_pad_share[0] > 0.1
    assert np.all(batch.unmasked[0].weights[..., short:] > 0.0)
    assert batch.alone_difference[1] < 1e-5 and batch.unmasked_pad_share[1] == 0.0


def test_padded_batch_rejects_an_empty_sentence(tokenizer, encoder):
    with pytest.raises(ValueError):
        padded_batch(encoder, tokenizer, ("A cat.", "  "), "test")


def test_sinusoid_at_position_zero_and_the_formula():
    encoding = sinusoidal_encoding(50, 16)
    assert encoding.shape == (50, 16)
    assert np.all(encoding[0, 0::2] == 0.0) and np.all(encoding[0, 1::2] == 1.0)
    for position, pair in ((1, 0), (7, 3), (49, 7), (20, 5)):
        angle = position / 10000 ** (2 * pair / 16)
        assert encoding[position, 2 * pair] == pytest.approx(math.sin(angle), abs=1e-12)
        assert encoding[position, 2 * pair + 1] == pytest.approx(math.cos(angle), abs=1e-12)
    assert encoding[1, 0] == pytest.approx(math.sin(1.0))
    assert np.abs(encoding).max() <= 1.0
    odd = sinusoidal_encoding(4, 5)
    assert odd.shape == (4, 5) and odd[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError):
        sinusoidal_encoding(0, 8)


def test_sinusoid_similarity_depends_only_on_the_distance():
    similarity = cosine_similarity(sinusoidal_encoding(40, 64))
    np.testing.assert_allclose(np.diag(similarity), 1.0)
    for offset in (1, 5, 17):
        diagonal = np.diag(similarity, k=offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    assert similarity[0, 1] > similarity[0, 20]


def test_learned_positions_of_the_pretrained_model(default_model):
    model = default_model.model
    table = model.embeddings.position_embeddings.weight.detach().numpy()
    positions = learned_positions(model, 24)
    np.testing.assert_array_equal(positions, table[:24])
    assert learned_position_count(model) == 512
    similarity = cosine_similarity(positions)
    np.testing.assert_allclose(np.diag(similarity), 1.0, atol=1e-5)
    np.testing.assert_allclose(similarity, similarity.T, atol=1e-12)
    with pytest.raises(ValueError):
        learned_positions(model, 513)
    with pytest.raises(ValueError):
        learned_positions(nn.Linear(2, 2), 4)
    assert learned_position_count(nn.Linear(2, 2)) == 0


def test_dot_products_grow_and_approach_the_normal_approximation():
    experiment = dot_product_experiment(np.array([1, 10, 100, 1000, 10000]), 2000, seed=0)
    assert np.all(np.diff(experiment.mean_abs) > 0)
    # d = 1: |x y| of two standard normals has mean 2/pi, so the ratio is sqrt(2/pi) ~ 0.80.
    assert experiment.mean_abs[0] == pytest.approx(2 / math.pi, abs=0.05)
    assert experiment.ratio[0] == pytest.approx(math.sqrt(2 / math.pi), abs=0.06)
    assert abs(experiment.ratio[-1] - 1) < 0.06
    assert abs(experiment.ratio[-1] - 1) < abs(experiment.ratio[0] - 1)
    np.testing.assert_allclose(experiment.approximation, np.sqrt(2 * experiment.dimensions / math.pi))


def test_entropy_and_softmax_basics():
    assert entropy_bits(np.full(8, 1 / 8)) == pytest.approx(3.0)
    assert entropy_bits(np.array([1.0, 0.0, 0.0])) == 0.0
    weights = softmax(np.array([1000.0, 0.0, -1000.0]))
    assert np.all(np.isfinite(weights)) and weights[0] == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_scaling_keeps_the_softmax_from_saturating(seed):
    large = softmax_row(1024, 8, seed)
    assert large.scaled_entropy > large.unscaled_entropy + 1.0
    assert large.unscaled_entropy < 1.0 < large.scaled_entropy
    np.testing.assert_allclose(large.scaled_scores * 32, large.unscaled_scores)
    tiny = softmax_row(1, 8, seed)
    assert tiny.scaled_entropy == pytest.approx(tiny.unscaled_entropy)
    assert large.max_entropy == 3.0


def test_entropy_curve_falls_unscaled_and_stays_scaled():
    curve = entropy_curve(np.array([1, 16, 256, 4096]), 8, 100, seed=0)
    assert curve.unscaled[0] == pytest.approx(curve.scaled[0])
    assert np.all(np.diff(curve.unscaled) < 0)
    assert curve.unscaled[-1] < 0.3 and curve.scaled[-1] > 2.0
    assert np.all(np.abs(curve.scaled - curve.scaled[0]) < 0.3)

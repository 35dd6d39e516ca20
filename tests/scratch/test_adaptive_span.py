"""Adaptive attention span: the soft mask, the learnable module, applying a span to a record,
the training script's output, the figures and the page."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from models.scratch.adaptive_span import (
    SpanConfig, SpanMultiHeadAttention, apply_span, head_span_mask, ramp_curve, renormalise,
    soft_span_mask, span_distances,
)
from models.scratch.attention import MultiHeadAttention, causal_mask
from models.scratch.config import EncoderConfig
from models.hooks.record import AttentionRecord
from models.teaching.span_training import (
    LEARNED_SPANS_PATH, LearnedSpans, SpanTrainingConfig, load_learned_spans, train_span_model,
)
from tests.app_support import array, figures, run_page, texts
from viz.span import learned_spans_figure, ramp_figure, removed_mass_figure

Z, R = 5.0, 4.0
T, H, L = 7, 3, 2


def test_mask_is_one_inside_zero_past_the_ramp_and_linear_between():
    distance = torch.arange(0.0, 15.0, 0.25)
    mask = soft_span_mask(distance, torch.tensor(Z), R)
    assert torch.all(mask[distance <= Z] == 1.0)
    assert torch.all(mask[distance >= Z + R] == 0.0)
    on_ramp = (distance > Z) & (distance < Z + R)
    torch.testing.assert_close(mask[on_ramp], (R + Z - distance[on_ramp]) / R)
    assert float(soft_span_mask(torch.tensor(Z + R / 2), torch.tensor(Z), R)) == 0.5
    assert torch.all(mask.diff() <= 0)  # monotone non-increasing in the distance


def test_gradient_with_respect_to_z_is_nonzero_only_on_the_ramp():
    for x in np.arange(0.0, 12.0, 0.5):
        span = torch.tensor(Z, requires_grad=True)
        soft_span_mask(torch.tensor(float(x)), span, R).backward()
        if x in (Z, Z + R):  # the two corners: either one-sided slope is a valid gradient
            assert float(span.grad) in (0.0, 1 / R)
        else:
            assert float(span.grad) == pytest.approx(1 / R if Z < x < Z + R else 0.0), x


def test_distances_causal_and_symmetric():
    distance, inside = span_distances(4, causal=True)
    assert distance[3, 0] == 3 and distance[1, 1] == 0
    assert not inside[0, 1] and inside[1, 0]
    distance, inside = span_distances(4, causal=False)
    assert distance[0, 3] == 3 == distance[3, 0] and bool(inside.all())
    mask = head_span_mask(torch.tensor([0.0, 10.0]), 1.0, 4, causal=True)  # (H, Q, K)
    assert torch.all(mask.triu(1) == 0)
    torch.testing.assert_close(mask[0], torch.eye(4))  # z = 0, R = 1: only the token itself


def test_a_row_the_mask_empties_becomes_zeros_not_nan():
    weights = torch.tensor([[0.0, 0.0, 1.0], [0.2, 0.3, 0.5]], requires_grad=True)
    soft = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    result = renormalise(weights, soft)
    torch.testing.assert_close(result, torch.tensor([[0.0, 0.0, 0.0], [0.4, 0.6, 0.0]]))
    result.sum().backward()
    assert torch.isfinite(weights.grad).all()


def _pair(causal: bool, span: float):
    config = EncoderConfig(vocab_size=10, hidden_size=12, num_heads=H, num_layers=1, dropout=0.0)
    torch.manual_seed(0)
    plain = MultiHeadAttention(config).eval()
    spanned = SpanMultiHeadAttention(
        config, SpanConfig(num_heads=H, max_span=20.0, ramp=2.0, causal=causal, initial_span=span)).eval()
    spanned.load_state_dict(plain.state_dict(), strict=False)
    return plain, spanned


@pytest.mark.parametrize("causal", [False, True])
def test_a_span_at_least_the_sequence_length_leaves_attention_unchanged(causal):
    plain, spanned = _pair(causal, span=float(T))
    x = torch.randn(2, T, 12)
    mask = causal_mask(T) if causal else None
    expected_output, expected_weights = plain(x, mask)
    output, weights = spanned(x, mask)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(output, expected_output)


def test_a_short_span_changes_weights_and_rows_still_sum_to_one():
    _, spanned = _pair(causal=False, span=1.0)
    _, weights = spanned(torch.randn(2, T, 12))
    assert weights.shape == (2, H, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, T))
    assert torch.all(weights[..., 0, 4:] == 0)  # distance >= z + R = 3 is cut


def test_z_is_clamped_to_zero_and_the_max_span():
    _, spanned = _pair(causal=True, span=3.0)
    with torch.no_grad():
        spanned.span.copy_(torch.tensor([-3.0, 5.0, 100.0]))
    assert spanned.spans().tolist() == [0.0, 5.0, 20.0]
    spanned.clamp_()
    assert spanned.span.tolist() == [0.0, 5.0, 20.0]


def test_span_penalty_is_lambda_times_mean_z_and_has_a_gradient():
    config = EncoderConfig(vocab_size=10, hidden_size=8, num_heads=4, num_layers=1)
    module = SpanMultiHeadAttention(config, SpanConfig(num_heads=4, max_span=10.0, penalty=0.5))
    with torch.no_grad():
        module.span.copy_(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    penalty = module.span_penalty()
    assert penalty.item() == pytest.approx(0.5 * 3.0)
    penalty.backward()
    torch.testing.assert_close(module.span.grad, torch.full((4,), 0.5 / 4))


@pytest.mark.parametrize("bad", [dict(ramp=0.0), dict(ramp=-1.0), dict(max_span=0.0),
                                 dict(penalty=-0.1), dict(initial_span=40.0),
                                 dict(initial_span=-1.0), dict(num_heads=0)])
def test_bad_span_config_raises(bad):
    with pytest.raises(ValueError):
        SpanConfig(**bad)


def test_mismatched_heads_and_bad_training_config_raise():
    with pytest.raises(ValueError, match="heads"):
        SpanMultiHeadAttention(EncoderConfig(vocab_size=10, hidden_size=8, num_heads=4),
                               SpanConfig(num_heads=2))
    with pytest.raises(ValueError):
        SpanTrainingConfig(steps=0)
    with pytest.raises(ValueError):
        SpanTrainingConfig(ramp=0.0)


def _record(weights: np.ndarray, masks=()) -> AttentionRecord:
    return AttentionRecord(tokens=tuple(f"t{i}" for i in range(weights.shape[-1])),
                           weights=weights, source="test", masks=masks)


def test_apply_span_renormalises_and_reports_removed_mass():
    uniform = np.full((L, H, T, T), 1.0 / T, dtype=np.float32)
    applied = apply_span(_record(uniform), 1.0, 1.0, causal=False)
    distance = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    kept = np.clip((1.0 + 1.0 - distance) / 1.0, 0, 1)  # 1 at distance 0 and 1, else 0
    np.testing.assert_allclose(applied.record.weights[1, 2], kept / kept.sum(-1, keepdims=True),
                               rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(applied.removed[0, 0], 1 - kept.sum(-1) / T, rtol=1e-6, atol=1e-5)
    assert applied.record.masks == ("span",)
    assert applied.mean_removed(0, 0) == pytest.approx(float(np.mean(1 - kept.sum(-1) / T)))
    per_head = apply_span(_record(uniform), [0.0, 2.0, 10.0], 1.0, causal=True)
    assert per_head.record.masks == ("causal", "span")
    assert np.all(np.triu(per_head.record.weights[0, 2], 1) == 0)
    np.testing.assert_allclose(per_head.record.weights[:, 0], np.broadcast_to(np.eye(T), (L, T, T)))
    np.testing.assert_allclose(per_head.removed[:, 2, -1], 0.0, atol=1e-5)  # last row: 0 future keys
    with pytest.raises(ValueError):
        apply_span(_record(uniform), [1.0, 2.0], 1.0, causal=False)
    with pytest.raises(ValueError):
        apply_span(_record(uniform), -1.0, 1.0, causal=False)


def test_apply_span_at_least_the_length_changes_nothing():
    weights = np.random.default_rng(0).random((L, H, T, T)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    applied = apply_span(_record(weights), float(T), 0.5, causal=False)
    np.testing.assert_allclose(applied.record.weights, weights, rtol=1e-6, atol=1e-5)
    assert np.all(applied.removed < 1e-6) and not applied.emptied.any()


def test_a_row_with_all_its_weight_outside_the_span_is_emptied():
    weights = np.zeros((1, 1, T, T), dtype=np.float32)
    weights[..., 0] = 1.0  # every query looks only at the first token
    applied = apply_span(_record(weights), 1.0, 1.0, causal=True)
    assert applied.emptied_rows(0, 0) == list(range(2, T))
    assert np.all(applied.record.weights[0, 0, 2:] == 0)
    np.testing.assert_allclose(applied.removed[0, 0], [0, 0] + [1.0] * (T - 2))
    np.testing.assert_allclose(applied.record.weights[0, 0, :2].sum(-1), 1.0)


def test_ramp_curve_and_figure_pass_through_the_half_point():
    curve = ramp_curve(3.0, 2.0, 8.0)
    assert curve.values[list(curve.distances).index(4.0)] == 0.5
    figure = ramp_figure(curve.distances, curve.values, 3.0, 2.0)
    line = figure.data[0]
    assert line.y[list(line.x).index(4.0)] == 0.5
    assert (figure.data[1].x[0], figure.data[1].y[0]) == (4.0, 0.5)


def test_removed_and_learned_span_figures_show_the_values():
    removed = np.array([0.0, 0.25, 1.0])
    figure = removed_mass_figure(("a", "<b>", "c"), removed, np.array([False, False, True]), 0, 1)
    np.testing.assert_allclose(figure.data[0].y, [0.0, 25.0, 100.0])
    assert figure.data[0].x[1] == "&lt;b&gt; #1"
    spans = np.array([[1.0, 20.0], [0.0, 3.5]])
    figure = learned_spans_figure(spans, 32.0, 4.0, [[{"first": 0.5}] * 2] * 2)
    bars = [trace for trace in figure.data if trace.showlegend is not False]
    np.testing.assert_allclose([list(trace.y) for trace in bars], spans.T)
    assert "first 50%" in bars[0].customdata[0]


def test_short_training_lowers_the_loss_and_moves_z():
    config = SpanTrainingConfig(seq_len=12, steps=80, log_every=10, hidden_size=32,
                                intermediate_size=64, max_span=12.0)
    calls = []
    model, result = train_span_model(config, lambda step, total, loss: calls.append((step, total)))
    assert calls[-1] == (80, 80) and [c[0] for c in calls] == list(range(10, 81, 10))
    assert result.losses[-1] < 0.8 * result.losses[0]
    assert result.span_array.shape == (2, 4)
    assert np.all(result.span_array < config.max_span)  # every head moved off its start at S
    np.testing.assert_allclose(model.spans().detach().numpy(), result.span_array, atol=1e-3)


def test_shipped_spans_match_the_format_the_page_reads():
    text = LEARNED_SPANS_PATH.read_text(encoding="utf-8")
    assert set(json.loads(text)) == {"format", "spans", "loss_steps", "losses", "accuracy",
                                     "ablation", "seconds", "settings"}
    result = load_learned_spans()
    assert LearnedSpans.from_json(result.to_json()) == result
    assert result.settings == SpanTrainingConfig()  # the shipped file used the defaults
    spans = result.span_array
    assert spans.shape == (result.settings.num_layers, result.settings.num_heads)
    assert spans.max() > 15 and spans.min() < 1  # short and long heads
    assert min(result.accuracy.values()) > 0.95
    assert result.seconds < 60
    with pytest.raises(ValueError):
        dataclasses.replace(result, spans=((1.0,),))


def _figure(at, title_start: str) -> dict:
    matches = [f for f in figures(at) if f["layout"]["title"]["text"].startswith(title_start)]
    assert len(matches) == 1, title_start
    return matches[0]


def test_page_ramp_head_and_learned_spans():
    at = run_page("adaptive_span", state={"span_z": 2.0, "span_ramp": 4.0})
    line = _figure(at, "Soft span mask")["data"][0]
    x, y = array(line["x"]), array(line["y"])
    assert y[np.flatnonzero(x == 4.0)[0]] == 0.5
    before = array(_figure(at, "Before")["data"][0]["z"])
    after = array(_figure(at, "After the span")["data"][0]["z"])
    distance = np.abs(np.arange(len(before))[:, None] - np.arange(len(before))[None, :])
    kept = before * np.clip((4.0 + 2.0 - distance) / 4.0, 0, 1)  # symmetric: MiniLM is an encoder
    np.testing.assert_allclose(after, kept / kept.sum(-1, keepdims=True), atol=1e-5)
    removed = array(_figure(at, "Attention mass removed")["data"][0]["y"])
    np.testing.assert_allclose(removed, 100 * (1 - kept.sum(-1)), atol=1e-3)
    assert removed.max() > 1
    assert at.get("metric")[0].value == f"{np.mean(1 - kept.sum(-1)):.1%}"
    learned = _figure(at, "Learned span")
    shown = [array(t["y"]) for t in learned["data"] if t.get("showlegend") is not False]
    np.testing.assert_allclose(np.array(shown).T, load_learned_spans().span_array)
    assert "distance 0, where the mask is always 1" in texts(at)


def test_page_long_span_keeps_everything_and_causal_form_cuts_the_future():
    at = run_page("adaptive_span", state={"span_z": 64.0, "span_ramp": 1.0})
    np.testing.assert_allclose(array(_figure(at, "After the span")["data"][0]["z"]),
                               array(_figure(at, "Before")["data"][0]["z"]), atol=1e-5)
    assert at.get("metric")[0].value == "0.0%"
    at = run_page("adaptive_span", state={"span_z": 64.0, "span_form": "causal"})
    after = array(_figure(at, "After the span")["data"][0]["z"])
    assert np.all(np.triu(after, 1) == 0)
    assert float(at.get("metric")[0].value.rstrip("%")) > 10
    assert "removed mass includes all the weight it gave to later tokens" in texts(at)


def test_page_per_head_spans_apply_to_their_own_head():
    heads = {f"span_z_head_{h}": 64.0 for h in range(12)}
    at = run_page("adaptive_span", state={"span_per_head": True, "span_ramp": 0.5,
                                          **heads, "span_z_head_0": 0.0})
    np.testing.assert_allclose(array(_figure(at, "After the span z = 0")["data"][0]["z"]),
                               np.eye(len(array(_figure(at, "Before")["data"][0]["z"]))))
    assert at.get("metric")[0].value != "0.0%"
    at = run_page("adaptive_span", state={"span_per_head": True, "span_ramp": 0.5, "span_head": 1,
                                          **heads, "span_z_head_0": 0.0})
    assert at.get("metric")[0].value == "0.0%"  # head 1 keeps its span of 64

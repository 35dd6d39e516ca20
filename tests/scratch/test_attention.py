"""The attention function and multi-head attention against PyTorch's own implementations."""

import pytest
import torch
import torch.nn.functional as F

from models.scratch.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder

B, H, T, DH = 2, 3, 7, 8


@pytest.fixture
def qkv():
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, T, DH, generator=generator) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch_sdpa(qkv, causal):
    query, key, value = qkv
    mask = causal_mask(T) if causal else None
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    assert output.shape == (B, H, T, DH)
    assert weights.shape == (B, H, T, T)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))


def test_causal_weights_are_exactly_zero_above_diagonal(qkv):
    _, weights = scaled_dot_product_attention(*qkv, mask=causal_mask(T))
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    assert torch.all(weights[..., upper] == 0.0)
    assert torch.all(weights[..., ~upper] > 0.0)


def test_fully_masked_row_gets_zero_weights_not_nan(qkv):
    mask = torch.ones(T, T, dtype=torch.bool)
    mask[2] = False
    output, weights = scaled_dot_product_attention(*qkv, mask=mask)
    assert torch.all(weights[..., 2, :] == 0.0)
    assert torch.all(output[..., 2, :] == 0.0)
    assert torch.isfinite(output).all()


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_matches_torch_multihead_attention(causal):
    config = EncoderConfig(hidden_size=24, num_heads=4, dropout=0.0)
    ours = MultiHeadAttention(config).eval()
    reference = torch.nn.MultiheadAttention(24, 4, batch_first=True).eval()
    with torch.no_grad():
        ours.query.weight.copy_(reference.in_proj_weight[:24])
        ours.key.weight.copy_(reference.in_proj_weight[24:48])
        ours.value.weight.copy_(reference.in_proj_weight[48:])
        ours.query.bias.copy_(reference.in_proj_bias[:24])
        ours.key.bias.copy_(reference.in_proj_bias[24:48])
        ours.value.bias.copy_(reference.in_proj_bias[48:])
        ours.output.weight.copy_(reference.out_proj.weight)
        ours.output.bias.copy_(reference.out_proj.bias)
    x = torch.randn(B, T, 24, generator=torch.Generator().manual_seed(1))
    mask = causal_mask(T) if causal else None
    output, weights = ours(x, mask)
    expected, expected_weights = reference(
        x, x, x, attn_mask=None if mask is None else ~mask,  # torch: True = blocked
        need_weights=True, average_attn_weights=False,
    )
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_style", ["pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_encoder_shapes_and_rows(norm_style, causal):
    config = EncoderConfig(vocab_size=50, max_positions=16, hidden_size=32, num_heads=4,
                           num_layers=3, intermediate_size=64, norm_style=norm_style,
                           causal=causal)
    encoder = Encoder(config).eval()
    input_ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    output = encoder(input_ids)
    assert output.last_hidden_state.shape == (2, 9, 32)
    assert len(output.hidden_states) == 4
    assert len(output.attentions) == 3
    upper = torch.triu(torch.ones(9, 9, dtype=torch.bool), diagonal=1)
    for weights in output.attentions:
        assert weights.shape == (2, 4, 9, 9)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 9))
        if causal:
            assert torch.all(weights[..., upper] == 0.0)
        else:
            assert torch.all(weights[..., upper] > 0.0)


def test_pre_and_post_norm_compute_different_things():
    common = dict(vocab_size=50, max_positions=16, hidden_size=32, num_heads=4, num_layers=2,
                  intermediate_size=64)
    torch.manual_seed(3)
    pre = Encoder(EncoderConfig(norm_style="pre", **common)).eval()
    post = Encoder(EncoderConfig(norm_style="post", **common)).eval()
    post.load_state_dict(pre.state_dict())
    input_ids = torch.arange(8).unsqueeze(0)
    assert not torch.allclose(pre(input_ids).last_hidden_state, post(input_ids).last_hidden_state)


def test_padding_keys_get_zero_weight():
    config = EncoderConfig(vocab_size=50, max_positions=16, hidden_size=16, num_heads=2,
                           num_layers=1, intermediate_size=32)
    encoder = Encoder(config).eval()
    input_ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    weights = encoder(input_ids, attention_mask=attention_mask).attentions[0]
    assert torch.all(weights[1, :, :, 3:] == 0.0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5))


@pytest.mark.parametrize("bad, message", [
    (dict(hidden_size=30, num_heads=4), "divisible"),
    (dict(num_heads=0), "num_heads"),
    (dict(num_layers=-1), "num_layers"),
    (dict(dropout=1.5), "dropout"),
    (dict(norm_style="middle"), "norm_style"),
    (dict(layer_norm_eps=0.0), "layer_norm_eps"),
    (dict(hidden_size=12.5), "hidden_size"),
])
def test_bad_config_raises_clear_error(bad, message):
    with pytest.raises(ValueError, match=message):
        EncoderConfig(**bad)


def test_too_many_tokens_for_positions_raises():
    config = EncoderConfig(vocab_size=10, max_positions=4, hidden_size=8, num_heads=2,
                           num_layers=1, intermediate_size=8)
    with pytest.raises(ValueError, match="exceed the 4 learned positions"):
        Encoder(config)(torch.zeros(1, 5, dtype=torch.long))

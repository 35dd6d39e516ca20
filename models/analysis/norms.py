"""Norm-based attention (Kobayashi et al. 2020, "Attention is Not Only a Weight").

A head adds sum_j alpha_ij f(x_j) to token i, where f(x_j) = v_j W_O^h is key j's value vector
sent through the head's slice of the output projection (the bias of W_O is shared by every key
and left out). The norm ||alpha_ij f(x_j)|| = alpha_ij ||f(x_j)|| says how much key j really moves
token i: a large weight on a key whose transformed value is short moves almost nothing.

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Q/K positions,
D model width, Dh head width.
"""

from __future__ import annotations

import numpy as np
import torch

from models.hooks.capture import CapturedRun, LayerCapture


def transformed_value_norms(layer: LayerCapture) -> torch.Tensor:
    """(B, H, K): ||v_j W_O^h|| for every head h and key j."""
    if layer.output_weight is None:
        raise ValueError("This model's output projection could not be read, so norm-based "
                         "attention cannot be computed.")
    batch, kv_heads, tokens, head_width = layer.value.shape
    heads = layer.weights.size(1)
    value = layer.value.repeat_interleave(heads // kv_heads, dim=1)  # (B, H, K, Dh)
    output = layer.output_weight.to(value.dtype)  # (D, H*Dh)
    per_head = output.view(output.size(0), heads, head_width).permute(1, 2, 0)  # (H, Dh, D)
    transformed = torch.einsum("bhkd,hde->bhke", value, per_head)  # (B, H, K, D)
    return transformed.norm(dim=-1)  # (B, H, K)


def head_grams(output_weight: torch.Tensor, heads: int) -> torch.Tensor:
    """(H, Dh, Dh): W_O^h W_O^h^T per head, so ||v W_O^h||^2 = v G_h v^T. It depends only on the
    weights, so it is kept on the weight's tensor (the capture hands out one view per module)
    and recomputed when the weights change in place (fine-tuning bumps the tensor's version)."""
    stamp = (output_weight._version, heads)
    kept = getattr(output_weight, "_explorer_grams", None)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    per_head = output_weight.view(output_weight.size(0), heads, -1).permute(1, 2, 0)  # (H, Dh, D)
    gram = per_head @ per_head.transpose(1, 2)  # (H, Dh, Dh)
    output_weight._explorer_grams = (stamp, gram)
    return gram


def value_norms(layer: LayerCapture) -> torch.Tensor:
    """(B, H, K) ||v_j W_O^h||, from the per-head Gram matrices (cheap for long inputs)."""
    if layer.output_weight is None:
        raise ValueError("This model's output projection could not be read, so norm-based "
                         "attention cannot be computed.")
    heads = layer.weights.size(1)
    value = layer.value.repeat_interleave(heads // layer.value.size(1), dim=1)  # (B, H, K, Dh)
    gram = head_grams(layer.output_weight, heads).to(value.dtype)  # (H, Dh, Dh)
    squared = ((value @ gram) * value).sum(dim=-1)  # (B, H, K): v G v^T per key
    return squared.clamp(min=0).sqrt()


def norm_weights(layer: LayerCapture) -> torch.Tensor:
    """(B, H, Q, K): ||alpha_ij f(x_j)|| for every head of one layer."""
    return layer.weights * transformed_value_norms(layer)[:, :, None, :]  # (B, H, Q, K)


def norm_maps(run: CapturedRun) -> np.ndarray:
    """(L, H, Q, K) float32: the norm-based map of every layer and head of batch item 0."""
    return np.stack([norm_weights(layer)[0].float().numpy() for layer in run.layers])

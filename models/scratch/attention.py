"""Scaled dot-product attention and multi-head attention, returning their weights explicitly.

The pure functions compute attention one step at a time (scores, masked softmax, weighted sum);
`MultiHeadAttention` composes them and, inside a model that names its hook points (the
from-scratch encoder and encoder-decoder), lets a run read or edit each step
(models/hooks/points.py: hook_q, hook_k, hook_v, hook_scores, hook_pattern, hook_z).
"""

from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from models.hooks.run import hook, note_scaling
from models.scratch.config import EncoderConfig


def attention_scores(query: torch.Tensor, key: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """(..., Q, K) q.k / sqrt(d_k); where the bool `mask` is False (may not attend), the
    dtype's lowest value."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., Q, K)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The softmax over keys; a row whose keys are all masked gets all-zero weights (rather than
    the uniform row a softmax over equal fills would give)."""
    weights = F.softmax(scores, dim=-1)  # (..., Q, K)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning `(output, weights)`.

    query (..., Q, Dh), key and value (..., K, Dh). `mask` is bool and broadcasts to
    (..., Q, K) with True = may attend.
    """
    weights = masked_softmax(attention_scores(query, key, mask), mask)  # (..., Q, K)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., Q, Dh), (..., Q, K)


def causal_mask(num_tokens: int, device: torch.device | None = None) -> torch.Tensor:
    """Lower-triangular bool mask (Q, K): query i may attend to keys 0..i."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).tril()


def _point(prefix: str | None, name: str, value: torch.Tensor) -> torch.Tensor:
    return value if prefix is None else hook(f"{prefix}.{name}", value)


class MultiHeadAttention(nn.Module):
    """H heads of scaled dot-product attention over one sequence, then an output projection.

    `hook_prefix` ("blocks.3.attn", set by the model that holds it) names its hook points; a
    module on its own has none."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.head_size = config.head_size
        self.dropout_p = config.dropout
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.hook_prefix: str | None = None

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        x = x.view(batch, tokens, self.num_heads, self.head_size)  # (B, T, H, Dh)
        return x.transpose(1, 2)  # (B, H, T, Dh)

    def project(
        self, x: torch.Tensor, memory: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-head query vectors from x (B, H, Q, Dh), key and value vectors from `memory`
        (B, H, K, Dh), or from x itself when there is no memory (self-attention)."""
        source = x if memory is None else memory
        return (self.split_heads(self.query(x)), self.split_heads(self.key(source)),
                self.split_heads(self.value(source)))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D), mask bool broadcasting to (B, H, Q, K). Returns (output (B, T, D),
        weights (B, H, Q, K)). With `memory` (B, K, D), keys and values come from it
        (cross-attention: the decoder's queries read the encoder's output)."""
        prefix = self.hook_prefix
        query, key, value = self.project(x, memory)  # (B, H, Q, Dh), (B, H, K, Dh) x 2
        if prefix is not None:
            note_scaling(prefix, 1 / math.sqrt(self.head_size))
        query = _point(prefix, "hook_q", query)
        key = _point(prefix, "hook_k", key)
        value = _point(prefix, "hook_v", value)
        scores = _point(prefix, "hook_scores", attention_scores(query, key, mask))  # (B, H, Q, K)
        weights = masked_softmax(scores, mask)  # (B, H, Q, K)
        if self.training and self.dropout_p > 0.0:
            weights = F.dropout(weights, p=self.dropout_p)
        weights = _point(prefix, "hook_pattern", weights)
        context = (weights @ value).transpose(1, 2)  # (B, T, H, Dh)
        context = _point(prefix, "hook_z", context)
        batch, tokens, _, _ = context.shape
        merged = context.reshape(batch, tokens, -1)  # (B, T, D)
        return self.output(merged), weights

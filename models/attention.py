"""Scaled dot-product attention and multi-head attention, returning their weights explicitly."""

from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from models.capture import active as active_capture, blocked_edges, edit_and_record
from models.config import EncoderConfig


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning `(output, weights)`.

    query (..., Q, Dh), key and value (..., K, Dh). `mask` is bool and broadcasts to
    (..., Q, K) with True = may attend. A row whose keys are all masked gets all-zero weights
    (rather than the uniform row a softmax over equal fills would give).
    """
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Q, K)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)  # (..., Q, K)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    output = weights @ value  # (..., Q, Dh)
    return output, weights


def causal_mask(num_tokens: int, device: torch.device | None = None) -> torch.Tensor:
    """Lower-triangular bool mask (Q, K): query i may attend to keys 0..i."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).tril()


class MultiHeadAttention(nn.Module):
    """H heads of scaled dot-product attention over one sequence, then an output projection."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.head_size = config.head_size
        self.dropout_p = config.dropout
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)

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
        """x (B, T, D), mask bool broadcasting to (B, H, Q, K). Returns (output (B, T, D), weights (B, H, Q, K)).

        With `memory` (B, K, D), keys and values come from it (cross-attention: the decoder's
        queries read the encoder's output); the capture then stays out of it.
        """
        query, key, value = self.project(x, memory)  # (B, H, Q, Dh), (B, H, K, Dh) x 2
        dropout_p = self.dropout_p if self.training else 0.0
        capture = active_capture() if memory is None else None
        if capture is not None:
            blocked = blocked_edges(capture.count)  # (Q, K) knockout edges, if any
            if blocked is not None:
                mask = ~blocked if mask is None else mask & ~blocked
        heads, weights = scaled_dot_product_attention(query, key, value, mask, dropout_p)
        context = heads.transpose(1, 2)  # (B, T, H, Dh)
        if capture is not None:
            context = edit_and_record(capture, query, key, value, weights, context,
                                      self.head_size ** -0.5, self.output.weight.detach())
        batch, tokens, _, _ = context.shape
        merged = context.reshape(batch, tokens, -1)  # (B, T, D)
        return self.output(merged), weights

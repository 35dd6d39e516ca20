"""The from-scratch encoder: embeddings, then a stack of attention + feed-forward layers."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.attention import MultiHeadAttention, causal_mask
from models.config import EncoderConfig
from models.embeddings import Embeddings
from models.feed_forward import FeedForward


@dataclass(frozen=True)
class EncoderOutput:
    last_hidden_state: torch.Tensor  # (B, T, D)
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 of (B, T, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...]  # L of (B, H, Q, K)
    mask: torch.Tensor | None  # bool (B, 1, Q, K), True = may attend


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each wrapped in a residual connection and a LayerNorm.

    Pre-norm: x + sublayer(norm(x)). Post-norm (BERT): norm(x + sublayer(x)).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.pre_norm = config.norm_style == "pre"
        self.attention = MultiHeadAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> (x (B, T, D), weights (B, H, Q, K))."""
        if self.pre_norm:
            attended, weights = self.attention(self.attention_norm(x), mask)
            x = x + self.dropout(attended)
            x = x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        else:
            attended, weights = self.attention(x, mask)
            x = self.attention_norm(x + self.dropout(attended))
            x = self.feed_forward_norm(x + self.dropout(self.feed_forward(x)))
        return x, weights


class Encoder(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_layers))

    def build_mask(
        self, attention_mask: torch.Tensor | None, num_tokens: int, device: torch.device
    ) -> torch.Tensor | None:
        """Combine padding (attention_mask (B, K), 1 = real token) and the optional causal mask."""
        mask = None
        if attention_mask is not None:
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, K)
        if self.config.causal:
            causal = causal_mask(num_tokens, device)[None, None]  # (1, 1, Q, K)
            mask = causal if mask is None else mask & causal
        if mask is not None:
            mask = mask.expand(-1, 1, num_tokens, num_tokens)  # (B, 1, Q, K)
        return mask

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> EncoderOutput:
        """input_ids (B, T); token_type_ids (B, T); attention_mask (B, T) with 1 = real token."""
        mask = self.build_mask(attention_mask, input_ids.size(1), input_ids.device)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, D)
        hidden_states = [x]
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask)
            hidden_states.append(x)
            attentions.append(weights)
        return EncoderOutput(x, tuple(hidden_states), tuple(attentions), mask)

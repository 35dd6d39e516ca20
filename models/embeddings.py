"""Token, learned position and segment embeddings, summed, normalised and dropped out."""

from __future__ import annotations

import torch
from torch import nn

from models.config import EncoderConfig


class Embeddings(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.positions = nn.Embedding(config.max_positions, config.hidden_size)
        self.segments = (
            nn.Embedding(config.type_vocab_size, config.hidden_size)
            if config.type_vocab_size > 0 else None
        )
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input_ids (B, T) -> embeddings (B, T, D)."""
        num_tokens = input_ids.size(1)
        if num_tokens > self.positions.num_embeddings:
            raise ValueError(
                f"{num_tokens} tokens exceed the {self.positions.num_embeddings} learned positions"
            )
        position_ids = torch.arange(num_tokens, device=input_ids.device).unsqueeze(0)  # (1, T)
        x = self.tokens(input_ids) + self.positions(position_ids)  # (B, T, D)
        if self.segments is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.segments(token_type_ids)
        return self.dropout(self.norm(x))

"""Token, learned position and segment embeddings, summed, normalised and dropped out."""

from __future__ import annotations

import torch
from torch import nn

from models.hooks import points
from models.hooks.run import hook
from models.scratch.config import EncoderConfig


class Embeddings(nn.Module):
    """`hook_prefix` ("" for the encoder, "encoder"/"decoder" in the encoder-decoder, None on
    its own) names its hook points: hook_token_embed, hook_pos_embed, hook_segment_embed."""

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
        self.hook_prefix: str | None = None

    def _point(self, name: str, value: torch.Tensor) -> torch.Tensor:
        if self.hook_prefix is None:
            return value
        return hook(f"{self.hook_prefix}.{name}" if self.hook_prefix else name, value)

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
        x = (self._point(points.TOKEN_EMBED, self.tokens(input_ids))
             + self._point(points.POS_EMBED, self.positions(position_ids)))  # (B, T, D)
        if self.segments is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self._point(points.SEGMENT_EMBED, self.segments(token_type_ids))
        return self.dropout(self.norm(x))

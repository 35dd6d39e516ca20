"""Position-wise feed-forward block."""

from __future__ import annotations

import torch
from torch import nn

from models.config import EncoderConfig


class FeedForward(nn.Module):
    """Linear D -> F, GELU, Linear F -> D, applied to every position on its own."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.expand = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = nn.GELU()
        self.contract = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.contract(self.activation(self.expand(x)))  # (B, T, D)

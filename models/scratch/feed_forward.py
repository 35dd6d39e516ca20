"""Position-wise feed-forward block."""

from __future__ import annotations

import torch
from torch import nn

from models.hooks.run import hook
from models.scratch.config import EncoderConfig


class FeedForward(nn.Module):
    """Linear D -> F, GELU, Linear F -> D, applied to every position on its own.

    `hook_prefix` ("blocks.3.mlp", set by the model that holds it) names its hook points
    hook_pre (the expanded vectors) and hook_post (after the activation)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.expand = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = nn.GELU()
        self.contract = nn.Linear(config.intermediate_size, config.hidden_size)
        self.hook_prefix: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prefix = self.hook_prefix
        expanded = self.expand(x)  # (B, T, F)
        if prefix is not None:
            expanded = hook(f"{prefix}.hook_pre", expanded)
        activated = self.activation(expanded)  # (B, T, F)
        if prefix is not None:
            activated = hook(f"{prefix}.hook_post", activated)
        return self.contract(activated)  # (B, T, D)

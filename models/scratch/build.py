"""The from-scratch encoder with seeded random weights (it runs through models/loading/source.py)."""

from __future__ import annotations

import torch

from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder


def random_encoder(config: EncoderConfig, seed: int) -> Encoder:
    """A from-scratch encoder with weights drawn from a seeded generator, in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = Encoder(config)
    return encoder.eval()

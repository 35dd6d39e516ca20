"""Rotary position embeddings read off a running model: the angle each query/key pair turns by.

A rotary model (Llama, SmolLM2, ...) adds no position vector. Instead, before q.k, every pair of
dimensions (i, i + Dh/2) of q and k is rotated by the angle p * theta_i at position p, so q.k of
two tokens depends on how far apart they are. The angles come from the model's own rotary module
(its cos/sin tables), so any rope scaling the model uses is included.

Dimensions: P positions, Dh head width, Dh/2 rotated pairs.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def rotary_module(model: nn.Module) -> nn.Module | None:
    """The model's rotary embedding module, or None when it encodes positions another way."""
    base = getattr(model, "base_model", model)
    module = getattr(base, "rotary_emb", None)
    return module if isinstance(module, nn.Module) else None


def rotary_angles(model: nn.Module, num_positions: int) -> np.ndarray:
    """(P, Dh/2) angles in radians by which each pair is turned at positions 0..P-1."""
    module = rotary_module(model)
    if module is None:
        raise ValueError("this model has no rotary position embeddings")
    if num_positions < 1:
        raise ValueError(f"need at least one position, got {num_positions}")
    positions = torch.arange(num_positions)[None]  # (1, P)
    probe = torch.zeros(1, num_positions, 1, dtype=torch.float32)
    with torch.inference_mode():
        cos, sin = module(probe, positions)  # (1, P, Dh) each, the pair's angle twice over
    half = cos.size(-1) // 2
    angles = torch.atan2(sin[0, :, :half], cos[0, :, :half])  # (P, Dh/2) in (-pi, pi]
    return np.unwrap(angles.double().numpy(), axis=0).astype(np.float32)  # turning keeps going

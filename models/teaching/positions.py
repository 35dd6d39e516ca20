"""Position information: the fixed sinusoidal encoding, and a model's learned position embeddings.

P positions, D dimensions.
"""

from __future__ import annotations

import numpy as np
from torch import nn

SINUSOID_BASE = 10000.0
# Models whose learned position table starts after the padding index (position ids pad + 1, ...).
OFFSET_POSITION_TYPES = frozenset({"roberta", "xlm-roberta", "camembert", "mpnet"})


def sinusoidal_encoding(num_positions: int, dim: int, base: float = SINUSOID_BASE) -> np.ndarray:
    """The encoding of "Attention Is All You Need", (P, D).

    Dimension pair i (columns 2i and 2i + 1) turns at the frequency 1 / base^(2i / D):
    PE[p, 2i] = sin(p / base^(2i / D)) and PE[p, 2i + 1] = cos(p / base^(2i / D)).
    An odd D keeps the sine of the last pair and drops its cosine.
    """
    if num_positions < 1 or dim < 1:
        raise ValueError(f"need at least one position and one dimension, got {num_positions}, {dim}")
    if base <= 1:
        raise ValueError(f"the base must be greater than 1, got {base}")
    positions = np.arange(num_positions, dtype=np.float64)[:, None]  # (P, 1)
    pair_index = np.arange(0, dim, 2, dtype=np.float64)  # (ceil(D / 2),): the 2i of each pair
    angles = positions / base ** (pair_index / dim)  # (P, ceil(D / 2))
    encoding = np.empty((num_positions, dim))  # (P, D)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles[:, : dim // 2])
    return encoding


def cosine_similarity(vectors: np.ndarray) -> np.ndarray:
    """(P, D) -> (P, P): the cosine of the angle between every pair of rows.

    A zero row has no direction, so its row and column are NaN (drawn blank), not an error.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # (P, 1)
    zero = norms[:, 0] == 0  # (P,)
    unit = vectors / np.where(norms == 0, 1.0, norms)  # (P, D)
    similarity = np.clip(unit @ unit.T, -1.0, 1.0)  # (P, P)
    similarity[zero, :] = np.nan
    similarity[:, zero] = np.nan
    return similarity


def _position_table(model: nn.Module) -> nn.Embedding | None:
    embeddings = getattr(model, "embeddings", None)
    for owner, name in ((embeddings, "position_embeddings"), (embeddings, "positions"),
                        (model, "wpe")):
        table = getattr(owner, name, None) if owner is not None else None
        if isinstance(table, nn.Embedding):
            return table
    return None


def _offset(model: nn.Module) -> int:
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) in OFFSET_POSITION_TYPES:
        return int(getattr(config, "pad_token_id", 1) or 0) + 1
    return 0


def learned_position_count(model: nn.Module) -> int:
    """How many positions the model's learned table covers; 0 if it has no such table."""
    table = _position_table(model)
    return 0 if table is None else table.num_embeddings - _offset(model)


def learned_positions(model: nn.Module, num_positions: int) -> np.ndarray:
    """The first `num_positions` rows of a model's learned position table, (P, D).

    Works for BERT-like models (`embeddings.position_embeddings`), the from-scratch encoder
    (`embeddings.positions`) and GPT-2 (`wpe`). RoBERTa-like tables start after the padding
    index, so their rows are taken from there. Raises ValueError for a model without a learned
    table (rotary or relative positions).
    """
    table = _position_table(model)
    if table is None:
        raise ValueError("this model has no learned position embeddings (it may encode "
                         "positions another way, such as rotary or relative positions)")
    offset = _offset(model)
    available = table.num_embeddings - offset
    if not 1 <= num_positions <= available:
        raise ValueError(f"the model has {available} learned positions; asked for {num_positions}")
    return table.weight.detach()[offset:offset + num_positions].float().numpy().copy()  # (P, D)

"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

Raw attention of one layer says how a position mixes the previous layer's vectors, but those
vectors are already mixtures. Rollout follows the mixing down through the layers: per layer the
heads' mean A_l, with the residual connection counted as (A_l + I) / 2 and each row
renormalised, multiplied from the first layer up.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.hooks.record import AttentionRecord
from viz.heatmap import matrix_heatmap

FORMULA = (
    r"\hat{A}_l = \operatorname{rownorm}\!\left(\tfrac{1}{2}\Big(\tfrac{1}{H}\sum_{h=1}^{H} "
    r"A_{l,h} + I\Big)\right), \qquad \tilde{A}_l = \hat{A}_l\,\hat{A}_{l-1}\cdots\hat{A}_1"
)
FORMULA_TEXT = (
    "Per layer l: average the H heads' maps, add the identity for the residual connection, "
    "halve and renormalise each row: Â_l = rownorm((mean_h A_l,h + I) / 2). "
    "Rollout up to layer l: Ã_l = Â_l · Â_(l-1) · … · Â_1. "
    "Row i of Ã_l says how much of position i's vector at layer l traces back to each input token."
)


def head_average(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K): each layer's attention averaged over its heads."""
    return record.weights.mean(axis=1, dtype=np.float64)


def residual_attention(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K): (A + I) / 2 per layer, rows renormalised (a row emptied by a mask becomes I)."""
    count = record.num_tokens
    mixed = (head_average(record) + np.eye(count)) / 2.0  # (L, Q, K)
    return mixed / mixed.sum(axis=-1, keepdims=True)


def attention_rollout(record: AttentionRecord) -> np.ndarray:
    """(L, Q, K): rollout[l] = Â_l ... Â_1, the flow from the input tokens to layer l."""
    steps = residual_attention(record)
    rollout = np.empty_like(steps)
    product = np.eye(record.num_tokens)
    for layer, step in enumerate(steps):
        product = step @ product  # (Q, K)
        rollout[layer] = product
    return rollout


ROLLOUT_HEIGHT_PX = 500  # the two maps share a column: no taller than their width allows
ROLLOUT_TOP_MARGIN_PX = 170  # the title, then the key labels and "key" under it (large fonts too)


def rollout_figures(record: AttentionRecord, layer: int) -> tuple[go.Figure, go.Figure]:
    """(raw head-averaged attention of `layer`, rollout up to `layer`) on one [0, 1] scale, made
    to stand side by side in a narrow column: short titles with room under them for the key
    labels, and the maps at the top of the figures."""
    raw = head_average(record)[layer]
    rolled = attention_rollout(record)[layer]
    figures = (
        matrix_heatmap(raw, record.tokens, f"Raw attention · layer {layer}"),
        matrix_heatmap(rolled, record.tokens, f"Rollout · layers 0 to {layer}"),
    )
    for figure in figures:
        figure.update_layout(height=min(figure.layout.height, ROLLOUT_HEIGHT_PX),
                             margin=dict(t=ROLLOUT_TOP_MARGIN_PX))
        figure.update_yaxes(constrain="domain", constraintoward="top")
    return figures

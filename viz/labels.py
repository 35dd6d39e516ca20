"""Token labels that are safe to put into Plotly text (which understands a little HTML)."""

from __future__ import annotations

import html

import numpy as np


def safe_token(token: str) -> str:
    """Escape HTML and make invisible tokens visible, so what the user typed is shown as text."""
    if token == "" or token.isspace():
        return "␣"
    return html.escape(token, quote=False)


def tick_labels(tokens: tuple[str, ...] | list[str]) -> list[str]:
    return [safe_token(t) for t in tokens]


def tick_positions(num_tokens: int, max_labels: int) -> list[int]:
    """Every position when they fit, else an even thinning that keeps the first and last."""
    if num_tokens <= max_labels:
        return list(range(num_tokens))
    return sorted(set(np.linspace(0, num_tokens - 1, max_labels).round().astype(int).tolist()))


def hover_pairs(tokens: tuple[str, ...] | list[str]) -> np.ndarray:
    """(Q, K, 2) array of [query label, key label] for each cell's hover text."""
    labels = np.array([f"{safe_token(t)} #{i}" for i, t in enumerate(tokens)], dtype=object)
    count = len(labels)
    return np.stack([np.repeat(labels[:, None], count, axis=1),
                     np.repeat(labels[None, :], count, axis=0)], axis=-1)

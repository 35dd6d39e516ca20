"""Ready-made edits for a run (models/hooks/run.py): each returns {point name: edit function}, so
several can be merged into one run's `edits`.

An edit is called as `edit(value, name)` and returns the value to use instead (or None to keep
it). Heads are edited at `hook_z` (each head's output before W_O, (B, T, H, Dh)), edges at
`hook_scores` (before the softmax, (B, H, Q, K)), the residual stream at `hook_resid_pre`.

Dimensions: B batch, T tokens, H heads, Dh head width, Q/K query/key positions, D model width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch

from models.hooks import points

Edits = dict[str, list[Callable]]


def merge(*groups: Mapping[str, Iterable[Callable]]) -> Edits:
    """Several groups of edits as one: edits of the same point run in the order given."""
    merged: Edits = {}
    for group in groups:
        for name, functions in group.items():
            merged.setdefault(name, []).extend(functions)
    return merged


def _heads_by_layer(heads: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if layer < 0 or head < 0:
            raise ValueError(f"Layer {layer}, head {head}: layers and heads count from 0.")
        by_layer.setdefault(int(layer), []).append(int(head))
    return by_layer


def scale_heads(heads: Iterable[tuple[int, int]], factor: float, stack: str = "") -> Edits:
    """Multiply the output of each (layer, head) by `factor` (0 removes it: zero ablation)."""
    edits: Edits = {}
    for layer, chosen in _heads_by_layer(heads).items():
        def edit(context: torch.Tensor, name: str, chosen=tuple(chosen)) -> torch.Tensor:
            if max(chosen) >= context.size(2):
                raise ValueError(f"{name}: the layer has {context.size(2)} heads, not "
                                 f"{max(chosen) + 1}.")
            context = context.clone()
            context[:, :, list(chosen)] *= factor  # (B, T, h, Dh)
            return context
        edits[points.z(layer, stack)] = [edit]
    return edits


def zero_heads(heads: Iterable[tuple[int, int]], stack: str = "") -> Edits:
    """Zero ablation: the output of each (layer, head) replaced by 0."""
    return scale_heads(heads, 0.0, stack)


def replace_point(name: str, value: torch.Tensor, positions: Iterable[int] | None = None,
                  heads: Iterable[int] | None = None) -> Edits:
    """Put `value` (another run's value of the same point, same shape) in place of the point's
    own, at some positions (dimension 1) only, or for some heads only (a `hook_z` point's
    dimension 2): activation patching."""
    chosen_positions = None if positions is None else list(positions)
    chosen_heads = None if heads is None else list(heads)

    def edit(current: torch.Tensor, point: str) -> torch.Tensor:
        if value.shape[1:] != current.shape[1:]:
            raise ValueError(f"{point}: the patched value is {tuple(value.shape)}, the run's is "
                             f"{tuple(current.shape)}; patching needs inputs of the same length.")
        patched = current.clone()
        source = value.to(current.dtype).expand_as(current)
        rows = slice(None) if chosen_positions is None else chosen_positions
        if chosen_heads is None:
            patched[:, rows] = source[:, rows]
        for head in chosen_heads or ():
            patched[:, rows, head] = source[:, rows, head]
        return patched
    return {name: [edit]}


def block_edges(layer: int, query: int, keys: Iterable[int], stack: str = "") -> Edits:
    """Attention knockout: the edges from `query` to `keys` in `layer` removed before the
    softmax (every head), so the query's weight spreads over the keys it may still see."""
    chosen = list(keys)

    def edit(scores: torch.Tensor, name: str) -> torch.Tensor:
        blocked = torch.zeros(scores.shape[-2:], dtype=torch.bool)
        blocked[query, chosen] = True
        return scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return {points.scores(layer, stack): [edit]}

"""Attribution patching: every cell of every patching grid from one forward and one backward.

Patching a cell moves its activation from the corrupted value a to the clean value a'. To first
order the logit difference m then moves by (a' - a) . dm/da, the gradient taken at the corrupted
run (Nanda 2023; Syed, Rager & Conmy 2023). One forward of the corrupted prompt that keeps every
layer's points in the autograd graph (models.hooks.run.Run(grad=True)) and one backward give
dm/da for all of them at once, so every head and every layer x position is estimated for about
the price of two forwards, where exact patching (models/experiments/patching.py) runs one
patched copy per cell. The estimate is exact where m is linear in the activation, and can be far
off where a cell's effect saturates (a softmax, a norm): shown beside exact patching, the cells
where they disagree are the ones to patch exactly.

Dimensions: L layers, T tokens, H heads, Dh head width, D model width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.experiments.contrast import LogitDifference, PromptPair
from models.experiments.patching import (ATTN_OUT, HEAD, HEAD_POSITION, MLP_OUT, RESID_PRE,
                                         checked_baseline, metric_run)
from models.experiments.patching_cost import PatchingTooLarge, item_bytes
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.install import point_names
from models.hooks.run import Run, run_model
from models.limits import ATTRIBUTION_BYTES

SITES = (RESID_PRE, ATTN_OUT, MLP_OUT, HEAD, HEAD_POSITION)


@dataclass(frozen=True)
class AttributionGrids:
    """The estimated logit difference change of every cell, normalised like exact patching's
    grids (the corrupted run 0, the clean run 1). A site the model has no point for is None."""

    resid_pre: np.ndarray  # (L, T)
    attn_out: np.ndarray | None  # (L, T)
    mlp_out: np.ndarray | None  # (L, T)
    heads: np.ndarray  # (L, H): each head at every position at once
    head_positions: np.ndarray  # (L, H, T)
    clean_metric: float
    corrupted_metric: float
    tokens: tuple[str, ...]

    def site(self, site: str, layer: int | None = None) -> np.ndarray:
        """The grid exact patching draws for `site`: (L, T), (L, H), or (H, T) of `layer`."""
        grids = {RESID_PRE: self.resid_pre, ATTN_OUT: self.attn_out, MLP_OUT: self.mlp_out,
                 HEAD: self.heads}
        if site == HEAD_POSITION:
            return self.head_positions[layer]
        if site not in grids or grids[site] is None:
            raise ValueError(f"Attribution patching has no estimate for the site '{site}' here.")
        return grids[site]

    def raw(self, site: str, layer: int | None = None) -> np.ndarray:
        """The estimated logit differences themselves (not normalised)."""
        return self.corrupted_metric + self.site(site, layer) * (
            self.clean_metric - self.corrupted_metric)


@dataclass(frozen=True)
class Agreement:
    """Exact patching against its estimate on one grid."""

    correlation: float  # Pearson's r over the cells (nan when either grid is constant)
    disagreements: tuple[tuple[tuple[int, ...], float, float], ...]  # (cell, exact, estimate)


def attribution_bytes(loaded, tokens: int) -> int:
    """What the backward keeps: every layer's activations of one copy of the prompt."""
    return num_layers(loaded.model) * item_bytes(loaded.model, tokens, 0) + \
        item_bytes(loaded.model, tokens, 1 if loaded.causal else tokens)


def _site_names(model, layers: int) -> dict[str, list[str]]:
    known = set(point_names(model))
    names = {RESID_PRE: [points.resid_pre(layer) for layer in range(layers)],
             HEAD: [points.z(layer) for layer in range(layers)]}
    for site in (ATTN_OUT, MLP_OUT):
        chosen = [points.Point("", layer, site).name for layer in range(layers)]
        if all(name in known for name in chosen):
            names[site] = chosen
    return names


def attribution_patching(loaded, pair: PromptPair, difference: LogitDifference
                         ) -> AttributionGrids:
    """Every site's estimate from the clean run's activations and one forward and one backward
    of the corrupted prompt (refused, with its size, when the backward would not fit
    models.limits.ATTRIBUTION_BYTES)."""
    need = attribution_bytes(loaded, pair.num_tokens)
    if need > ATTRIBUTION_BYTES:
        raise PatchingTooLarge(
            f"Attribution patching of these {pair.num_tokens}-token prompts would keep about "
            f"{need / 2**20:.0f} MB for its backward pass, more than the "
            f"{ATTRIBUTION_BYTES / 2**20:.0f} MB it may take: use shorter prompts.")
    layers = num_layers(loaded.model)
    by_site = _site_names(loaded.model, layers)
    every = [name for names in by_site.values() for name in names]
    clean, clean_metric = metric_run(loaded, pair.clean, difference, every)
    run = Run(cache=every, grad=True)
    output = run_model(loaded.model, pair.corrupted.batched(loaded.model, 1,
                                                           last_only=loaded.causal), run)
    metric = difference.of(output.logits)[0]
    base = checked_baseline(clean, {name: run[name][0].detach() for name in every},
                            clean_metric, float(metric.detach()))
    gradients = dict(zip(every, torch.autograd.grad(metric, [run[name] for name in every],
                                                    allow_unused=True)))

    def estimate(name: str) -> torch.Tensor:
        """(a' - a) . dm/da summed over the last dimension: (T,) or (T, H)."""
        gradient = gradients[name]
        if gradient is None:  # the metric does not depend on it (a causal LM's later layers)
            return torch.zeros(base.clean[name].shape[:-1])
        change = base.clean[name] - base.corrupted[name]
        return (change * gradient[0]).sum(dim=-1)

    def grid(names: Sequence[str]) -> np.ndarray:
        """The estimated changes, in units of the clean run's lead over the corrupted one."""
        return torch.stack([estimate(name) for name in names]).double().numpy() / base.gap

    per_head = torch.stack([estimate(name) for name in by_site[HEAD]])  # (L, T, H)
    head_positions = per_head.permute(0, 2, 1).double().numpy() / base.gap  # (L, H, T)
    heads = per_head.sum(dim=1).double().numpy() / base.gap  # (L, H)
    return AttributionGrids(
        grid(by_site[RESID_PRE]),
        grid(by_site[ATTN_OUT]) if ATTN_OUT in by_site else None,
        grid(by_site[MLP_OUT]) if MLP_OUT in by_site else None,
        heads, head_positions, base.clean_metric, base.corrupted_metric, pair.clean.tokens)


def agreement(exact: np.ndarray, estimate: np.ndarray, count: int) -> Agreement:
    """Their correlation over the cells, and the `count` cells where they differ most."""
    exact = np.asarray(exact, dtype=float)
    estimate = np.asarray(estimate, dtype=float)
    if exact.shape != estimate.shape:
        raise ValueError(f"The grids differ in shape: {exact.shape} and {estimate.shape}.")
    flat_exact, flat_estimate = exact.ravel(), estimate.ravel()
    constant = flat_exact.std() == 0 or flat_estimate.std() == 0
    correlation = float("nan") if constant else float(np.corrcoef(flat_exact, flat_estimate)[0, 1])
    order = np.argsort(-np.abs(flat_exact - flat_estimate), kind="stable")[:count]
    cells = tuple((tuple(int(i) for i in np.unravel_index(index, exact.shape)),
                   float(flat_exact[index]), float(flat_estimate[index])) for index in order)
    return Agreement(correlation, cells)

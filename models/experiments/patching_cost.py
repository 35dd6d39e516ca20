"""What an activation-patching grid costs before it runs: the bytes one patched copy of the
prompt holds while a layer runs (an estimate from the model's config), how many copies go in one
forward, and a refusal, with the size it would need, for a grid over the budgets of
models/limits.py. Attribution patching sizes its runs with the same estimate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from models.experiments.contrast import PromptPair
from models.limits import PATCH_BATCH_BYTES, PATCH_BATCH_ITEMS, PATCH_GRID_BYTES
from models.loading.loader_checks import FEED_FORWARD_KEYS, HEAD_KEYS, WIDTH_KEYS, readable_bytes

FLOAT_BYTES = 4
# What one patched copy holds while one layer runs, in units of the model's width D and MLP
# width F per token (the stream, its norm, q, k, v, the heads' outputs, the sublayers' outputs;
# the MLP's hidden layer before and after its activation), and two (H, T, T) maps (scores and
# pattern). An estimate: it sizes batches and refuses grids too large to run.
WIDTHS_PER_TOKEN = 8
MLP_WIDTHS_PER_TOKEN = 3
MAPS_PER_HEAD = 2
MLP_FACTOR = 4  # the MLP width of a model whose config does not state it


class PatchingTooLarge(ValueError):
    """A patching run refused before it starts; the message says the size it would need."""


@dataclass(frozen=True)
class Cost:
    """What a grid would take: its cells, the bytes one patched copy holds, the copies per
    forward."""

    cells: int
    item_bytes: int
    batch: int

    @property
    def total_bytes(self) -> int:
        return self.cells * self.item_bytes


def config_size(config, keys: Sequence[str]) -> int | None:
    for key in keys:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def item_bytes(model: torch.nn.Module, tokens: int, logit_rows: int) -> int:
    """The bytes one copy of a `tokens`-token prompt holds while one layer of `model` runs,
    with `logit_rows` positions of logits at the end (an estimate from the model's config)."""
    config = model.config
    width = config_size(config, WIDTH_KEYS) or 1
    heads = config_size(config, HEAD_KEYS) or 1
    mlp = config_size(config, FEED_FORWARD_KEYS) or MLP_FACTOR * width
    vocabulary = int(getattr(config, "vocab_size", 0) or 0)
    per_layer = tokens * (WIDTHS_PER_TOKEN * width + MLP_WIDTHS_PER_TOKEN * mlp) + \
        MAPS_PER_HEAD * heads * tokens * tokens
    return FLOAT_BYTES * (per_layer + logit_rows * vocabulary)


def grid_cost(loaded, pair: PromptPair, cells: int) -> Cost:
    """The cost of a grid of `cells` on these prompts; PatchingTooLarge, before anything runs,
    when one patched forward or the whole grid would exceed its budget (models/limits.py)."""
    tokens = pair.num_tokens
    each = item_bytes(loaded.model, tokens, 1 if loaded.causal else tokens)
    if each > PATCH_BATCH_BYTES:
        raise PatchingTooLarge(
            f"One patched forward of these {tokens}-token prompts would hold about "
            f"{readable_bytes(each)}, more than the {readable_bytes(PATCH_BATCH_BYTES)} a "
            "patching forward may take: use shorter prompts.")
    if cells * each > PATCH_GRID_BYTES:
        raise PatchingTooLarge(
            f"This grid ({cells:,} cells at {tokens} tokens) would need about "
            f"{readable_bytes(cells * each)} of patched forwards ({readable_bytes(each)} each), "
            f"more than the {readable_bytes(PATCH_GRID_BYTES)} a patching run may take: use "
            "shorter prompts, or the grid of whole heads.")
    return Cost(cells, each, max(1, min(PATCH_BATCH_ITEMS, PATCH_BATCH_BYTES // each)))

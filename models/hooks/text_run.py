"""A text through a loaded model with one run: the points asked for kept, the edits applied.

`run_text(loaded, text, cache=[...], edits={...})` is TransformerLens' `run_with_cache` and
`run_with_hooks` in one call, for any loaded model (`models.loading.source.LoadedSource`): it
tokenizes the text as the app does, refuses a point the model does not have in one sentence,
runs one forward and hands back the logits (where the model has a head) and the cached points.

Dimensions: B batch, T tokens, V vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from models.hooks.capture import forward_inputs
from models.hooks.install import point_names
from models.hooks.run import Run, run_model
from models.loading.tokenize import EncodedText

BLOCK = re.compile(r"blocks\.(\d+)\.")  # a layer's points: blocks.{layer}.…


@dataclass(frozen=True)
class TextRun:
    """One forward over a text: its tokens, the logits (B, T, V) or None, the cached points."""

    encoded: EncodedText
    logits: torch.Tensor | None
    cache: dict[str, torch.Tensor]

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.encoded.tokens

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.cache[name]
        except KeyError:
            raise KeyError(f"{name} was not cached by this run; cached: "
                           f"{', '.join(self.cache) or 'nothing'}") from None


def _check(loaded, names: Iterable[str]) -> None:
    known = set(point_names(loaded.model))
    layers = 1 + max((int(found.group(1)) for found in map(BLOCK.match, known) if found),
                     default=-1)
    for name in names:
        if name in known:
            continue
        block = BLOCK.match(name)
        where = (f"it has layers 0 to {layers - 1}" if block and int(block.group(1)) >= layers
                 else f"point_names(model) lists its {len(known)}")
        raise ValueError(f"{loaded.label} has no hook point '{name}' ({where}).")


def run_text(loaded, text: str, pair: str | None = None, cache: Sequence[str] = (),
             edits: Mapping[str, Callable | Sequence[Callable]] | None = None,
             grad: bool = False, stop_at: str | None = None) -> TextRun:
    """One forward of `loaded` over `text` (and an optional second sentence), keeping the points
    named in `cache` and applying `edits` (models/hooks/edits.py builds common ones). With
    `grad`, autograd runs and the cached values stay in the graph."""
    _check(loaded, (*cache, *(edits or {}), *((stop_at,) if stop_at else ())))
    encoded, inputs = loaded.encode(text, pair)
    run = Run(cache=cache, edits=edits, grad=grad, stop_at=stop_at)
    output = run_model(loaded.model, forward_inputs(loaded.model, inputs), run)
    logits = getattr(output, "logits", None) if output is not None else None
    return TextRun(encoded, logits, dict(run.cache))

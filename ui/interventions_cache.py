"""Cached results of the causal-intervention pages: patching grids, attribution patching, the
logit lens and direct logit attribution.

Every result is keyed by the sidebar's model source and what the user typed, computed once per
server and kept in one byte-bounded store (`_kept`, the only place this module stores
anything). Models come from ui.state / ui.cache, so they load once per server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from models.experiments import attribution, contrast, logit_attribution, logit_lens, patching
from models.experiments.predictions import Candidate
from models.hooks.capture import num_layers
from models.loading.source import LoadedSource, ModelSource
from models.store import stores
from models.store.keys import ResultKey, result_key
from ui import byte_caches
from ui.state import loaded_source

Value = TypeVar("Value")
TOP_PREDICTIONS = 6


def _kept(key: ResultKey, compute: Callable[[], Value], message: str | None) -> Value:
    """The one store call of this module: the results store."""
    return byte_caches.kept(stores.RESULTS, key, compute, message)


def loaded(source: ModelSource) -> LoadedSource:
    """The model, refused in one sentence when it has no language-model head to read."""
    model = loaded_source(source)
    contrast.language_model(model)
    return model


def layer_count(source: ModelSource) -> int:
    return num_layers(loaded(source).model)


def top_predictions(source: ModelSource, text: str) -> tuple[Candidate, ...]:
    """The model's most probable tokens at the prompt's read position (its next token, or its
    mask's filler)."""
    def compute() -> tuple[Candidate, ...]:
        model = loaded(source)
        return contrast.top_predictions(model, contrast.prompt(model, text), TOP_PREDICTIONS)

    return _kept(result_key("interventions_top", source, text), compute, "Running the model…")


def check(source: ModelSource, clean: str, corrupted: str, answer: str, wrong: str) -> None:
    """Raise (one sentence) what is wrong with the inputs before anything long runs."""
    contrast.experiment(loaded(source), clean, corrupted, answer, wrong)


def patching_grid(source: ModelSource, clean: str, corrupted: str, answer: str, wrong: str,
                  site: str, layer: int | None,
                  _progress: Callable[[int, int], None] | None = None) -> patching.PatchingGrid:
    """One site's exact patching grid; `_progress` (not part of the key) hears each batch."""
    def compute() -> patching.PatchingGrid:
        model = loaded(source)
        given = contrast.experiment(model, clean, corrupted, answer, wrong)
        return patching.patching_grid(model, given.pair, given.difference, site, layer,
                                      progress=_progress)

    return _kept(result_key("patching", source, clean, corrupted, answer, wrong, site, layer),
                 compute, None)


def attribution_grids(source: ModelSource, clean: str, corrupted: str, answer: str,
                      wrong: str) -> attribution.AttributionGrids:
    def compute() -> attribution.AttributionGrids:
        model = loaded(source)
        given = contrast.experiment(model, clean, corrupted, answer, wrong)
        return attribution.attribution_patching(model, given.pair, given.difference)

    return _kept(result_key("attribution", source, clean, corrupted, answer, wrong), compute,
                 "Attribution patching: one forward and one backward…")


def lens(source: ModelSource, text: str, chosen: str) -> logit_lens.LogitLens:
    def compute() -> logit_lens.LogitLens:
        return logit_lens.logit_lens(loaded(source), text, chosen or None)

    return _kept(result_key("logit_lens", source, text, chosen), compute,
                 "Reading every layer through the unembedding…")


def direct_attribution(source: ModelSource, text: str, answer: str,
                       wrong: str) -> logit_attribution.LogitAttribution:
    def compute() -> logit_attribution.LogitAttribution:
        return logit_attribution.logit_attribution(loaded(source), text, answer, wrong)

    return _kept(result_key("logit_attribution", source, text, answer, wrong), compute,
                 "Splitting the logit difference into its parts…")

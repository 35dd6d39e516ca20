"""Every store of computed values on this server, declared once, each with its budget from
models/limits.py. One process, one of each, shared by every session.

Read a store as `stores.RESULTS` at the moment it is used (not `from ... import RESULTS`), so a
test can swap in a store of its own.

Models loaded by name are bounded by a count: each is refused above MODEL_BYTES before it is
built, so the count bounds their memory, and a count is what a teacher can reason about ("two
models besides the built-in ones"). Everything computed from what a user types is bounded in
bytes: one value may be a few kilobytes or hundreds of megabytes.
"""

from __future__ import annotations

from models import limits
from models.store.byte_cache import Budget, Store

# Traces of one forward each, and what views derive from one input (token options, bertviz
# pages, a long input's overview, heads and rows).
TRACES = Store("traces", Budget(bytes=limits.TRACE_CACHE_BYTES))
# Ablations, knockouts, importance grids and detector runs.
ANALYSES = Store("analyses", Budget(bytes=limits.ANALYSIS_CACHE_BYTES))
# Every other page's results: teaching pages, translations, fine-tuning's before/after, layer
# walks, generations.
RESULTS = Store("results", Budget(bytes=limits.RESULT_CACHE_BYTES))
# Figures as drawn for a presentation (ui/charts.py), by what the figure is.
FIGURES = Store("drawn figures", Budget(bytes=limits.FIGURE_CACHE_BYTES))
# The random from-scratch encoders of the layer-walk page.
WALK_ENCODERS = Store("walk encoders", Budget(bytes=limits.WALK_ENCODER_BYTES))
# Classifiers fine-tuned on this server: the newest stays even alone over the budget.
FINETUNED = Store("fine-tuned classifiers", Budget(
    bytes=limits.FINETUNED_BYTES, entries=limits.FINETUNED_MODELS, keep_newest=True))
# What each training key names (the encoder and the data), for listing a model's classifiers.
TRAINING_NAMES = Store("training names", Budget(entries=limits.TRAINING_NAMES))
# Hugging Face encoders and decoders loaded by name; the embedded ones pinned.
MODELS = Store("loaded models", Budget(entries=limits.LOADED_MODELS))
# From-scratch encoders (random or with weights copied in) and their variants.
SCRATCH_MODELS = Store("from-scratch encoders", Budget(entries=limits.SCRATCH_ENCODERS))
# Hugging Face encoder–decoders loaded by name; the toy translator pinned.
SEQ2SEQ_MODELS = Store("encoder–decoders", Budget(entries=limits.SEQ2SEQ_MODELS))

"""Every memory and size budget of the app, in one place (bytes unless the name says otherwise)."""

from __future__ import annotations

MIB = 2**20
GIB = 2**30

# Computed traces (records and what views derive from them) kept for reuse across sessions.
TRACE_CACHE_BYTES = 512 * MIB
# One trace may not exceed this (the decoder's token limit is chosen so it does not).
TRACE_BYTES = 160 * MIB
# From-scratch encoders kept at once (one per seed typed; about 20-40 MB each with a BERT vocabulary).
SCRATCH_ENCODERS = 4
# Per-input results of the other pages, each store least-recently-used by bytes (ui/byte_caches.py,
# ui/layer_walk_cache.py, ui/finetune_cache.py): what a classroom types cannot grow them further.
# Ablations, knockouts and detector runs (one decoder comparison at its token limit is ~270 MB).
ANALYSIS_CACHE_BYTES = 320 * MIB
# Teaching pages, translations, fine-tuning before/after, layer walks and generations.
RESULT_CACHE_BYTES = 256 * MIB
# Random from-scratch encoders of the layer-walk page (~90 MB at width 384 with BERT's vocabulary).
WALK_ENCODER_BYTES = 128 * MIB
# Classifiers fine-tuned on this server (a MiniLM copy is ~90 MB). The newest is kept even alone
# over this budget (it is at most a MODEL_BYTES model and its head).
FINETUNED_BYTES = 256 * MIB
# Hugging Face encoder–decoders loaded on the cross-attention page kept at once (each refused
# above MODEL_BYTES like every model); loading another unloads the least recently used.
SEQ2SEQ_MODELS = 1
# The sidebar's text is cut to this many characters before any tokenizer sees it.
MAX_TEXT_CHARS = 20_000

# Loading a model (models/loading/loader_checks.py, models/loading/weight_checks.py, models/loading/loaded_models.py).
# A model whose float32 parameters (estimated from its config.json before anything is built)
# would take more than this is refused: about 268 million parameters.
MODEL_BYTES = 1 * GIB
# User-loaded models kept at once (the embedded MiniLM and SmolLM2 are kept on top of these);
# loading another unloads the least recently used.
LOADED_MODELS = 2
# A model name or folder longer than this is refused before it reaches the file system.
MODEL_NAME_CHARS = 1024
# A safetensors header (JSON listing the tensors) larger than this is refused unread.
SAFETENSORS_HEADER_BYTES = 16 * MIB

# Long inputs (models/hooks/streaming.py): a long input keeps per-layer reductions, never its full maps,
# so a decoder reads up to this many tokens (or its own position limit, when smaller).
LONG_TOKENS = 4096
# Each long input's per-layer inputs are kept on disk (SmolLM2 at 4,096 tokens: 283 MB) so any
# head can be computed again exactly in a fraction of a second; at most this much disk in all.
LONG_INPUT_DISK_BYTES = 2 * GIB

# Causal interventions (models/experiments/patching.py, attribution.py, logit_lens.py).
# One batched forward of a patching grid may hold this much: it decides how many patched copies
# of the corrupted prompt share a forward.
PATCH_BATCH_BYTES = 192 * MIB
# Patched copies per forward, at most (on a CPU, larger batches were no faster per copy).
PATCH_BATCH_ITEMS = 64
# A whole grid's patched forwards together (long prompts × many cells): a grid that would need
# more is refused before it starts, with the size it would need.
PATCH_GRID_BYTES = 8 * GIB
# Attribution patching keeps every layer's activations for its one backward pass.
ATTRIBUTION_BYTES = 512 * MIB
# The logit lens turns each layer's residual stream into logits this many bytes at a time.
LENS_CHUNK_BYTES = 128 * MIB

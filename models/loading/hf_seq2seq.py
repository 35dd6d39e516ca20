"""Any Hugging Face encoder–decoder (T5, BART, Marian, ...): its three kinds of attention.

Loaded like every other model here (models/loading/pretrained.py's rules): a Hub id or a local folder,
safetensors weights only, no remote code, eager attention (the fused path returns no weights),
and one sentence for every failure. A source text goes in; the model either writes its own
translation greedily, one token per step, or reads a target text it is given. One forward pass
over the result (a run that keeps every layer's `hook_pattern` point of the three kinds,
models/hooks) then returns the encoder's self-attention, the decoder's causal self-attention
and the cross-attention, as three AttentionRecords.

Dimensions: L layers, H heads, S source tokens, T target tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AutoModelForSeq2SeqLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)

from models.errors import ModelLoadError
from models.hooks import points
from models.hooks.layouts import stacks
from models.hooks.record import AttentionRecord
from models.hooks.run import Run, run_model
from models.limits import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS
from models.loading.loader_checks import reading_boundary
from models.loading.pretrained import (ENCODER_TYPES, LoadedModel, build_checked, checked_config,
                                       checked_folder, token_limit)
from models.loading.tokenize import first_item_attentions

SEQ2SEQ_TYPES = frozenset(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
DECODER_ONLY_TYPES = frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - ENCODER_TYPES - SEQ2SEQ_TYPES
KNOWN_TYPES = frozenset(CONFIG_MAPPING_NAMES)  # read any config, then say why it does not fit
EXAMPLES = "t5-small, facebook/bart-base or Helsinki-NLP/opus-mt-en-fr"

DEFAULT_NEW_TOKENS = 24


@dataclass(frozen=True)
class Seq2SeqRun:
    """What an encoder–decoder did with one source text.

    The decoder reads `decoder_tokens` (its start token, then the target shifted right); its
    query at position t produced `output_tokens[t]`: the model's greedy choice when it wrote the
    target itself, or the given target's token when it was told what to read.
    """

    source_tokens: tuple[str, ...]
    decoder_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    output_text: str
    generated: bool
    encoder: AttentionRecord  # (L_enc, H, S, S)
    decoder: AttentionRecord  # (L_dec, H, T, T), causal
    cross: AttentionRecord  # (L_dec, H, T, S)


def _kind(model_type: str) -> str:
    if model_type in DECODER_ONLY_TYPES:
        return "a decoder only"
    if model_type in ENCODER_TYPES:
        return "an encoder only"
    return "not an encoder–decoder"


def load_seq2seq(name: str) -> LoadedModel:
    """An encoder–decoder id or local folder, with eager attention; ModelLoadError otherwise.

    The folder (a local one, or a Hub id's files in the local Hugging Face cache) goes through
    the same checks as every model (models/loading/pretrained.py's `checked_folder`, `checked_config`).
    """
    name = (name or "").strip()
    with reading_boundary(name):
        folder = checked_folder(name)
        config = checked_config(name, folder, KNOWN_TYPES)
        if not getattr(config, "is_encoder_decoder", False) \
                or config.model_type not in SEQ2SEQ_TYPES:
            raise ModelLoadError(
                f"Could not load '{name}': it is a '{config.model_type}' model "
                f"({_kind(config.model_type)}), and this page needs an encoder–decoder such as "
                f"{EXAMPLES}."
            )
        model, tokenizer, _ = build_checked(name, folder, config, AutoModelForSeq2SeqLM)
        limit = token_limit(name, config, tokenizer, MAX_SOURCE_TOKENS)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer,
                       max_tokens=min(MAX_SOURCE_TOKENS, limit))


def decoder_start_id(loaded: LoadedModel) -> int:
    """The token every decoder pass starts from (T5, Marian: <pad>; BART: </s>)."""
    config = loaded.model.config
    for candidate in (getattr(loaded.model.generation_config, "decoder_start_token_id", None),
                      config.decoder_start_token_id, config.pad_token_id, config.bos_token_id):
        if candidate is not None:
            return int(candidate)
    raise ModelLoadError(f"'{loaded.name}' names no decoder start token, so it cannot translate.")


def _encode_source(loaded: LoadedModel, text: str):
    if not text or not text.strip():
        raise ValueError("Type a source text for the encoder to read.")
    encoded = loaded.tokenizer(text, return_tensors="pt", return_special_tokens_mask=True,
                               truncation=False, verbose=False)
    count = encoded["input_ids"].size(1)
    if count > loaded.max_tokens:
        raise ValueError(f"The source text is {count} tokens long and this view takes at most "
                         f"{loaded.max_tokens}: shorten it.")
    return encoded


def _target_ids(loaded: LoadedModel, target: str) -> list[int]:
    ids = loaded.tokenizer(text_target=target, truncation=False, verbose=False)["input_ids"]
    if len(ids) > MAX_TARGET_TOKENS:
        raise ValueError(f"The target text is {len(ids)} tokens long and this view takes at most "
                         f"{MAX_TARGET_TOKENS}: shorten it.")
    return [int(i) for i in ids]


@torch.inference_mode()
def greedy_ids(loaded: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               max_new_tokens: int) -> list[int]:
    """The model's greedy choices, one token per step, stopping at its end-of-sequence token."""
    model = loaded.model
    encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    eos = model.config.eos_token_id
    read = [decoder_start_id(loaded)]
    produced: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(encoder_outputs=encoder_outputs, attention_mask=attention_mask,
                       decoder_input_ids=torch.tensor([read]), use_cache=False).logits  # (1, T, V)
        produced.append(int(logits[0, -1].argmax()))
        if produced[-1] == eos:
            break
        read.append(produced[-1])
    return produced


def _attention_maps(loaded: LoadedModel, inputs: dict):
    """One forward that keeps the encoder's, the decoder's and the cross-attention's maps of
    every layer: three float32 (L, H, Q, K) arrays of batch item 0."""
    encoder, decoder = (len(stack.layers) for stack in stacks(loaded.model))
    kinds = (points.every_layer("pattern", encoder, "encoder"),
             points.every_layer("pattern", decoder, "decoder"),
             points.every_layer("pattern", decoder, "decoder", "cross_attn"))
    run = Run(cache=[name for names in kinds for name in names])
    run_model(loaded.model, inputs, run)
    if any(name not in run.cache for names in kinds for name in names):
        raise ModelLoadError(
            f"'{loaded.name}' returned no attention weights (it must run with eager attention)."
        )
    return tuple(first_item_attentions(tuple(run[name] for name in names)) for names in kinds)


def run_seq2seq(loaded: LoadedModel, source: str, target: str | None = None,
                max_new_tokens: int = DEFAULT_NEW_TOKENS) -> Seq2SeqRun:
    """Source text in; the given target read, or the model's own greedy output (at most
    `max_new_tokens` tokens); the three kinds of attention out. ValueError (one sentence) for
    bad input."""
    if not 1 <= max_new_tokens <= MAX_TARGET_TOKENS:
        raise ValueError(f"The number of tokens to write must be between 1 and {MAX_TARGET_TOKENS}.")
    encoded = _encode_source(loaded, source)
    input_ids, attention_mask = encoded["input_ids"], encoded["attention_mask"]  # (1, S)
    generated = not (target and target.strip())
    produced = (greedy_ids(loaded, input_ids, attention_mask, max_new_tokens) if generated
                else _target_ids(loaded, target))
    if not produced:
        raise ValueError("The target text has no tokens.")
    read = [decoder_start_id(loaded)] + produced[:-1]
    encoder_maps, decoder_maps, cross_maps = _attention_maps(
        loaded, dict(input_ids=input_ids, attention_mask=attention_mask,
                     decoder_input_ids=torch.tensor([read]), use_cache=False))
    convert = loaded.tokenizer.convert_ids_to_tokens
    source_tokens = tuple(convert(input_ids[0].tolist()))
    decoder_tokens = tuple(convert(read))
    special = tuple(i for i, flag in enumerate(encoded["special_tokens_mask"][0].tolist()) if flag)
    encoder = AttentionRecord(tokens=source_tokens, source=loaded.name, special_positions=special,
                              weights=encoder_maps)
    decoder = AttentionRecord(tokens=decoder_tokens, source=loaded.name, masks=("causal",),
                              special_positions=(0,),
                              weights=decoder_maps)
    cross = AttentionRecord(tokens=decoder_tokens, key_tokens=source_tokens, source=loaded.name,
                            weights=cross_maps)
    return Seq2SeqRun(
        source_tokens=source_tokens, decoder_tokens=decoder_tokens,
        output_tokens=tuple(convert(produced)),
        output_text=loaded.tokenizer.decode(produced, skip_special_tokens=True),
        generated=generated, encoder=encoder, decoder=decoder, cross=cross,
    )

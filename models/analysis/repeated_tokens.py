"""A random sequence of tokens repeated twice, and a model's attention on it: the input on
which induction and duplicate-token heads show (Olsson et al. 2022). The detectors themselves
(models.analysis.detectors) score any record; this module builds the record they read.
"""

from __future__ import annotations

import numpy as np
import torch

from models.analysis.detectors import NotMeasurable
from models.hooks.capture import run_captured
from models.hooks.record import AttentionRecord
from models.hooks.trace import trace_from_run
from models.loading.tokenize import EncodedText
from models.scratch.encoder import Encoder

DEFAULT_REPEAT_LENGTH = 20  # random tokens in one copy
DEFAULT_SEED = 0


def random_token_ids(tokenizer, count: int, seed: int = DEFAULT_SEED) -> list[int]:
    """`count` distinct token ids drawn with a seeded generator from the ordinary vocabulary.

    Special tokens, added tokens and placeholder entries written in brackets ("[unused7]",
    "<pad>") are left out.
    """
    excluded = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
    vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    candidates = [
        i for i, token in enumerate(vocabulary)
        if i not in excluded and token and not (token[0] + token[-1] in ("[]", "<>"))
    ]
    if len(candidates) < count:
        raise NotMeasurable(f"The vocabulary has only {len(candidates)} ordinary tokens, fewer "
                            f"than the {count} needed.")
    chosen = np.random.default_rng(seed).choice(len(candidates), size=count, replace=False)
    return [candidates[int(i)] for i in chosen]


def repeated_random_ids(tokenizer, count: int = DEFAULT_REPEAT_LENGTH,
                        seed: int = DEFAULT_SEED) -> list[int]:
    """Random tokens repeated twice, with the tokenizer's own special tokens around them."""
    block = random_token_ids(tokenizer, count, seed)
    prefix, suffix = special_wrapping(tokenizer)
    return prefix + block + block + suffix


def special_wrapping(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after a text ([CLS] … [SEP])."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    wrapped = tokenizer("a")["input_ids"]
    for start in range(len(wrapped) - len(plain) + 1):
        if wrapped[start:start + len(plain)] == plain:
            return list(wrapped[:start]), list(wrapped[start + len(plain):])
    return [], []


def repeated_tokens_record(model, tokenizer, max_tokens: int, causal: bool, source: str,
                           count: int = DEFAULT_REPEAT_LENGTH,
                           seed: int = DEFAULT_SEED) -> AttentionRecord:
    """The model's attention on `count` random tokens repeated twice (one captured forward)."""
    ids = repeated_random_ids(tokenizer, count, seed)
    if len(ids) > max_tokens:
        raise NotMeasurable(f"Two copies of {count} tokens do not fit the model's limit of "
                            f"{max_tokens} tokens: choose fewer tokens.")
    input_ids = torch.tensor([ids])  # (1, T)
    special = set(tokenizer.all_special_ids)
    encoded = EncodedText(
        input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
        token_type_ids=None if causal else torch.zeros_like(input_ids),
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)), segment_ids=(0,) * len(ids),
        special_positions=tuple(p for p, i in enumerate(ids) if i in special), dropped_tokens=0,
    )
    inputs = {"input_ids": input_ids, "attention_mask": encoded.attention_mask}
    if isinstance(model, Encoder):
        inputs["token_type_ids"] = None
    elif not causal and "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
        inputs["token_type_ids"] = encoded.token_type_ids
    return trace_from_run(run_captured(model, inputs), encoded, source, causal).record

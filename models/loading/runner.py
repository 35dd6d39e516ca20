"""A loaded model choice, runnable: text in, the Trace of one captured forward out.

`LoadedSource` is what a model kind's `load` gives (models/loading/kinds/): the torch module, its
tokenizer, its token limit and why, and the choice it came from (a
models.loading.source.ModelSource, read here for its name, label and kind's properties).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from models.errors import ModelLoadError
from models.experiments.predictions import masked_fillers, next_token, per_position
from models.hooks.capture import run_captured
from models.hooks.trace import Predictions, Trace, trace_from_run
from models.loading.tokenize import EncodedText, encode, encode_many
from models.scratch.encoder import Encoder

ROTARY_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
                          "olmo", "olmo2", "smollm3", "gpt_neox"})


class Source(Protocol):
    """What a loaded model reads of the choice it came from (models.loading.source.ModelSource)."""

    name: str
    seed: int

    @property
    def label(self) -> str: ...

    @property
    def causal(self) -> bool: ...

    @property
    def traced(self) -> bool: ...


@dataclass(frozen=True)
class LoadedSource:
    """A loaded model choice: runs text to a Trace."""

    source: Source
    model: nn.Module
    tokenizer: object
    max_tokens: int
    limit_reason: str  # "positions" (the model's own limit) or "memory" (the app's cap)
    title: str = ""  # a label other than the source's, e.g. for a causal twin

    @property
    def label(self) -> str:
        return self.title or self.source.label

    @property
    def name(self) -> str:
        """The model's name, as the choice gives it (an id, a folder, a training key)."""
        return self.source.name

    @property
    def causal(self) -> bool:
        """Whether the model's attention is causal (a decoder, or a causal from-scratch twin)."""
        if isinstance(self.model, Encoder):
            return self.model.config.causal
        return self.source.causal

    @property
    def config(self):
        return self.model.config

    @property
    def model_type(self) -> str:
        return "scratch" if isinstance(self.model, Encoder) else self.model.config.model_type

    @property
    def rotary(self) -> bool:
        return self.model_type in ROTARY_TYPES

    @property
    def has_lm_head(self) -> bool:
        return hasattr(self.model, "get_output_embeddings") and \
            self.model.get_output_embeddings() is not None

    @property
    def mask_token(self) -> str | None:
        """The masked-LM mask token, when this model has a masked-LM head."""
        if self.source.causal or not self.has_lm_head:
            return None
        return getattr(self.tokenizer, "mask_token", None)

    def limit_notice(self, dropped: int) -> str:
        """One sentence for an input that was cut to the limit."""
        if self.limit_reason == "memory":
            why = (f"the app keeps at most {self.max_tokens} tokens for this model so its "
                   "attention fits in memory")
        else:
            why = f"{self.label} reads at most {self.max_tokens} tokens"
        return f"The input is longer than this: {why}; the last {dropped} tokens were dropped."

    def encode(self, text: str, pair: str | None = None,
               limit: int | None = None) -> tuple[EncodedText, dict]:
        """The text's tokens (cut to `limit`, by default `max_tokens`) and the model's inputs."""
        if self.source.causal:  # a second sentence continues the first after a space
            pair = f" {pair.strip()}" if pair and pair.strip() else None
        encoded = encode(self.tokenizer, text, pair, limit or self.max_tokens)
        return encoded, self.model_inputs(encoded)

    def encode_many(self, texts: list[str], pairs: list[str | None],
                    limit: int | None = None) -> list[EncodedText]:
        """`encode(text, pair, limit)[0]` of each text and pair: the texts without a pair
        tokenized in one call (models.loading.tokenize.encode_many)."""
        found: list[EncodedText | None] = [
            None if not pair or not pair.strip() else self.encode(text, pair, limit)[0]
            for text, pair in zip(texts, pairs, strict=True)]
        single = [index for index, item in enumerate(found) if item is None]
        for index, item in zip(single, encode_many(self.tokenizer, [texts[i] for i in single],
                                                   limit or self.max_tokens)):
            found[index] = item
        return found

    def model_inputs(self, encoded: EncodedText) -> dict:
        inputs = ({"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
                  if self.source.causal else encoded.model_inputs())
        if isinstance(self.model, Encoder):
            inputs.setdefault("token_type_ids", None)
        return inputs

    def run(self, text: str, pair: str | None = None) -> Trace:
        """Text (and an optional second sentence) -> the Trace of one forward pass."""
        if not self.source.traced:
            raise ValueError(f"'{self.label}' is not run on one text here: its kind has a page "
                             "of its own.")
        encoded, inputs = self.encode(text, pair)
        run = run_captured(self.model, inputs, keep_residual=True)
        trace = trace_from_run(run, encoded, self.label, self.causal, self.rotary,
                               self._predictions(run.logits, encoded))
        outer = (trace.record.layer(0), trace.record.layer(-1))  # a cheap check: first and last
        if self.causal and any(layer[..., ~trace.allowed].any() for layer in outer):
            raise ModelLoadError(f"'{self.label}' attends to later tokens: it is not a causal "
                                 "decoder.")
        return trace

    def _predictions(self, logits: torch.Tensor | None, encoded) -> Predictions | None:
        """The language-model head's predictions, reduced to small summaries (None without one,
        e.g. a classifier's logits are classes, not tokens)."""
        if logits is None or not self.has_lm_head:
            return None
        ids = encoded.input_ids[0]  # (T,)
        if self.causal:
            return Predictions(
                next_token=next_token(logits[0, -1], self.tokenizer),
                positions=per_position(logits[0], ids, self.tokenizer) if ids.numel() > 1 else None)
        mask_id = getattr(self.tokenizer, "mask_token_id", None)
        if mask_id is None or not bool((ids == mask_id).any()):
            return Predictions()
        return Predictions(masks=masked_fillers(logits[0], ids, mask_id, self.tokenizer))

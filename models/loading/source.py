"""A model choice as a value: which kind of model, which one, which seed; it loads and it runs.

`ModelSource` is what the sidebar selects and what every cache is keyed by. `source.load(...)`
gives a `LoadedSource` that knows its torch module, tokenizer, token limit and label, and whose
`run(text, pair)` is the one path from text to a `Trace` for every kind: encode, one captured
forward, trace. Adding a kind adds a branch here, not in every page and cache function.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from models.hooks.capture import install, run_captured
from models.scratch.config import EncoderConfig
from models.loading.decoder import DEFAULT_DECODER, load_decoder
from models.scratch.encoder import Encoder
from models.errors import ModelLoadError
from models.experiments.predictions import masked_fillers, next_token, per_position
from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained
from models.scratch.build import random_encoder
from models.loading.tokenize import EncodedText, encode
from models.hooks.trace import Predictions, Trace, trace_from_run
from models.scratch.transfer import encoder_from_bert

ROTARY_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
                          "olmo", "olmo2", "smollm3", "gpt_neox"})


class Kind(str, enum.Enum):
    """The kinds of model the app runs. Values are stable: they appear in links."""

    ENCODER = "pretrained"  # a pretrained encoder (BERT-like), possibly with a masked-LM head
    DECODER = "decoder"  # a pretrained causal language model
    SCRATCH_RANDOM = "scratch-random"  # the from-scratch encoder with seeded random weights
    SCRATCH_COPIED = "scratch-copied"  # the from-scratch encoder with a BERT's weights copied in

    @property
    def title(self) -> str:
        return KIND_TITLES[self]


KIND_TITLES = {
    Kind.ENCODER: "Pretrained encoder (BERT-like)",
    Kind.DECODER: "Pretrained causal decoder",
    Kind.SCRATCH_RANDOM: "From-scratch encoder, random weights",
    Kind.SCRATCH_COPIED: "From-scratch encoder, pretrained weights copied in",
}


def scratch_config(vocab_size: int) -> EncoderConfig:
    """The small from-scratch encoder used with random weights (textbook-sized)."""
    return EncoderConfig(vocab_size=vocab_size, hidden_size=128, num_heads=4, num_layers=4,
                         intermediate_size=512, norm_style="pre")


@dataclass(frozen=True)
class ModelSource:
    """Which model: `name` is the decoder for DECODER, else the pretrained encoder whose weights
    or tokenizer the kind uses; `seed` matters only for SCRATCH_RANDOM."""

    kind: Kind
    name: str
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "seed", int(self.seed) if self.kind is Kind.SCRATCH_RANDOM else 0)

    @classmethod
    def default(cls, kind: Kind = Kind.ENCODER) -> ModelSource:
        return cls(kind, DEFAULT_DECODER if kind is Kind.DECODER else DEFAULT_MODEL)

    @property
    def label(self) -> str:
        if self.kind is Kind.SCRATCH_RANDOM:
            return f"from-scratch encoder, random weights (seed {self.seed})"
        if self.kind is Kind.SCRATCH_COPIED:
            return f"from-scratch encoder with {self.name}'s weights"
        return self.name

    @property
    def causal(self) -> bool:
        return self.kind is Kind.DECODER

    def load(self, pretrained: Callable[[str], LoadedModel] = load_pretrained,
             decoder: Callable[[str], LoadedModel] = load_decoder) -> LoadedSource:
        """Build the runnable model. `pretrained` and `decoder` load Hugging Face models by name
        (pass cached versions so the from-scratch kinds share the encoder's tokenizer)."""
        if self.kind is Kind.DECODER:
            loaded = decoder(self.name)
            return LoadedSource(self, install(loaded.model), loaded.tokenizer, loaded.max_tokens,
                                _limit_reason(loaded))
        base = pretrained(self.name)
        if self.kind is Kind.ENCODER:  # with its masked-LM head when the checkpoint has one
            return LoadedSource(self, install(base.lm_model or base.model), base.tokenizer,
                                base.max_tokens, _limit_reason(base))
        if self.kind is Kind.SCRATCH_COPIED:
            if base.model_type != "bert":
                raise ModelLoadError(
                    f"Weights can be copied only from a BERT model; '{self.name}' is a "
                    f"'{base.model_type}' model.")
            encoder = encoder_from_bert(getattr(base.model, "base_model", base.model))
        else:
            encoder = random_encoder(scratch_config(len(base.tokenizer)), self.seed)
        limit = min(encoder.config.max_positions, base.max_tokens)
        return LoadedSource(self, encoder, base.tokenizer, limit, "positions")


def _limit_reason(loaded: LoadedModel) -> str:
    """'positions' when the limit is the model's own, 'memory' when the app capped it lower."""
    config = loaded.model.config
    own = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    tokenizer_limit = getattr(loaded.tokenizer, "model_max_length", None) or own
    model_limit = min(x for x in (own, tokenizer_limit) if x) if (own or tokenizer_limit) else None
    return "memory" if model_limit and loaded.max_tokens < model_limit else "positions"


@dataclass(frozen=True)
class LoadedSource:
    """A loaded model choice: runs text to a Trace."""

    source: ModelSource
    model: nn.Module
    tokenizer: object
    max_tokens: int
    limit_reason: str  # "positions" (the model's own limit) or "memory" (the app's cap)
    title: str = ""  # a label other than the source's, e.g. for a causal twin

    @property
    def label(self) -> str:
        return self.title or self.source.label

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

    def model_inputs(self, encoded: EncodedText) -> dict:
        inputs = ({"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
                  if self.source.causal else encoded.model_inputs())
        if isinstance(self.model, Encoder):
            inputs.setdefault("token_type_ids", None)
        return inputs

    def run(self, text: str, pair: str | None = None) -> Trace:
        """Text (and an optional second sentence) -> the Trace of one forward pass."""
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
        """The language-model head's predictions, reduced to small summaries (None without one)."""
        if logits is None:
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

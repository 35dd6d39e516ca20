"""The from-scratch encoder with BERT's masked-language-model head on top.

The head reads the last layer's output at every position: a dense layer, GELU, a LayerNorm,
then the token embeddings again (tied weights, as BERT ties them) plus a bias per token give a
score for every word of the vocabulary. It is the encoder (models/scratch/encoder.py) with every
hook point of its own, so a run captures and edits it like any other model.

Dimensions: B batch, T tokens, N chosen positions, D model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.hooks import points
from models.hooks.run import hook
from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder, EncoderOutput


@dataclass(frozen=True)
class MaskedLMOutput(EncoderOutput):
    logits: torch.Tensor | None = None  # (B, T, V)


class MaskedLMHead(nn.Module):
    """Hidden vectors (..., D) -> a score per vocabulary token (..., V), reading the tied
    token embeddings (V, D)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        moved = self.norm(self.activation(self.dense(hidden)))  # (..., D)
        return moved @ embeddings.T + self.bias  # (..., V)


INIT_STD = 0.02  # BERT's initialiser: small weights, so the tied head starts near uniform


def _bert_init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=INIT_STD)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class MaskedLanguageModel(Encoder):
    """The encoder and its masked-LM head; `forward` adds the logits to the encoder's output."""

    def __init__(self, config: EncoderConfig):
        super().__init__(config)
        self.head = MaskedLMHead(config)
        self.apply(_bert_init)

    def hidden(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
               attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The last layer's output (B, T, D), without the head (training scores only the
        chosen positions)."""
        return super().forward(input_ids, token_type_ids, attention_mask).last_hidden_state

    def get_output_embeddings(self) -> nn.Embedding:
        """The vocabulary the head scores (the token embeddings, tied)."""
        return self.embeddings.tokens

    def scores(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (..., V) of hidden vectors (..., D): the head alone."""
        return self.head(hidden, self.embeddings.tokens.weight)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> MaskedLMOutput:
        output = super().forward(input_ids, token_type_ids, attention_mask)
        logits = hook(points.LOGITS, self.scores(output.last_hidden_state))  # (B, T, V)
        return MaskedLMOutput(output.last_hidden_state, output.hidden_states, output.attentions,
                              output.mask, logits)

    def hook_point_names(self) -> list[str]:
        return [*super().hook_point_names(), points.LOGITS]

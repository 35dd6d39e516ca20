"""A from-scratch encoder–decoder Transformer built from the encoder's own parts.

The encoder stack is our EncoderLayer (models/scratch/encoder.py). A decoder layer adds one sub-layer
between its self-attention and its feed-forward: cross-attention, whose queries come from the
decoder and whose keys and values come from the encoder's output. Every attention is the same
MultiHeadAttention (models/scratch/attention.py); every layer hands its weights back explicitly.

Both stacks end with a LayerNorm, as torch.nn.Transformer's do, so that with copied weights the
body (no embeddings) computes what torch.nn.Transformer computes.

Dimensions: B batch, S source tokens, T target tokens, L layers, H heads, Q/K query/key
positions, D model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.hooks import points
from models.hooks.run import hook, planned_start
from models.scratch.attention import MultiHeadAttention, causal_mask
from models.scratch.config import EncoderConfig, check_layer_settings
from models.scratch.embeddings import Embeddings
from models.scratch.encoder import EncoderLayer, layer_point_names, name_points
from models.scratch.feed_forward import FeedForward


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes and switches of the encoder–decoder.

    `norm_style="post"` is the original Transformer (norm after each residual sum); `"pre"`
    normalises before each sub-layer (torch's `norm_first=True`).
    """

    source_vocab_size: int = 64
    target_vocab_size: int = 64
    max_positions: int = 32
    hidden_size: int = 64
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    intermediate_size: int = 128
    dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    norm_style: str = "pre"

    def __post_init__(self) -> None:
        check_layer_settings(self, ("source_vocab_size", "target_vocab_size", "max_positions",
                                    "hidden_size", "num_heads", "num_encoder_layers",
                                    "num_decoder_layers", "intermediate_size"))

    def parts(self, vocab_size: int = 1) -> EncoderConfig:
        """The settings the shared parts (attention, feed-forward, embeddings) are built from."""
        return EncoderConfig(
            vocab_size=vocab_size, max_positions=self.max_positions, type_vocab_size=0,
            hidden_size=self.hidden_size, num_heads=self.num_heads, num_layers=1,
            intermediate_size=self.intermediate_size, dropout=self.dropout,
            layer_norm_eps=self.layer_norm_eps, norm_style=self.norm_style,
        )


@dataclass(frozen=True)
class Seq2SeqOutput:
    logits: torch.Tensor | None  # (B, T, V); None from the body alone
    last_hidden_state: torch.Tensor  # (B, T, D), the decoder's output
    memory: torch.Tensor  # (B, S, D), the encoder's output
    encoder_attentions: tuple[torch.Tensor, ...]  # L_enc of (B, H, S, S)
    decoder_attentions: tuple[torch.Tensor, ...]  # L_dec of (B, H, T, T), causal
    cross_attentions: tuple[torch.Tensor, ...]  # L_dec of (B, H, T, S)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output, feed-forward.

    Each sub-layer sits in a residual connection with a LayerNorm: pre-norm
    x + sublayer(norm(x)), or post-norm norm(x + sublayer(x)).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.pre_norm = config.norm_style == "pre"
        self.self_attention = MultiHeadAttention(config)
        self.self_attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.cross_attention = MultiHeadAttention(config)
        self.cross_attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.hook_prefix: str | None = None

    def _point(self, name: str, value: torch.Tensor) -> torch.Tensor:
        return value if self.hook_prefix is None else hook(f"{self.hook_prefix}.{name}", value)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, D), memory (B, S, D); masks bool, True = may attend, broadcasting to
        (B, H, T, T) and (B, H, T, S). Returns (x (B, T, D), self weights (B, H, T, T),
        cross weights (B, H, T, S))."""
        point = self._point
        x = point("hook_resid_pre", x)
        if self.pre_norm:
            attended, self_weights = self.self_attention(
                point("ln1.hook_normalized", self.self_attention_norm(x)), self_mask)
            x = point("hook_resid_mid", x + self.dropout(point("hook_attn_out", attended)))
            attended, cross_weights = self.cross_attention(
                self.cross_attention_norm(x), memory_mask, memory=memory)
            x = x + self.dropout(attended)
            moved = self.feed_forward(point("ln2.hook_normalized", self.feed_forward_norm(x)))
            x = x + self.dropout(point("hook_mlp_out", moved))
        else:
            attended, self_weights = self.self_attention(x, self_mask)
            x = point("hook_resid_mid",
                      self.self_attention_norm(x + self.dropout(point("hook_attn_out", attended))))
            attended, cross_weights = self.cross_attention(x, memory_mask, memory=memory)
            x = self.cross_attention_norm(x + self.dropout(attended))
            moved = point("hook_mlp_out", self.feed_forward(x))
            x = self.feed_forward_norm(x + self.dropout(moved))
        return point("hook_resid_post", x), self_weights, cross_weights


class EncoderDecoder(nn.Module):
    """The body: encoder layers + final norm, decoder layers + final norm (no embeddings)."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        parts = config.parts()
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(parts) for _ in range(config.num_encoder_layers))
        self.encoder_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(parts) for _ in range(config.num_decoder_layers))
        self.decoder_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        name_points(self.encoder_layers, "encoder")
        name_points(self.decoder_layers, "decoder")

    def encode(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """x (B, S, D) -> (memory (B, S, D), L_enc of weights (B, H, S, S))."""
        attentions = []
        x = hook(f"encoder.{points.EMBED}", x)
        start = planned_start("encoder")  # a run's plan may skip the first layers
        for layer in self.encoder_layers[start:]:
            x, weights = layer(x, mask)
            attentions.append(weights)
        return hook(f"encoder.{points.FINAL}", self.encoder_norm(x)), tuple(attentions)

    def decode(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """x (B, T, D) -> (x (B, T, D), self weights L x (B, H, T, T), cross L x (B, H, T, S))."""
        self_attentions, cross_attentions = [], []
        x = hook(f"decoder.{points.EMBED}", x)
        for layer in self.decoder_layers[planned_start("decoder"):]:
            x, self_weights, cross_weights = layer(x, memory, self_mask, memory_mask)
            self_attentions.append(self_weights)
            cross_attentions.append(cross_weights)
        return (hook(f"decoder.{points.FINAL}", self.decoder_norm(x)), tuple(self_attentions),
                tuple(cross_attentions))

    def forward(
        self,
        source: torch.Tensor,
        target: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> Seq2SeqOutput:
        """source (B, S, D), target (B, T, D); bool masks, True = may attend."""
        memory, encoder_attentions = self.encode(source, source_mask)
        x, decoder_attentions, cross_attentions = self.decode(
            target, memory, target_mask, memory_mask)
        return Seq2SeqOutput(None, x, memory, encoder_attentions, decoder_attentions,
                             cross_attentions)


def padding_masks(
    source_real: torch.Tensor, target_real: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bool masks (True = may attend) from which tokens are real (B, S) and (B, T).

    Returns the encoder's (B, 1, S, S), the decoder's causal (B, 1, T, T) and the
    cross-attention's (B, 1, T, S). Padded keys are hidden; padded queries still see real keys.
    """
    sources, targets = source_real.size(1), target_real.size(1)
    source_keys = source_real.bool()[:, None, None, :]  # (B, 1, 1, S)
    target_keys = target_real.bool()[:, None, None, :]  # (B, 1, 1, T)
    causal = causal_mask(targets, source_real.device)[None, None]  # (1, 1, T, T)
    encoder_mask = source_keys.expand(-1, 1, sources, sources)  # (B, 1, S, S)
    decoder_mask = causal & target_keys  # (B, 1, T, T)
    cross_mask = source_keys.expand(-1, 1, targets, sources)  # (B, 1, T, S)
    return encoder_mask, decoder_mask, cross_mask


class Seq2SeqModel(nn.Module):
    """Embeddings for both languages, the body, and a linear layer onto the target vocabulary.

    It names the hook points of an encoder-decoder (models/hooks/points.py: `encoder.` and
    `decoder.` stacks, `cross_attn` in the decoder's layers)."""

    _explorer_hooked = True

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        self.source_embeddings = Embeddings(config.parts(config.source_vocab_size))
        self.source_embeddings.hook_prefix = "encoder"
        self.target_embeddings = Embeddings(config.parts(config.target_vocab_size))
        self.target_embeddings.hook_prefix = "decoder"
        self.body = EncoderDecoder(config)
        self.to_vocabulary = nn.Linear(config.hidden_size, config.target_vocab_size)

    def hook_point_names(self) -> list[str]:
        pre_norm = self.config.norm_style == "pre"
        names = []
        for stack, count, modules in (
                ("encoder", self.config.num_encoder_layers, ("attn",)),
                ("decoder", self.config.num_decoder_layers, ("attn", "cross_attn"))):
            names += [f"{stack}.{points.TOKEN_EMBED}", f"{stack}.{points.POS_EMBED}",
                      f"{stack}.{points.EMBED}"]
            for index in range(count):
                names += layer_point_names(index, pre_norm, stack, modules)
            names.append(f"{stack}.{points.FINAL}")
        return names + [points.LOGITS]

    def attention_output_weight(self, layer: int, stack: str = "encoder") -> torch.Tensor:
        layers = self.body.encoder_layers if stack == "encoder" else self.body.decoder_layers
        block = layers[layer]
        attention = getattr(block, "attention", None) or block.self_attention
        return attention.output.weight.detach()

    def encode(
        self, source_ids: torch.Tensor, source_real: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """source_ids (B, S) -> (memory (B, S, D), L_enc of (B, H, S, S))."""
        mask = None
        if source_real is not None:
            count = source_ids.size(1)
            mask = source_real.bool()[:, None, None, :].expand(-1, 1, count, count)  # (B, 1, S, S)
        return self.body.encode(self.source_embeddings(source_ids), mask)

    def decode(
        self,
        target_ids: torch.Tensor,
        memory: torch.Tensor,
        source_real: torch.Tensor | None = None,
        target_real: torch.Tensor | None = None,
    ) -> Seq2SeqOutput:
        """target_ids (B, T), the decoder's input (<bos>, then the target shifted right), read
        against memory (B, S, D). The output's encoder_attentions are left empty."""
        batch, targets = target_ids.shape
        if source_real is None:
            source_real = torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
        if target_real is None:
            target_real = torch.ones(batch, targets, dtype=torch.bool, device=target_ids.device)
        _, self_mask, cross_mask = padding_masks(source_real, target_real)
        x, self_attentions, cross_attentions = self.body.decode(
            self.target_embeddings(target_ids), memory, self_mask, cross_mask)  # (B, T, D)
        logits = hook(points.LOGITS, self.to_vocabulary(x))  # (B, T, V)
        return Seq2SeqOutput(logits, x, memory, (), self_attentions, cross_attentions)

    def forward(
        self,
        source_ids: torch.Tensor,
        target_ids: torch.Tensor,
        source_real: torch.Tensor | None = None,
        target_real: torch.Tensor | None = None,
    ) -> Seq2SeqOutput:
        """source_ids (B, S), target_ids (B, T) (the decoder's input: <bos> then the target
        shifted right); source_real / target_real (B, S) / (B, T) with True = a real token."""
        memory, encoder_attentions = self.encode(source_ids, source_real)
        decoded = self.decode(target_ids, memory, source_real, target_real)
        return Seq2SeqOutput(decoded.logits, decoded.last_hidden_state, memory,
                             encoder_attentions, decoded.decoder_attentions,
                             decoded.cross_attentions)

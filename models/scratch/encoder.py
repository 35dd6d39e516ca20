"""The from-scratch encoder: embeddings, then a stack of attention + feed-forward layers.

It names the same hook points as every other model (models/hooks/points.py), so a run reads
and edits it exactly as it does a Hugging Face model: the modules call `models.hooks.run.hook`
at each point (TransformerLens' HookPoint idea), with no hooks installed on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.hooks import points
from models.hooks.run import hook, planned_start
from models.scratch.attention import MultiHeadAttention, causal_mask
from models.scratch.config import EncoderConfig
from models.scratch.embeddings import Embeddings
from models.scratch.feed_forward import FeedForward


@dataclass(frozen=True)
class EncoderOutput:
    last_hidden_state: torch.Tensor  # (B, T, D)
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 of (B, T, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...]  # L of (B, H, Q, K)
    mask: torch.Tensor | None  # bool (B, 1, Q, K), True = may attend


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each wrapped in a residual connection and a LayerNorm.

    Pre-norm: x + sublayer(norm(x)). Post-norm (BERT): norm(x + sublayer(x)).
    `hook_prefix` ("blocks.3", set by the model that holds it) names its hook points.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.pre_norm = config.norm_style == "pre"
        self.attention = MultiHeadAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.hook_prefix: str | None = None

    def _point(self, name: str, value: torch.Tensor) -> torch.Tensor:
        return value if self.hook_prefix is None else hook(f"{self.hook_prefix}.{name}", value)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> (x (B, T, D), weights (B, H, Q, K))."""
        point = self._point
        x = point("hook_resid_pre", x)
        if self.pre_norm:
            attended, weights = self.attention(point("ln1.hook_normalized",
                                                     self.attention_norm(x)), mask)
            x = point("hook_resid_mid", x + self.dropout(point("hook_attn_out", attended)))
            moved = self.feed_forward(point("ln2.hook_normalized", self.feed_forward_norm(x)))
            x = x + self.dropout(point("hook_mlp_out", moved))
        else:
            attended, weights = self.attention(x, mask)
            x = point("hook_resid_mid",
                      self.attention_norm(x + self.dropout(point("hook_attn_out", attended))))
            moved = point("hook_mlp_out", self.feed_forward(x))
            x = self.feed_forward_norm(x + self.dropout(moved))
        return point("hook_resid_post", x), weights


def name_points(layers: nn.ModuleList, stack: str = "") -> None:
    """Give each layer (and its attention and feed-forward) the prefix of its hook points;
    call again after replacing a layer's attention (models/scratch/adaptive_span.py does)."""
    for index, layer in enumerate(layers):
        prefix = f"{stack}.blocks.{index}" if stack else f"blocks.{index}"
        layer.hook_prefix = prefix
        layer.feed_forward.hook_prefix = f"{prefix}.mlp"
        for attribute, kind in (("attention", "attn"), ("self_attention", "attn"),
                                ("cross_attention", "cross_attn")):
            module = getattr(layer, attribute, None)
            if module is not None:
                module.hook_prefix = f"{prefix}.{kind}"


def layer_point_names(index: int, pre_norm: bool, stack: str = "",
                      modules: tuple[str, ...] = ("attn",)) -> list[str]:
    """The hook points of one from-scratch layer, in the order its forward visits them."""
    names = [points.resid_pre(index, stack)]
    if pre_norm:
        names.append(points.ln1(index, stack))
    names += [points.Point(stack, index, kind, modules[0]).name for kind in points.ATTENTION_POINTS]
    names += [points.attn_out(index, stack), points.resid_mid(index, stack)]
    for module in modules[1:]:  # a decoder layer's cross-attention reads the stream after resid_mid
        names += [points.Point(stack, index, kind, module).name for kind in points.ATTENTION_POINTS]
    if pre_norm:
        names.append(points.ln2(index, stack))
    names += [points.mlp_pre(index, stack), points.mlp_post(index, stack),
              points.mlp_out(index, stack), points.resid_post(index, stack)]
    return names


class Encoder(nn.Module):
    _explorer_hooked = True  # its modules call their hook points themselves

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.embeddings.hook_prefix = ""
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_layers))
        name_points(self.layers)

    def build_mask(
        self, attention_mask: torch.Tensor | None, num_tokens: int, device: torch.device
    ) -> torch.Tensor | None:
        """Combine padding (attention_mask (B, K), 1 = real token) and the optional causal mask."""
        mask = None
        if attention_mask is not None:
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, K)
        if self.config.causal:
            causal = causal_mask(num_tokens, device)[None, None]  # (1, 1, Q, K)
            mask = causal if mask is None else mask & causal
        if mask is not None:
            mask = mask.expand(-1, 1, num_tokens, num_tokens)  # (B, 1, Q, K)
        return mask

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> EncoderOutput:
        """input_ids (B, T); token_type_ids (B, T); attention_mask (B, T) with 1 = real token."""
        mask = self.build_mask(attention_mask, input_ids.size(1), input_ids.device)
        x = hook(points.EMBED, self.embeddings(input_ids, token_type_ids))  # (B, T, D)
        start = planned_start()
        hidden_states = [x]
        attentions = []
        for index, layer in enumerate(self.layers):
            if index < start:  # the run's plan skips it: its input is handed on
                continue
            x, weights = layer(x, mask)
            hidden_states.append(x)
            attentions.append(weights)
        x = hook(points.FINAL, x)  # no final norm: the last layer's output is what a head reads
        return EncoderOutput(x, tuple(hidden_states), tuple(attentions), mask)

    def hook_layer_count(self) -> int:
        return len(self.layers)

    def hook_point_names(self) -> list[str]:
        pre_norm = self.config.norm_style == "pre"
        names = [points.TOKEN_EMBED, points.POS_EMBED]
        if self.embeddings.segments is not None:
            names.append(points.SEGMENT_EMBED)
        names.append(points.EMBED)
        for index in range(len(self.layers)):
            names += layer_point_names(index, pre_norm)
        return names + [points.FINAL]

    def attention_output_weight(self, layer: int) -> torch.Tensor:
        """(D, H*Dh) layer `layer`'s output projection W_O (the same view on every call)."""
        module = self.layers[layer].attention.output
        kept = module.__dict__.get("_explorer_output_weight")
        if kept is None or kept[0] is not module.weight:
            kept = (module.weight, module.weight.detach())
            module.__dict__["_explorer_output_weight"] = kept
        return kept[1]

"""Adaptive attention span (Sukhbaatar et al. 2019): a soft, learnable limit on how far a head looks.

Each head h has a span z_h. A key at distance x from the query is weighted by the soft mask
m_z(x) = clamp((R + z - x) / R, 0, 1): 1 up to distance z, a linear ramp of width R down to 0 at
z + R, and 0 beyond. The masked weights are renormalised per row (the paper's
m(x) exp(s) / sum m exp(s), which equals multiplying the softmax by m and dividing by the row sum).
Because the ramp has a slope, the loss has a gradient with respect to z and each head learns it.

Distances: causal form x = i - j for keys j <= i (as in the paper; later keys are outside the span),
symmetric form x = |i - j| for encoders. The token itself is at x = 0, where m = 1 for any z >= 0.

Dimension letters: B batch, T tokens, L layers, H heads, Q query positions, K key positions,
D model width, Dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.scratch.attention import MultiHeadAttention, scaled_dot_product_attention
from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder
from models.hooks.record import KNOWN_MASKS, AttentionRecord

RAMP_SAMPLES = 200  # points of the ramp curve besides its corners


@dataclass(frozen=True)
class SpanConfig:
    """max_span S bounds each head's z to [0, S]; ramp R > 0 is the width of the soft edge;
    penalty lambda >= 0 weighs lambda * mean(z) in the loss; initial_span is z before training."""

    num_heads: int = 4
    max_span: float = 32.0
    ramp: float = 4.0
    penalty: float = 0.0
    causal: bool = True
    initial_span: float | None = None  # None = max_span (start seeing everything)

    def __post_init__(self) -> None:
        if not isinstance(self.num_heads, int) or self.num_heads < 1:
            raise ValueError(f"SpanConfig.num_heads must be a positive integer, got {self.num_heads!r}")
        if not self.max_span > 0:
            raise ValueError(f"SpanConfig.max_span (S) must be > 0, got {self.max_span}")
        if not self.ramp > 0:
            raise ValueError(f"SpanConfig.ramp (R) must be > 0, got {self.ramp}")
        if not self.penalty >= 0:
            raise ValueError(f"SpanConfig.penalty (lambda) must be >= 0, got {self.penalty}")
        if self.initial_span is not None and not 0 <= self.initial_span <= self.max_span:
            raise ValueError(
                f"SpanConfig.initial_span must be in [0, {self.max_span}], got {self.initial_span}"
            )

    @property
    def start_span(self) -> float:
        return self.max_span if self.initial_span is None else float(self.initial_span)


def soft_span_mask(distance: torch.Tensor, span: torch.Tensor, ramp: float) -> torch.Tensor:
    """m_z(x) = clamp((R + z - x) / R, 0, 1), elementwise with broadcasting; differentiable in z."""
    if not ramp > 0:
        raise ValueError(f"the ramp R must be > 0, got {ramp}")
    return ((ramp + span - distance) / ramp).clamp(0.0, 1.0)


def span_distances(
    num_tokens: int, causal: bool, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(distance (Q, K) float, inside bool (Q, K)): how far key j is from query i, and which keys
    the form allows at all (causal: j <= i; symmetric: every key)."""
    positions = torch.arange(num_tokens, device=device, dtype=torch.float32)
    offset = positions[:, None] - positions[None, :]  # (Q, K): i - j
    if causal:
        return offset.clamp_min(0.0), offset >= 0
    return offset.abs(), torch.ones_like(offset, dtype=torch.bool)


def head_span_mask(spans: torch.Tensor, ramp: float, num_tokens: int, causal: bool) -> torch.Tensor:
    """Soft mask per head: spans (H,) -> (H, Q, K), 0 for keys outside the form."""
    distance, inside = span_distances(num_tokens, causal, spans.device)
    soft = soft_span_mask(distance, spans[:, None, None], ramp)  # (H, Q, K)
    return soft * inside


def renormalise(weights: torch.Tensor, soft_mask: torch.Tensor) -> torch.Tensor:
    """weights * mask, each row divided by its new sum; a row left with nothing stays all zeros."""
    masked = weights * soft_mask  # (..., Q, K)
    total = masked.sum(dim=-1, keepdim=True)  # (..., Q, 1)
    tiny = torch.finfo(masked.dtype).tiny
    return torch.where(total > tiny, masked / total.clamp_min(tiny), torch.zeros_like(masked))


class SpanMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention whose weights are cut by each head's learnable soft span.

    Computes every score, then masks: this shows what is learned, it saves no compute
    (the paper crops the keys beyond the largest span to save it).
    """

    def __init__(self, config: EncoderConfig, span: SpanConfig):
        super().__init__(config)
        if span.num_heads != config.num_heads:
            raise ValueError(f"SpanConfig has {span.num_heads} heads, the encoder {config.num_heads}")
        self.span_config = span
        self.span = nn.Parameter(torch.full((span.num_heads,), span.start_span))  # z per head

    def spans(self) -> torch.Tensor:
        """z per head (H,), clamped to [0, S] (the gradient passes inside the range)."""
        return self.span.clamp(0.0, self.span_config.max_span)

    @torch.no_grad()
    def clamp_(self) -> None:
        """Keep the stored z inside [0, S]; call after each optimiser step, as the paper does."""
        self.span.clamp_(0.0, self.span_config.max_span)

    def span_penalty(self) -> torch.Tensor:
        """lambda * mean(z): the loss term that makes a head pay for looking far."""
        return self.span_config.penalty * self.spans().mean()

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D), mask bool broadcasting to (B, H, Q, K). Returns (output (B, T, D), weights (B, H, Q, K))."""
        query, key, value = self.project(x)  # (B, H, T, Dh) each
        _, weights = scaled_dot_product_attention(query, key, value, mask)  # (B, H, Q, K)
        soft = head_span_mask(self.spans(), self.span_config.ramp, x.size(1),
                              self.span_config.causal)  # (H, Q, K)
        weights = renormalise(weights, soft[None])  # (B, H, Q, K)
        if self.training and self.dropout_p > 0.0:
            weights = nn.functional.dropout(weights, p=self.dropout_p)
        heads = weights @ value  # (B, H, Q, Dh)
        batch, _, tokens, _ = heads.shape
        merged = heads.transpose(1, 2).reshape(batch, tokens, -1)  # (B, T, D)
        return self.output(merged), weights


def span_encoder(config: EncoderConfig, span: SpanConfig) -> Encoder:
    """The from-scratch encoder with every layer's attention replaced by span-masked attention."""
    encoder = Encoder(config)
    for layer in encoder.layers:
        layer.attention = SpanMultiHeadAttention(config, span)
    return encoder


def span_modules(encoder: Encoder) -> list[SpanMultiHeadAttention]:
    return [layer.attention for layer in encoder.layers
            if isinstance(layer.attention, SpanMultiHeadAttention)]


@dataclass(frozen=True)
class SpanApplied:
    """A record after a span: weights masked and renormalised, and what the span took away.

    removed: (L, H, Q) share of each row's attention mass that fell outside the span (0..1).
    emptied: (L, H, Q) rows that kept no mass at all and are therefore all zeros.
    """

    record: AttentionRecord
    spans: np.ndarray  # (L, H)
    ramp: float
    causal: bool
    removed: np.ndarray
    emptied: np.ndarray

    def mean_removed(self, layer: int, head: int) -> float:
        """Share of one head's attention mass the span removed, averaged over its query rows."""
        return float(self.removed[layer, head].mean())

    def emptied_rows(self, layer: int, head: int) -> list[int]:
        return [int(q) for q in np.flatnonzero(self.emptied[layer, head])]


def apply_span(record: AttentionRecord, spans, ramp: float, causal: bool) -> SpanApplied:
    """Apply z (a number, one per head (H,), or one per layer and head (L, H)) and ramp R to every
    head of an existing record, as if the heads had been trained with that span."""
    layers, heads, tokens, _ = record.weights.shape
    spans = np.asarray(spans, dtype=np.float32)
    try:
        spans = np.broadcast_to(spans, (layers, heads)).copy()
    except ValueError:
        raise ValueError(
            f"spans of shape {spans.shape} do not fit {layers} layers x {heads} heads") from None
    if not np.all(np.isfinite(spans)) or spans.min() < 0:
        raise ValueError("every span z must be a finite number >= 0")
    weights = torch.from_numpy(np.array(record.weights))  # (L, H, Q, K)
    distance, inside = span_distances(tokens, causal)
    soft = soft_span_mask(distance, torch.from_numpy(spans)[:, :, None, None], ramp) * inside  # (L, H, Q, K)
    before = weights.sum(dim=-1)  # (L, H, Q)
    kept = (weights * soft).sum(dim=-1)  # (L, H, Q)
    after = renormalise(weights, soft)  # (L, H, Q, K)
    removed = torch.where(before > 0, 1.0 - kept / before.clamp_min(torch.finfo(kept.dtype).tiny),
                          torch.zeros_like(before)).clamp(0.0, 1.0)
    emptied = (before > 0) & (after.sum(dim=-1) == 0)
    added = {"span"} | ({"causal"} if causal else set())
    masks = tuple(m for m in KNOWN_MASKS if m in set(record.masks) | added)
    masked = AttentionRecord(
        tokens=record.tokens, weights=after.numpy(), source=record.source, masks=masks,
        segment_ids=record.segment_ids, special_positions=record.special_positions,
        dropped_tokens=record.dropped_tokens,
    )
    return SpanApplied(masked, spans, float(ramp), causal, removed.numpy(), emptied.numpy())


@dataclass(frozen=True)
class RampCurve:
    """m_z(x) sampled over distances 0..max_distance, corners z, z + R/2 and z + R included."""

    distances: np.ndarray
    values: np.ndarray
    span: float
    ramp: float


def ramp_curve(span: float, ramp: float, max_distance: float) -> RampCurve:
    if span < 0:
        raise ValueError(f"the span z must be >= 0, got {span}")
    corners = [span, span + ramp / 2, span + ramp]
    grid = np.linspace(0.0, max_distance, RAMP_SAMPLES)
    distances = np.unique(np.concatenate([grid, [c for c in corners if c <= max_distance]]))
    values = soft_span_mask(torch.from_numpy(distances), torch.tensor(float(span), dtype=torch.float64),
                            ramp)
    return RampCurve(distances, values.numpy(), float(span), float(ramp))

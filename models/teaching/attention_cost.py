"""The n² cost of attention: the chapter's arithmetic, and the same layer timed on this machine.

Chapter 0 counts it: with n tokens, every query is compared with every key, n² dot products per
head and layer, while the projections and the feed-forward part treat each token on its own,
n times the same work. For one layer of width D, H heads of width Dh = D / H and a feed-forward
width F (a multiply-add counts as 2 FLOPs, the usual convention):
  projections  q, k, v:      3 · 2·T·D·D
  scores       q·kᵀ:         H · T·T · 2·Dh  = 2·T²·D
  softmax      exp, sum, ÷:  3 · H·T²
  weighted sum weights·v:    H · T·T · 2·Dh  = 2·T²·D
  output projection:         2·T·D·D
  feed-forward (2 linears):  2 · 2·T·D·F
The T² terms win once T passes about 2·D + F tokens (`crossover_tokens`). Memory grows the
same way: the scores and weights are H·T² numbers each, every other activation is T·D or T·F.

`measure` runs exactly those parts with random weights at a bounded set of lengths
(models/limits.py) and times each part, keeping the fastest of a few runs.

Dimensions: T tokens, D width, H heads, Dh head width, F feed-forward width.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from models.limits import COST_LONGEST_TOKENS, COST_REPEATS, MIB

SHORTEST_TOKENS = 64  # the first length measured; each next one doubles it
# (T,) the lengths measured: doubling from SHORTEST_TOKENS up to the limit.
COST_LENGTHS = tuple(2 ** power for power in range(SHORTEST_TOKENS.bit_length() - 1,
                                                   COST_LONGEST_TOKENS.bit_length()))

FLOAT_BYTES = 4  # float32


@dataclass(frozen=True)
class LayerShape:
    """The sizes of one encoder layer."""

    name: str
    width: int
    heads: int
    feed_forward: int

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} does not split into {self.heads} heads")

    @property
    def head_width(self) -> int:
        return self.width // self.heads


MINILM = LayerShape("MiniLM (the embedded encoder)", 384, 12, 1536)
BERT_BASE = LayerShape("BERT-base", 768, 12, 3072)
SHAPES = (MINILM, BERT_BASE)


@dataclass(frozen=True)
class FlopCount:
    """One layer's floating-point operations at T tokens, part by part."""

    tokens: int
    projections: int
    scores: int
    softmax: int
    weighted_sum: int
    output: int
    feed_forward: int

    @property
    def quadratic(self) -> int:
        """The parts that grow with T²: scores, softmax and the weighted sum."""
        return self.scores + self.softmax + self.weighted_sum

    @property
    def linear(self) -> int:
        """The parts that grow with T: the projections and the feed-forward block."""
        return self.projections + self.output + self.feed_forward

    @property
    def total(self) -> int:
        return self.quadratic + self.linear


def flop_count(tokens: int, shape: LayerShape) -> FlopCount:
    """The chapter's count for one layer at `tokens` tokens."""
    t, d, h, dh, f = tokens, shape.width, shape.heads, shape.head_width, shape.feed_forward
    return FlopCount(tokens=t, projections=3 * 2 * t * d * d, scores=h * t * t * 2 * dh,
                     softmax=3 * h * t * t, weighted_sum=h * t * t * 2 * dh, output=2 * t * d * d,
                     feed_forward=2 * 2 * t * d * f)


def crossover_tokens(shape: LayerShape) -> int:
    """The fewest tokens at which the T² parts cost more FLOPs than the linear parts."""
    d, h, f = shape.width, shape.heads, shape.feed_forward
    # quadratic(T) = T² (4D + 3H), linear(T) = T (8D² + 4DF): equal at T = (8D² + 4DF) / (4D + 3H)
    return math.floor((8 * d * d + 4 * d * f) / (4 * d + 3 * h)) + 1


def attention_bytes(tokens: int, shape: LayerShape) -> int:
    """The scores and the weights of one layer: 2 · H · T² float32 numbers."""
    return 2 * shape.heads * tokens * tokens * FLOAT_BYTES


def linear_bytes(tokens: int, shape: LayerShape) -> int:
    """The activations of the linear parts: q, k, v, the output (4 · T·D) and the feed-forward's
    expanded vectors (T·F)."""
    return (4 * tokens * shape.width + tokens * shape.feed_forward) * FLOAT_BYTES


@dataclass(frozen=True)
class Timing:
    """One length's measurement: seconds per part (fastest run) and bytes the attention's scores
    and weights took (read from the tensors the run made)."""

    tokens: int
    projections_s: float
    attention_s: float
    feed_forward_s: float
    attention_bytes: int
    linear_bytes: int

    @property
    def attention_mib(self) -> float:
        return self.attention_bytes / MIB

    @property
    def linear_mib(self) -> float:
        return self.linear_bytes / MIB


@dataclass(frozen=True)
class CostMeasurement:
    shape: LayerShape
    timings: tuple[Timing, ...]
    threads: int


Progress = Callable[[int, int], None]


def _fastest(work: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def measure_length(tokens: int, shape: LayerShape, repeats: int = COST_REPEATS,
                   seed: int = 0) -> Timing:
    """Time one layer's parts at `tokens` tokens, random input and weights."""
    generator = torch.Generator().manual_seed(seed)
    d, h, dh, f = shape.width, shape.heads, shape.head_width, shape.feed_forward
    x = torch.randn(tokens, d, generator=generator)  # (T, D)
    w_qkv = torch.randn(d, 3 * d, generator=generator) / math.sqrt(d)  # (D, 3D)
    w_out = torch.randn(d, d, generator=generator) / math.sqrt(d)  # (D, D)
    w_up = torch.randn(d, f, generator=generator) / math.sqrt(d)  # (D, F)
    w_down = torch.randn(f, d, generator=generator) / math.sqrt(f)  # (F, D)
    kept: dict[str, torch.Tensor] = {}

    def projections() -> None:
        kept["qkv"] = x @ w_qkv  # (T, 3D)
        kept["out"] = x @ w_out  # (T, D)

    def attention() -> None:
        q, k, v = kept["qkv"].view(tokens, 3, h, dh).permute(1, 2, 0, 3)  # 3 x (H, T, Dh)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)  # (H, Q, K)
        weights = torch.softmax(scores, dim=-1)  # (H, Q, K)
        kept["z"] = weights @ v  # (H, Q, Dh)
        kept["scores"], kept["weights"] = scores, weights

    def feed_forward() -> None:
        kept["up"] = torch.nn.functional.gelu(x @ w_up)  # (T, F)
        kept["mlp"] = kept["up"] @ w_down  # (T, D)

    with torch.inference_mode():
        projections_s = _fastest(projections, repeats)
        attention_s = _fastest(attention, repeats)
        feed_forward_s = _fastest(feed_forward, repeats)
    square = sum(kept[name].untyped_storage().nbytes() for name in ("scores", "weights"))
    linear = sum(kept[name].untyped_storage().nbytes() for name in ("qkv", "out", "up"))
    return Timing(tokens, projections_s, attention_s, feed_forward_s, square, linear)


def measure(shape: LayerShape, lengths: tuple[int, ...] = COST_LENGTHS,
            repeats: int = COST_REPEATS, progress: Progress | None = None) -> CostMeasurement:
    """Every length in turn (at most the budget's), reporting progress after each."""
    if not lengths or max(lengths) > COST_LONGEST_TOKENS or min(lengths) < 1:
        raise ValueError(f"Measure between 1 and {COST_LONGEST_TOKENS} tokens.")
    timings = []
    for done, tokens in enumerate(lengths, start=1):
        timings.append(measure_length(tokens, shape, repeats))
        if progress is not None:
            progress(done, len(lengths))
    return CostMeasurement(shape, tuple(timings), torch.get_num_threads())

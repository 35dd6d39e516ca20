"""One input followed through one encoder layer, every intermediate with its live shape.

Dimension letters: B batch, T tokens, Q/K query/key positions, D model width, H heads,
Dh head width, F feed-forward width.

`walk_layer` runs the model once (one run, models/hooks/run.py) that keeps the hook points
the walk shows, up to the chosen layer's output, where it stops: the token, position and
segment embeddings, the layer's input, its queries, keys and values, the heads fed to W_O,
the attention output, the norms, the feed-forward's two sides and its output, and the layer's
attention weights, all as the model itself computed them. The sums before each LayerNorm are
formed from those points in the order the model adds them. It then recomputes the layer step
by step from the layer's input and the layer's own weight matrices (Q = E·W_Q + b, the split
into heads, QKᵀ/√Dh, the mask, the softmax, the weighted values, the concatenation, W_O, the
residuals, the norms, the feed-forward) and records, for every step, the recomputed tensor, the
shape of the model's own tensor at that point and the largest difference between the two. The
walk's last tensor is therefore checked against the layer's own output. Nothing is attached to
the model: another session running it meanwhile is not seen, and sees nothing of the walk.

Two layouts are read (models/teaching/walk_parts.py): the from-scratch
`models.scratch.encoder.Encoder` (pre- or post-norm) and a Hugging Face BERT (post-norm), e.g.
the embedded MiniLM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.hooks import points
from models.hooks.run import Run, run_model
from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder
from models.teaching.walk_parts import LayerParts, WalkUnavailable, layer_parts

__all__ = ["LayerWalk", "WalkInput", "WalkMismatch", "WalkStep", "WalkUnavailable", "WeightMatrix",
           "batch_texts", "encode_batch", "scratch_walk_config", "walk_layer"]

# The recomputed steps must equal the model's own tensors to float32 rounding.
AGREEMENT_TOLERANCE = 1e-4


class WalkMismatch(RuntimeError):
    """The recomputed output differs from the layer's own: the walk no longer matches the model."""


@dataclass(frozen=True)
class WalkInput:
    """A batch of token ids, padded at the end, with its padding mask and segment ids."""

    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T), 1 = real token
    token_type_ids: torch.Tensor  # (B, T)
    tokens: tuple[tuple[str, ...], ...]  # B rows of T tokens, [PAD] included

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.attention_mask.sum(dim=1))


def encode_batch(tokenizer, texts: list[str] | tuple[str, ...], length: int | None = None,
                 max_tokens: int = 512) -> WalkInput:
    """Tokenize `texts` into one batch. With `length`, every row is padded or cut to exactly
    `length` tokens (seed 004's (16, 32, 64) batch); without it, to the longest text."""
    if not texts or any(not text or not text.strip() for text in texts):
        raise ValueError("every sentence of the batch needs some text")
    padding = "max_length" if length is not None else True
    encoded = tokenizer(list(texts), padding=padding, truncation=True,
                        max_length=length if length is not None else max_tokens,
                        padding_side="right", return_tensors="pt", verbose=False)
    input_ids = encoded["input_ids"]  # (B, T)
    token_type_ids = encoded.get("token_type_ids")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # (B, T)
    tokens = tuple(tuple(tokenizer.convert_ids_to_tokens(row.tolist())) for row in input_ids)
    return WalkInput(input_ids, encoded["attention_mask"], token_type_ids, tokens)


@dataclass(frozen=True)
class WalkStep:
    """One station of the walk.

    value: the recomputed tensor, float32 numpy (bool for the mask).
    model_shape: the shape of the model's own tensor at this point (None where the model keeps
        no such tensor: then `reference` says what it was checked against instead).
    difference: max |value - the model's own tensor| (None if there is nothing to compare).
    """

    key: str
    title: str
    formula: str
    value: np.ndarray
    model_shape: tuple[int, ...] | None
    difference: float | None
    reference: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


@dataclass(frozen=True)
class WeightMatrix:
    """A weight matrix as it multiplies from the right (x · W): shape (in, out)."""

    symbol: str
    name: str
    matrix: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.matrix.shape)


@dataclass(frozen=True)
class LayerWalk:
    model_label: str
    layer: int
    num_layers: int
    num_heads: int
    head_size: int
    norm_style: str  # "pre" or "post"
    tokens: tuple[tuple[str, ...], ...]  # per batch item
    lengths: tuple[int, ...]  # real tokens per batch item
    steps: tuple[WalkStep, ...]
    matrices: tuple[WeightMatrix, ...]
    final_difference: float  # max |walk's last tensor - the layer's own output|
    _index: dict = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {step.key: step for step in self.steps})

    def step(self, key: str) -> WalkStep:
        return self._index[key]

    def has(self, key: str) -> bool:
        return key in self._index

    def matrix(self, symbol: str) -> WeightMatrix:
        return next(m for m in self.matrices if m.symbol == symbol)

    @property
    def batch_shape(self) -> tuple[int, int]:
        return (len(self.tokens), len(self.tokens[0]))

    @property
    def largest_difference(self) -> float:
        return max((s.difference for s in self.steps if s.difference is not None), default=0.0)

    def head_weights(self, item: int, head: int) -> np.ndarray:
        """(Q, K) softmax weights of one head for one batch item."""
        return self.step("weights").value[item, head]


def scratch_walk_config(vocab_size: int, hidden_size: int, num_heads: int, num_layers: int,
                        norm_style: str) -> EncoderConfig:
    """A from-scratch encoder of the chosen sizes; the head size is hidden_size / num_heads and the
    feed-forward is 4 × hidden_size wide (as in seed 004's encoder block)."""
    return EncoderConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_heads=num_heads,
                         num_layers=num_layers, intermediate_size=4 * hidden_size,
                         norm_style=norm_style)


def batch_texts(first: str, others: tuple[str, ...], batch_size: int) -> tuple[str, ...]:
    """`first` followed by the first batch_size - 1 of `others` (cycled if there are too few)."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    if batch_size > 1 and not others:
        raise ValueError("a batch of more than one sentence needs other sentences to fill it")
    rest = tuple(others[i % len(others)] for i in range(batch_size - 1)) if others else ()
    return (first, *rest)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().numpy().copy() if tensor.dtype != torch.bool else tensor.numpy().copy()


def _linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """x · W + b, with W (in, out) = the module's (out, in) weight transposed."""
    return F.linear(x, linear.weight, linear.bias)  # (B, T, out)


def _norm(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _walk_points(parts: LayerParts, layer: int) -> tuple[str, ...]:
    """The hook points the walk reads: the embeddings and layer `layer`'s points."""
    names = [*parts.embedding_order, points.EMBED, points.resid_pre(layer),
             points.q(layer), points.k(layer), points.v(layer), points.pattern(layer),
             points.z(layer), points.attn_out(layer), points.resid_mid(layer),
             points.mlp_pre(layer), points.mlp_post(layer), points.mlp_out(layer),
             points.resid_post(layer)]
    if parts.pre_norm:
        names += [points.ln1(layer), points.ln2(layer)]
    return tuple(names)


def _joined(heads: torch.Tensor) -> torch.Tensor:
    """(B, H, T, Dh) per-head vectors -> (B, T, H*Dh), the projection's own layout."""
    batch, _, tokens, _ = heads.shape
    return heads.transpose(1, 2).reshape(batch, tokens, -1)  # (B, T, D)


def _model_tensors(model: nn.Module, parts: LayerParts, batch: WalkInput,
                   layer: int) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """One run of the model on the (B, T) batch up to layer `layer`'s output: the model's own
    tensor at each step of the walk (by step key), and the from-scratch encoder's own mask."""
    run = Run(cache=_walk_points(parts, layer), stop_at=points.resid_post(layer))
    mask = None
    if isinstance(model, Encoder):
        inputs = dict(input_ids=batch.input_ids, token_type_ids=batch.token_type_ids,
                      attention_mask=batch.attention_mask)
        mask = model.build_mask(batch.attention_mask, batch.input_ids.size(1),
                                batch.input_ids.device)  # (B, 1, Q, K)
    else:
        inputs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                      token_type_ids=batch.token_type_ids)
    run_model(model, inputs, run)
    cache = run.cache
    embedded = cache[parts.embedding_order[0]]
    for name in parts.embedding_order[1:]:
        embedded = embedded + cache[name]  # (B, T, D), in the model's order
    pre, mid, post = (cache[points.resid_pre(layer)], cache[points.resid_mid(layer)],
                      cache[points.resid_post(layer)])
    attended, moved = cache[points.attn_out(layer)], cache[points.mlp_out(layer)]
    seen = {
        "tokens": cache[points.TOKEN_EMBED], "positions": cache[points.POS_EMBED],
        "embedding_sum": embedded, "embeddings": cache[points.EMBED], "layer_input": pre,
        "query": _joined(cache[points.q(layer)]), "key": _joined(cache[points.k(layer)]),
        "value": _joined(cache[points.v(layer)]), "weights": cache[points.pattern(layer)],
        "concatenated": cache[points.z(layer)].flatten(2),  # (B, T, H*Dh)
        "attention_output": attended, "expanded": cache[points.mlp_pre(layer)],
        "activated": cache[points.mlp_post(layer)], "contracted": moved, "layer_output": post,
    }
    if parts.segment is not None:
        seen["segments"] = cache[points.SEGMENT_EMBED]
    if parts.pre_norm:  # x + sublayer(norm(x))
        seen |= {"attention_norm": cache[points.ln1(layer)], "feed_forward_norm_input": mid,
                 "feed_forward_norm": cache[points.ln2(layer)]}
    else:  # norm(x + sublayer(x)): the sums are what each norm reads
        seen |= {"attention_norm_input": pre + attended, "attention_norm": mid,
                 "feed_forward_norm_input": mid + moved, "feed_forward_norm": post}
    return seen, mask


def walk_layer(model: nn.Module, batch: WalkInput, layer: int, model_label: str = "") -> LayerWalk:
    """Follow `batch` through layer `layer` of `model` (a from-scratch Encoder or a BERT, with
    its hook points: the app's loaders install them).

    The model must be in eval mode (dropout would make the steps random). Raises WalkUnavailable
    for other architectures, ValueError for a layer out of range or a model in training mode,
    WalkMismatch if the recomputed output differs from the layer's own.
    """
    if model.training:
        raise ValueError("the layer walk needs the model in eval mode (dropout off)")
    parts = layer_parts(model, layer)
    seen, encoder_mask = _model_tensors(model, parts, batch, layer)
    steps: list[WalkStep] = []

    def add(key, title, formula, value, model_key=None, reference_tensor=None, reference=""):
        own = seen.get(model_key) if model_key else reference_tensor
        difference = None  # stays None if the shapes differ: the tests then fail on the shape
        if own is not None and own.shape == value.shape:
            difference = float((value.float() - own.float()).abs().max()) if value.numel() else 0.0
        steps.append(WalkStep(key, title, formula, _numpy(value),
                              tuple(own.shape) if own is not None else None, difference, reference))
        return value

    batch_size, num_tokens = batch.input_ids.shape
    heads = parts.num_heads
    with torch.inference_mode():
        # Embeddings: a row of each table per token, summed, then normalised.
        tokens = add("tokens", "Token embeddings", "E_tok[input_ids]",
                     parts.word.weight[batch.input_ids], "tokens")  # (B, T, D)
        position_ids = torch.arange(num_tokens)[None, :]  # (1, T)
        positions = add("positions", "Position embeddings", "E_pos[0 … T−1]",
                        parts.position.weight[position_ids], "positions")  # (1, T, D)
        summed = tokens + positions  # (B, T, D)
        if parts.segment is not None:
            segments = add("segments", "Segment embeddings", "E_seg[token_type_ids]",
                           parts.segment.weight[batch.token_type_ids], "segments")  # (B, T, D)
            summed = summed + segments
        summed = add("embedding_sum", "Sum of the embeddings",
                     "E_tok + E_pos" + (" + E_seg" if parts.segment is not None else ""),
                     summed, "embedding_sum")
        embeddings = add("embeddings", "Layer norm of the sum", "LayerNorm(sum)",
                         _norm(summed, parts.embedding_norm), "embeddings")  # (B, T, D)
        x = seen["layer_input"] if layer else embeddings
        x = add("layer_input", f"Input of layer {layer}",
                "the embeddings" if layer == 0 else f"the output of layer {layer - 1}",
                x, "layer_input")  # (B, T, D)

        attention_in = x
        if parts.pre_norm:
            attention_in = add("attention_norm", "Layer norm (before attention)", "E = LayerNorm(x)",
                               _norm(x, parts.attention_norm), "attention_norm")

        query = add("query", "Queries", "Q = E·W_Q + b_Q", _linear(attention_in, parts.query), "query")
        key = add("key", "Keys", "K = E·W_K + b_K", _linear(attention_in, parts.key), "key")
        value = add("value", "Values", "V = E·W_V + b_V", _linear(attention_in, parts.value), "value")

        head_size = query.size(-1) // heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch_size, num_tokens, heads, head_size).transpose(1, 2)  # (B, H, T, Dh)

        q_heads = add("query_heads", "Queries split into heads", "reshape Q to (B, T, H, Dh), swap T and H",
                      split(query), reference="the projection's own output, reshaped the same way")
        k_heads = add("key_heads", "Keys split into heads", "the same for K", split(key),
                      reference="the projection's own output, reshaped the same way")
        v_heads = add("value_heads", "Values split into heads", "the same for V", split(value),
                      reference="the projection's own output, reshaped the same way")

        scores = add("scores", "Scores of every head", "QKᵀ / √d_k",
                     q_heads @ k_heads.transpose(-2, -1) / math.sqrt(head_size))  # (B, H, Q, K)
        if encoder_mask is not None:
            mask = encoder_mask  # (B, 1, Q, K), the encoder's own
        else:
            mask = batch.attention_mask.bool()[:, None, None, :].expand(
                -1, 1, num_tokens, num_tokens)  # (B, 1, Q, K)
        mask = add("mask", "Mask (True = may attend)", "padding keys are False",
                   mask, reference_tensor=encoder_mask, reference="the encoder's own mask")
        masked = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, Q, K)
        weights = F.softmax(masked, dim=-1)  # (B, H, Q, K)
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        weights = add("weights", "Attention weights", "softmax(QKᵀ / √d_k + mask)", weights,
                      "weights", reference="the model's own attention weights")
        head_outputs = add("head_outputs", "Weighted values of every head", "weights · V",
                           weights @ v_heads,  # (B, H, Q, Dh)
                           reference="torch's scaled_dot_product_attention gives the same")
        concatenated = add("concatenated", "Heads concatenated", "swap H and T back, join the heads",
                           head_outputs.transpose(1, 2).reshape(batch_size, num_tokens, -1),
                           "concatenated")  # (B, T, D)
        attended = add("attention_output", "Output projection", "concat · W_O + b_O",
                       _linear(concatenated, parts.output), "attention_output")  # (B, T, D)

        if parts.pre_norm:
            x = add("residual_1", "First residual", "x + attention", x + attended,
                    "feed_forward_norm_input")
            ff_in = add("feed_forward_norm", "Layer norm (before feed-forward)", "LayerNorm(x)",
                        _norm(x, parts.feed_forward_norm), "feed_forward_norm")
        else:
            summed = add("residual_1", "First residual", "x + attention", x + attended,
                         "attention_norm_input")
            x = ff_in = add("attention_norm", "Layer norm (after the residual)", "LayerNorm(x + attention)",
                            _norm(summed, parts.attention_norm), "attention_norm")

        expanded = add("expanded", "Feed-forward, first linear", "x · W_1 + b_1",
                       _linear(ff_in, parts.expand), "expanded")  # (B, T, F)
        activated = add("activated", "GELU", "GELU(x · W_1 + b_1)", parts.activation(expanded),
                        "activated")  # (B, T, F)
        contracted = add("contracted", "Feed-forward, second linear", "GELU(…) · W_2 + b_2",
                         _linear(activated, parts.contract), "contracted")  # (B, T, D)
        if parts.pre_norm:
            final = add("residual_2", "Second residual = the layer's output", "x + feed-forward",
                        x + contracted, "layer_output")
        else:
            summed = add("residual_2", "Second residual", "x + feed-forward", x + contracted,
                         "feed_forward_norm_input")
            final = add("feed_forward_norm", "Layer norm = the layer's output",
                        "LayerNorm(x + feed-forward)", _norm(summed, parts.feed_forward_norm),
                        "layer_output")
        final_difference = float((final - seen["layer_output"]).abs().max())
    if not final_difference <= AGREEMENT_TOLERANCE:
        raise WalkMismatch(f"layer {layer}: the walk's output differs from the layer's own by "
                           f"{final_difference:.1e}")

    matrices = tuple(WeightMatrix(symbol, name, _numpy(linear.weight.T)) for symbol, name, linear in (
        ("W_Q", "query", parts.query), ("W_K", "key", parts.key), ("W_V", "value", parts.value),
        ("W_O", "output", parts.output), ("W_1", "feed-forward in", parts.expand),
        ("W_2", "feed-forward out", parts.contract),
    ))
    return LayerWalk(
        model_label=model_label, layer=layer, num_layers=parts.num_layers, num_heads=heads,
        head_size=head_size, norm_style="pre" if parts.pre_norm else "post", tokens=batch.tokens,
        lengths=batch.lengths, steps=tuple(steps), matrices=matrices,
        final_difference=final_difference,
    )

"""The arithmetic behind one attention row, with the model's own query, key and value vectors.

`capture_projections` runs the model once with forward hooks on its query, key, value and
output-projection layers, so every number shown comes from the running model. `row_arithmetic`
then walks one row through q.k, the 1/sqrt(d_k) scale, the mask, the softmax and the weighted sum
of values; tests check that its softmax equals the model's attention row and its weighted sum
equals the context vector the model itself fed to its output projection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.encoder import Encoder
from models.tokenize import EncodedText

# Per architecture: module path templates of the query/key/value projections and the output
# projection whose input is the concatenation of the heads' weighted sums.
PROJECTION_PATHS = {
    "scratch": ("layers.{i}.attention.query", "layers.{i}.attention.key",
                "layers.{i}.attention.value", "layers.{i}.attention.output"),
    "bert": ("encoder.layer.{i}.attention.self.query", "encoder.layer.{i}.attention.self.key",
             "encoder.layer.{i}.attention.self.value", "encoder.layer.{i}.attention.output.dense"),
    "distilbert": ("transformer.layer.{i}.attention.q_lin", "transformer.layer.{i}.attention.k_lin",
                   "transformer.layer.{i}.attention.v_lin", "transformer.layer.{i}.attention.out_lin"),
}
for _family in ("roberta", "xlm-roberta", "camembert", "electra"):
    PROJECTION_PATHS[_family] = PROJECTION_PATHS["bert"]


class ArithmeticUnavailable(ValueError):
    """The model's attention is not laid out as plain per-head projections this view can read."""


@dataclass(frozen=True)
class Projections:
    """Every layer's per-head vectors for one input, all (L, H, T, Dh) float32 numpy arrays."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    context: np.ndarray  # the model's own weighted sums of values, per head
    mask: np.ndarray  # (Q, K) bool, True = may attend


@dataclass(frozen=True)
class RowArithmetic:
    """One query row of one head, step by step. Vectors are (Dh,), per-key arrays are (K,)."""

    layer: int
    head: int
    query_index: int
    query: np.ndarray  # (Dh,)
    keys: np.ndarray  # (K, Dh)
    values: np.ndarray  # (K, Dh)
    dots: np.ndarray  # (K,)  q . k_j
    scale: float  # sqrt(d_k)
    scaled: np.ndarray  # (K,) q . k_j / sqrt(d_k)
    allowed: np.ndarray  # (K,) bool mask, True = may attend
    weights: np.ndarray  # (K,) softmax over the allowed keys
    output: np.ndarray  # (Dh,) sum_j weights_j v_j
    model_output: np.ndarray  # (Dh,) what the model itself computed for this head and query


def _module(model: nn.Module, path: str) -> nn.Module:
    return model.get_submodule(path)


def capture_projections(
    model: nn.Module, family: str, num_heads: int, encoded: EncodedText, causal: bool = False
) -> Projections:
    """Run `model` on `encoded` once and keep each layer's per-head q, k, v and context."""
    if family not in PROJECTION_PATHS:
        raise ArithmeticUnavailable(
            f"the step-by-step view reads plain query/key/value projections; '{family}' models "
            f"are not supported (supported: {', '.join(sorted(PROJECTION_PATHS))})"
        )
    paths = PROJECTION_PATHS[family]
    captured: dict[tuple[int, int], torch.Tensor] = {}
    handles = []
    layer_count = 0
    while True:
        try:
            modules = [_module(model, p.format(i=layer_count)) for p in paths]
        except AttributeError:
            break
        for slot, module in enumerate(modules[:3]):
            handles.append(module.register_forward_hook(
                lambda _m, _inputs, out, key=(layer_count, slot): captured.__setitem__(key, out)))
        handles.append(modules[3].register_forward_pre_hook(
            lambda _m, inputs, key=(layer_count, 3): captured.__setitem__(key, inputs[0])))
        layer_count += 1
    if layer_count == 0:
        raise ArithmeticUnavailable(f"no attention layers found at {paths[0]}")
    try:
        with torch.inference_mode():
            if isinstance(model, Encoder):
                model(encoded.input_ids, encoded.token_type_ids, encoded.attention_mask)
            else:
                model(**encoded.model_inputs())
    finally:
        for handle in handles:
            handle.remove()

    def per_head(slot: int) -> np.ndarray:
        layers = []
        for layer in range(layer_count):
            x = captured[(layer, slot)][0]  # (T, D)
            tokens, width = x.shape
            layers.append(x.reshape(tokens, num_heads, width // num_heads).transpose(0, 1))  # (H, T, Dh)
        return torch.stack(layers).float().numpy()  # (L, H, T, Dh)

    tokens = encoded.input_ids.size(1)
    mask = np.ones((tokens, tokens), dtype=bool)
    if causal:
        mask = np.tril(mask)
    return Projections(per_head(0), per_head(1), per_head(2), per_head(3), mask)


def row_arithmetic(projections: Projections, layer: int, head: int, query_index: int) -> RowArithmetic:
    """softmax(q . K^T / sqrt(d_k), masked) and the weighted sum of V for one query row."""
    query = projections.query[layer, head, query_index]  # (Dh,)
    keys = projections.key[layer, head]  # (K, Dh)
    values = projections.value[layer, head]  # (K, Dh)
    allowed = projections.mask[query_index]  # (K,)
    dots = keys @ query  # (K,)
    scale = math.sqrt(query.shape[-1])
    scaled = dots / np.float32(scale)
    weights = np.zeros_like(scaled)
    if allowed.any():
        shifted = np.exp(scaled[allowed] - scaled[allowed].max())
        weights[allowed] = shifted / shifted.sum()
    return RowArithmetic(
        layer=layer, head=head, query_index=query_index, query=query, keys=keys, values=values,
        dots=dots, scale=scale, scaled=scaled, allowed=allowed, weights=weights,
        output=weights @ values, model_output=projections.context[layer, head, query_index],
    )


def projections_for(model: nn.Module, encoded: EncodedText) -> Projections:
    """capture_projections with the family, head count and mask read off the model itself."""
    if isinstance(model, Encoder):
        return capture_projections(model, "scratch", model.config.num_heads, encoded,
                                   causal=model.config.causal)
    config = model.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", None)
    return capture_projections(model, config.model_type, heads, encoded)

"""Direct logit attribution: how much each head and each MLP writes the logit difference itself.

In a pre-norm model the residual stream at the end is a sum: the embeddings, then every
attention sublayer's output and every MLP's output, added as the layers run. An attention
output is itself a sum over its heads, z_h W_O^h (each head's output through its slice of the
output projection), plus the projection's bias. The unembedding reads the stream through the
final norm, which divides it by its scale at that position (RMS, or the standard deviation after
centring) and multiplies by the norm's weight. With that scale frozen at its value in the run,
the final norm is linear, and the logit difference splits exactly into one share per part
(Elhage et al. 2021; Wang et al. 2022):

    logit[a] - logit[b] = sum over parts c of  centre(c) . (g * (W_U[a] - W_U[b])) / s
                          + beta . (W_U[a] - W_U[b]) + (b_U[a] - b_U[b])

with g and beta the final norm's weight and bias, s its frozen scale, and centre() subtracting
the mean for a LayerNorm (nothing for an RMSNorm). "Direct" means only what a part writes into
the stream that the unembedding reads: what it does through later layers is not counted.

A post-norm model (BERT) normalises the stream after every layer, so its end is not a sum of
the layers' outputs, and a model whose final norm or head is something else is refused in one
sentence; each check compares the decomposition with the model's own numbers.

Dimensions: L layers, T tokens, H heads, Dh head width, D model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.experiments.contrast import (LogitDifference, language_model, logit_difference,
                                         prompt)
from models.hooks import points
from models.hooks.capture import num_layers
from models.hooks.install import get_output_embeddings, output_weight
from models.hooks.layouts import stacks, submodule
from models.hooks.run import Run, run_model

# How far the decomposition may be from the model's own numbers (relative) before a model's
# final norm, head or layers are said not to be what it assumes.
CHECK_TOLERANCE = 1e-3
EMBEDDINGS, BIASES = "embeddings", "biases"


class NotDecomposable(ValueError):
    """The model's final stream, norm or head is not what direct attribution reads."""


@dataclass(frozen=True)
class LogitAttribution:
    """Each part's direct share of the logit difference at one position (they sum to it)."""

    heads: np.ndarray  # (L, H)
    mlps: np.ndarray  # (L,)
    embeddings: float
    biases: float  # the attention output projections' biases, the final norm's and the head's
    logit_difference: float  # the model's own
    scale: float  # the final norm's frozen scale at the position
    difference: LogitDifference
    tokens: tuple[str, ...]

    @property
    def total(self) -> float:
        return float(self.heads.sum() + self.mlps.sum() + self.embeddings + self.biases)

    def parts(self) -> tuple[tuple[str, float], ...]:
        """Every part as (name, share): "L3H5" for a head, "MLP 3", embeddings, biases."""
        heads = tuple((f"L{layer}H{head}", float(self.heads[layer, head]))
                      for layer, head in np.ndindex(self.heads.shape))
        mlps = tuple((f"MLP {layer}", float(value)) for layer, value in enumerate(self.mlps))
        return (*heads, *mlps, (EMBEDDINGS, self.embeddings), (BIASES, self.biases))

    def largest(self, count: int) -> tuple[tuple[str, float], ...]:
        """The `count` parts with the largest |share|, largest first."""
        return tuple(sorted(self.parts(), key=lambda part: -abs(part[1]))[:count])


@dataclass(frozen=True)
class _FinalNorm:
    weight: torch.Tensor  # (D,)
    bias: torch.Tensor  # (D,), zeros for an RMSNorm
    centres: bool
    eps: float

    def centre(self, parts: torch.Tensor) -> torch.Tensor:  # (..., D)
        return parts - parts.mean(dim=-1, keepdim=True) if self.centres else parts

    def scale(self, stream: torch.Tensor) -> torch.Tensor:  # (D,) -> ()
        return torch.sqrt((self.centre(stream) ** 2).mean() + self.eps)


def _final_norm(loaded, module: nn.Module | None) -> _FinalNorm:
    refused = NotDecomposable(
        f"{loaded.label}'s final norm is not a LayerNorm or an RMSNorm the app can read, so "
        "its logits cannot be split into the layers' direct shares.")
    if module is None or getattr(module, "weight", None) is None:
        raise refused
    eps = getattr(module, "eps", None)
    eps = getattr(module, "variance_epsilon", None) if eps is None else eps
    if eps is None:
        raise refused
    weight = module.weight.detach().double()
    bias = getattr(module, "bias", None)
    centres = isinstance(module, nn.LayerNorm)
    return _FinalNorm(weight, torch.zeros_like(weight) if bias is None else bias.detach().double(),
                      centres, float(eps))


def _close(value: torch.Tensor, reference: torch.Tensor) -> bool:
    return float((value - reference).abs().max()) <= \
        CHECK_TOLERANCE * max(1.0, float(reference.abs().max()))


def logit_attribution(loaded, text: str, answer: str, wrong: str) -> LogitAttribution:
    """The direct shares of the logit difference logit[answer] - logit[wrong] at the read
    position of `text` (the last token; a masked LM's mask), final-norm scale frozen."""
    language_model(loaded)
    model = loaded.model
    stack = stacks(model)[0]
    if stack.layout is None or not stack.layout.mid_from_attention:
        raise NotDecomposable(
            f"{loaded.label} normalises its residual stream after each layer (post-norm), so "
            "the stream its head reads is not a sum of the layers' outputs: direct logit "
            "attribution needs a pre-norm model, such as the causal decoder.")
    given = prompt(loaded, text)
    difference = logit_difference(loaded, given, answer, wrong)
    position = difference.position
    layers = num_layers(model)
    names = [points.EMBED, points.FINAL, points.resid_post(layers - 1),
             *(name for layer in range(layers) for name in (
                 points.z(layer), points.attn_out(layer), points.mlp_out(layer)))]
    run = Run(cache=names)
    output = run_model(model, given.batched(model, 1), run)
    at = {name: run[name][0, position].double() for name in names}  # (D,) or (H, Dh)
    norm = _final_norm(loaded, stack.final_norm)
    stream = at[points.resid_post(layers - 1)]  # (D,)
    scale = norm.scale(stream)
    if not _close(norm.weight * norm.centre(stream) / scale + norm.bias, at[points.FINAL]):
        raise _final_norm_refusal(loaded)
    head = get_output_embeddings(model)
    unembed = head.weight.detach().double()  # (V, D)
    head_bias = getattr(head, "bias", None)
    head_bias = torch.zeros(unembed.size(0), dtype=torch.float64) if head_bias is None \
        else head_bias.detach().double()
    logits = output.logits[0, -1 if output.logits.size(1) == 1 else position].double()  # (V,)
    direction = unembed[difference.answer] - unembed[difference.wrong]  # (D,)
    bias_difference = float(head_bias[difference.answer] - head_bias[difference.wrong])
    own = float(logits[difference.answer] - logits[difference.wrong])
    if not _close(torch.tensor(float(at[points.FINAL] @ direction) + bias_difference),
                  torch.tensor(own)):
        raise NotDecomposable(
            f"{loaded.label}'s head does more than one linear map after its final norm, so its "
            "logits cannot be split into the layers' direct shares.")
    read = norm.weight * direction / scale  # (D,): what the frozen norm and the head read

    def share(parts: torch.Tensor) -> torch.Tensor:
        return norm.centre(parts) @ read

    heads, mlps, attention_biases = [], [], torch.zeros_like(stream)
    summed = at[points.EMBED].clone()
    for layer in range(layers):
        weight = output_weight(model, layer).double()  # (D, H*Dh)
        z = at[points.z(layer)]  # (H, Dh)
        per_head = torch.einsum("dhk,hk->hd", weight.view(weight.size(0), *z.shape), z)  # (H, D)
        module = submodule(stack.layers[layer], stack.layout.output)
        bias = getattr(module, "bias", None)
        bias = torch.zeros_like(stream) if bias is None else bias.detach().double()
        heads.append(share(per_head))
        mlps.append(share(at[points.mlp_out(layer)]))
        attention_biases = attention_biases + bias
        summed = summed + per_head.sum(dim=0) + bias + at[points.mlp_out(layer)]
    if not _close(summed, stream):
        raise NotDecomposable(
            f"{loaded.label}'s heads, MLPs and embeddings do not add up to the stream its head "
            "reads, so direct logit attribution does not apply to it.")
    biases = float(share(attention_biases) + norm.bias @ direction) + bias_difference
    return LogitAttribution(
        heads=torch.stack(heads).numpy(), mlps=torch.stack(mlps).numpy(),
        embeddings=float(share(at[points.EMBED])), biases=biases, logit_difference=own,
        scale=float(scale), difference=difference, tokens=given.tokens)


def _final_norm_refusal(loaded) -> NotDecomposable:
    return NotDecomposable(
        f"{loaded.label}'s final norm does not compute what a LayerNorm or an RMSNorm with its "
        "weights would, so its logits cannot be split into the layers' direct shares.")

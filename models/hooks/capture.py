"""The app's captured forward: a run (models/hooks/run.py) that keeps every layer's attention
points, optionally edits heads or attention edges, and hands back one `LayerCapture` a layer.

`run_captured` keeps every layer (one input's trace, ablation, knockout); `run_streamed` hands
each layer to a callback as soon as it exists and keeps none of them (a long input read layer
by layer), optionally stopping after one layer, skipping the layers before one, or computing one
layer for some heads or query rows only. Both are runs with these points cached or read; an
`Intervention` is a set of edits on the `hook_z` and `hook_scores` points.

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Q/K query/key
positions, D model width, Dh head width, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from models.hooks import points
from models.hooks.install import HOOKED, install, output_weight
from models.hooks.layouts import stacks
from models.hooks.run import LayerPlan, Run, run_model

__all__ = ["CapturedRun", "Intervention", "LayerCapture", "install", "run_captured",
           "run_from_layer", "run_streamed"]
CAPTURED = ("q", "k", "v", "pattern", "z")


@dataclass(frozen=True)
class Intervention:
    """Edits applied inside attention during one forward; every field is optional.

    head_scale: (B, L, H) multiplier of each head's output per batch item (1 keep, 0 ablate), so
        one batched forward can run B different ablations.
    head_replacement: (L, H, Dh) what an ablated head outputs instead (mean ablation); None = 0.
    blocked: bool (L, Q, K), True = the edge is removed before the softmax (knockout).
    """

    head_scale: torch.Tensor | None = None
    head_replacement: torch.Tensor | None = None
    blocked: torch.Tensor | None = None

    def edits(self, num_layers: int, stack: str = "") -> dict[str, Callable]:
        """The run's edits: each layer's hook_z (heads scaled towards their replacement) and
        hook_scores (blocked edges set to the dtype's lowest value)."""
        edits: dict[str, Callable] = {}
        for layer in range(num_layers):
            if self.head_scale is not None:
                edits[points.z(layer, stack)] = self._scale_heads(layer)
            if self.blocked is not None and bool(self.blocked[layer].any()):
                edits[points.scores(layer, stack)] = _block(self.blocked[layer])
        return edits

    def _scale_heads(self, layer: int):
        scale_all, replacement_all = self.head_scale, self.head_replacement

        def edit(context: torch.Tensor, name: str) -> torch.Tensor:  # (B, T, H, Dh)
            scale = scale_all[:, layer].to(context.dtype)[:, None, :, None]  # (B, 1, H, 1)
            replacement = (torch.zeros_like(context[:1, :1]) if replacement_all is None else
                           replacement_all[layer].to(context.dtype)[None, None])  # (1, 1, H, Dh)
            return context * scale + replacement * (1 - scale)
        return edit


def _block(blocked: torch.Tensor):
    def edit(scores: torch.Tensor, name: str) -> torch.Tensor:  # (B, H, Q, K)
        return scores.masked_fill(blocked.to(scores.device), torch.finfo(scores.dtype).min)
    return edit


@dataclass(frozen=True)
class LayerCapture:
    """One layer of one forward, batch first."""

    query: torch.Tensor  # (B, H, T, Dh), after rotary embedding where the model has one
    key: torch.Tensor  # (B, Hkv, T, Dh)
    value: torch.Tensor  # (B, Hkv, T, Dh)
    weights: torch.Tensor  # (B, H, Q, K), after the softmax
    context: torch.Tensor  # (B, T, H, Dh), each head's weighted sum of values (after edits)
    scaling: float  # what q.k is multiplied by
    output_weight: torch.Tensor | None  # (D, H*Dh), the output projection W_O

    @property
    def kv_group(self) -> int:
        """How many query heads share one key/value head (1 without grouped-query attention)."""
        return self.query.size(1) // self.key.size(1)

    def scores(self) -> torch.Tensor:
        """(B, H, Q, K) q.k times the scaling, before any mask: what the softmax started from."""
        key = self.key.repeat_interleave(self.kv_group, dim=1)  # (B, H, K, Dh)
        return self.query @ key.transpose(-2, -1) * self.scaling  # (B, H, Q, K)


@dataclass(frozen=True)
class CapturedRun:
    layers: tuple[LayerCapture, ...]
    logits: torch.Tensor | None  # (B, T, V) when the model has a language-model head
    residual: tuple[torch.Tensor, ...] = ()  # L + 1 of (B, T, D): each layer's input, then the
    # last layer's output (with keep_residual)


def _captured(name: str) -> bool:
    point = points.parse(name)
    return point is not None and not point.stack and point.module == "attn" and \
        point.kind in CAPTURED


def _residual(last: int):
    """Which points a captured run keeps of the residual stream: every layer's input and the
    last layer's output."""
    def wanted(name: str) -> bool:
        point = points.parse(name)
        return point is not None and not point.stack and (
            point.kind == "resid_pre" or (point.kind == "resid_post" and point.layer == last))
    return wanted


def _layer(model: nn.Module, run: Run, layer: int, values: dict[str, torch.Tensor]) -> LayerCapture:
    prefix = f"blocks.{layer}.attn"
    return LayerCapture(values["q"], values["k"], values["v"], values["pattern"], values["z"],
                        run.scalings[prefix], output_weight(model, layer))


def _by_layer(names_values) -> dict[int, dict[str, torch.Tensor]]:
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in names_values:
        point = points.parse(name)
        layers.setdefault(point.layer, {})[point.kind] = value
    return layers


def _hooked(model: nn.Module) -> nn.Module:
    if not getattr(model, HOOKED, False):
        raise RuntimeError(
            f"{type(model).__name__} has no hook points: load it through the app's loaders (or "
            "call models.hooks.install.install) first")
    return model


def num_layers(model: nn.Module) -> int:
    """How many layers the model's (first) stack has."""
    counted = getattr(model, "hook_layer_count", None)
    if callable(counted):  # the from-scratch models and the classifier count their own
        return counted()
    return len(stacks(model)[0].layers)


def forward_inputs(model: nn.Module, inputs: dict) -> dict:
    """The keyword arguments the model's forward takes: a causal LM runs without its key/value
    cache; the from-scratch models and the classifier take their inputs as they are."""
    if _is_causal(model):
        return {**inputs, "use_cache": False}
    return dict(inputs)


def _logits(output) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):  # a classifier's (B, C), read as one position
        return output[:, None, :]
    return getattr(output, "logits", None)


def run_captured(model: nn.Module, inputs: dict[str, torch.Tensor],
                 intervention: Intervention | None = None,
                 keep_residual: bool = False) -> CapturedRun:
    """One forward of `model` on `inputs`, every attention layer captured (in layer order); with
    `keep_residual`, the residual stream too (each layer's input and the last one's output)."""
    _hooked(model)
    count = num_layers(model)
    residual = _residual(count - 1)
    keep = (lambda name: _captured(name) or residual(name)) if keep_residual else _captured
    run = Run(cache=keep, edits=intervention.edits(count) if intervention else None)
    output = run_model(model, forward_inputs(model, inputs), run)
    layers = _by_layer((name, value) for name, value in run.cache.items() if _captured(name))
    if not layers:
        raise RuntimeError(f"{type(model).__name__} ran no captured attention")
    stream = ()
    if keep_residual:
        stream = (*(run.cache[points.resid_pre(layer)] for layer in range(count)),
                  run.cache[points.resid_post(count - 1)])
    return CapturedRun(tuple(_layer(model, run, index, layers[index]) for index in sorted(layers)),
                       _logits(output), stream)


def run_from_layer(model: nn.Module, inputs: dict[str, torch.Tensor], start: int,
                   start_input: torch.Tensor, intervention: Intervention | None = None
                   ) -> torch.Tensor | None:
    """The logits (B, T, V) of one forward of `model` on `inputs` (a classifier's (B, 1, C)),
    with `intervention`'s edits and nothing captured, that skips the layers before `start`:
    layer `start` reads `start_input` (B, T, D), that layer's input kept from an earlier run.
    An edit in layer l leaves the layers before l as they were, so a batch of edits in layers
    >= `start` costs only the layers from `start` on."""
    _hooked(model)
    edits = intervention.edits(num_layers(model)) if intervention else None
    run = Run(edits=edits, plan=LayerPlan(start=start, start_input=start_input))
    return _logits(run_model(model, forward_inputs(model, inputs), run))


def run_streamed(model: nn.Module, inputs: dict[str, torch.Tensor],
                 sink: Callable[[int, LayerCapture], None], stop_after: int | None = None,
                 fast_until: int = 0, group_of: int | None = None,
                 rows: slice | None = None, start: int = 0,
                 start_input: torch.Tensor | None = None,
                 keep: Callable[[int, torch.Tensor], None] | None = None) -> int:
    """One forward of `model` on `inputs` with every attention layer handed to `sink(index,
    layer)` as it is computed and then let go, so at most one layer's maps are alive at a time.

    stop_after: the forward ends once that layer is captured (the model's head never runs).
    fast_until: layers before it run the fused attention and are not captured.
    group_of, rows: the `stop_after` layer computes only the query heads that share head
        `group_of`'s keys and values, or the attention of those query positions only.
    start, start_input: the layers before `start` are skipped and layer `start` reads
        `start_input` (B, T, D) (its kept input).
    keep: called with each layer's input (B, T, D) as the layer starts, and with index L and
        the last layer's output when it ends (to keep the residual stream on disk).
    Returns how many layers were captured."""
    _hooked(model)
    if (group_of is not None or rows is not None) and stop_after is None:
        raise ValueError("rows needs stop_after: a layer computed for some rows only must be the "
                         "last one the forward runs")
    pending: dict[int, dict[str, torch.Tensor]] = {}
    captured = [0]

    def collect(value: torch.Tensor, name: str) -> None:
        point = points.parse(name)
        parts = pending.setdefault(point.layer, {})
        parts[point.kind] = value.detach()
        if point.kind == "z":  # the layer's last attention point: hand it on, let it go
            sink(point.layer, _layer(model, run, point.layer, pending.pop(point.layer)))
            captured[0] += 1

    def kept_input(value: torch.Tensor, name: str) -> None:
        keep(points.parse(name).layer, value)

    count = num_layers(model)
    edits: dict[str, list] = {}
    for layer in range(min(start, count), count if stop_after is None else
                       min(stop_after + 1, count)):
        if layer < fast_until:
            continue
        for kind in CAPTURED:
            edits.setdefault(points.Point("", layer, kind, "attn").name, []).append(collect)
    if keep is not None:
        for layer in range(start, count):
            edits.setdefault(points.resid_pre(layer), []).append(kept_input)
        edits.setdefault(points.resid_post(count - 1), []).append(
            lambda value, name: keep(count, value))
    plan = LayerPlan(start=start, start_input=start_input, fused_until=fast_until,
                     heads_of=group_of, rows=rows,
                     focus=stop_after if group_of is not None or rows is not None else None)
    run = Run(edits=edits, plan=plan,
              stop_at=None if stop_after is None else points.z(stop_after))
    base = getattr(model, "base_model", model)  # a long input's (T, V) logits are not wanted
    try:
        run_model(base, forward_inputs(model, inputs), run)
    finally:
        # `collect` reads `run`, whose edits hold `collect`: a reference cycle that kept `sink`
        # (and all it holds: a corpus batch's reducers, tens of MB) alive until Python's cyclic
        # collector happened to run. Emptying the closure's cell breaks it.
        run = None
    if not captured[0]:
        raise RuntimeError(f"{type(model).__name__} ran no captured attention")
    return captured[0]


def _is_causal(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    return bool(getattr(config, "is_decoder", False)) or \
        type(model).__name__.endswith("ForCausalLM") or type(model).__name__.endswith("LMHeadModel")

"""One forward pass, every layer's attention captured, optional edits applied inside attention.

Hugging Face models built on transformers' attention interface (BERT, RoBERTa, DistilBERT,
GPT-2, Llama, T5, BART, ...) call `ALL_ATTENTION_FUNCTIONS[config._attn_implementation]` inside
each attention module. `install(model)` switches a loaded model to `capturing_attention`, which
runs the model's own eager attention function (so the numbers are the model's, bit for bit) and,
while `run_captured` is active in the calling thread, keeps each layer's query, key, value,
weights and per-head context and applies an `Intervention` (head ablation, edge knockout).
Outside `run_captured` it is plain eager attention. The from-scratch encoder's attention module
reports to the same capture (models/attention.py).

Dimensions: B batch, L layers, H query heads, Hkv key/value heads, T tokens, Q/K query/key
positions, D model width, Dh head width, V vocabulary.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from models import layer_plan

ATTENTION_NAME = "attention_explorer"

# Attribute names under which attention modules keep their output projection, by family.
_OUTPUT_PROJECTIONS = ("o_proj", "out_proj", "c_proj", "out_lin", "o", "output")


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


@dataclass
class _Capture:
    """What one captured forward keeps. With a `sink`, each layer is handed to it and not kept
    (a long input's maps are reduced layer by layer); `stop_after` ends the forward once that
    layer has been captured (one layer on demand costs the layers up to it, not the whole pass).
    `rows` (with `stop_after` only) computes that last layer's attention for those query
    positions alone: its shorter output never reaches the residual stream, as the forward stops.
    """

    intervention: Intervention | None
    layers: list[LayerCapture] = field(default_factory=list)
    sink: Callable[[int, LayerCapture], None] | None = None
    stop_after: int | None = None
    fast_until: int = 0  # layers before this one run fused attention, uncaptured (no weights)
    group_of: int | None = None  # compute only this query head's key/value group (see run_streamed)
    rows: slice | None = None  # the query positions the stop_after layer computes (None = all)
    count: int = 0  # layers seen so far: the index of the next one


class _Stopped(Exception):
    """Raised inside the forward once the last layer asked for has been captured."""


_active = threading.local()  # the capture of the forward running in this thread, if any
# BERT-style attention keeps W_O beside the module that calls the attention function
# (BertAttention.self / BertAttention.output.dense); install() records those pairs here.
_SIBLING_OUTPUTS: weakref.WeakKeyDictionary[nn.Module, nn.Linear] = weakref.WeakKeyDictionary()
_INSTALLED: weakref.WeakSet[nn.Module] = weakref.WeakSet()


def _eager_function(module: nn.Module):
    return sys.modules[type(module).__module__].eager_attention_forward


def _output_weight(module: nn.Module) -> torch.Tensor | None:
    """The output projection W_O (D, H*Dh) as a detached view of the model's parameter; the
    same view object on every call, so what is computed from it can be kept beside it."""
    parameter, transposed = _output_parameter(module)
    if parameter is None:
        return None
    kept = module.__dict__.get("_explorer_output_weight")
    if kept is None or kept[0] is not parameter:
        view = parameter.detach().T if transposed else parameter.detach()
        kept = (parameter, view)
        module.__dict__["_explorer_output_weight"] = kept
    return kept[1]


def _output_parameter(module: nn.Module) -> tuple[torch.Tensor | None, bool]:
    """The output projection's weight, and whether it is stored (in, out) as GPT-2's Conv1D."""
    projection = _SIBLING_OUTPUTS.get(module)
    if projection is not None:
        return projection.weight, False
    for name in _OUTPUT_PROJECTIONS:
        projection = getattr(module, name, None)
        if isinstance(projection, nn.Linear):
            return projection.weight, False
        if projection is not None and hasattr(projection, "weight") and projection.weight.dim() == 2:
            return projection.weight, True
    return None, False


def _knockout_mask(attention_mask: torch.Tensor | None, blocked: torch.Tensor,
                   dtype: torch.dtype) -> torch.Tensor:
    """The additive mask with the blocked edges set to the dtype's minimum."""
    fill = torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, torch.finfo(dtype).min)
    fill = fill[None, None]  # (1, 1, Q, K)
    if attention_mask is None:
        return fill
    if attention_mask.dtype == torch.bool:
        attention_mask = torch.zeros(attention_mask.shape, dtype=dtype).masked_fill(
            ~attention_mask, torch.finfo(dtype).min)
    return (attention_mask + fill).clamp(min=torch.finfo(dtype).min)


def edit_and_record(capture: _Capture, query: torch.Tensor, key: torch.Tensor,
                    value: torch.Tensor, weights: torch.Tensor, context: torch.Tensor,
                    scaling: float, output_weight: torch.Tensor | None) -> torch.Tensor:
    """Apply the intervention's head edits to `context` (B, T, H, Dh), record the layer, return it."""
    layer = capture.count
    edit = capture.intervention
    if edit is not None and edit.head_scale is not None:
        scale = edit.head_scale[:, layer].to(context.dtype)[:, None, :, None]  # (B, 1, H, 1)
        replacement = (torch.zeros_like(context[:1, :1]) if edit.head_replacement is None
                       else edit.head_replacement[layer].to(context.dtype)[None, None])  # (1, 1, H, Dh)
        context = context * scale + replacement * (1 - scale)
    captured = LayerCapture(query.detach(), key.detach(), value.detach(), weights.detach(),
                            context.detach(), float(scaling), output_weight)
    capture.count += 1
    if capture.sink is None:
        capture.layers.append(captured)
    else:
        capture.sink(layer, captured)
    if capture.stop_after is not None and layer >= capture.stop_after:
        raise _Stopped
    return context


def blocked_edges(layer_index: int) -> torch.Tensor | None:
    """The knockout edges for the layer about to run in this thread's capture, if any."""
    capture = getattr(_active, "capture", None)
    if capture is None or capture.intervention is None or capture.intervention.blocked is None:
        return None
    return capture.intervention.blocked[layer_index]


def active() -> _Capture | None:
    return getattr(_active, "capture", None)


def capturing_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                        **kwargs):
    """The model's own eager attention, captured and edited while run_captured is active."""
    eager = _eager_function(module)
    capture = active()
    if capture is None:
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                     **kwargs)
    if capture.count < capture.fast_until:  # a layer before the one asked for: no weights kept
        capture.count += 1
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                      dropout=dropout, **kwargs)
    if capture.group_of is not None:  # the heads that share the asked head's keys and values
        group = query.size(1) // key.size(1)
        shared = capture.group_of // group
        query = query[:, shared * group:(shared + 1) * group]
        key, value = key[:, shared:shared + 1], value[:, shared:shared + 1]
    blocked = blocked_edges(capture.count)
    if blocked is not None:
        attention_mask = _knockout_mask(attention_mask, blocked, query.dtype)
    if capture.rows is not None and capture.count == capture.stop_after:  # the last layer only
        query = query[:, :, capture.rows]  # (B, H, W, Dh), W = the rows asked for
        if attention_mask is not None and attention_mask.size(-2) > 1:  # (B, 1, 1, K) broadcasts
            attention_mask = attention_mask[..., capture.rows, :]  # (B, 1, W, K)
    context, weights = eager(module, query, key, value, attention_mask, scaling=scaling,
                             dropout=dropout, **kwargs)  # (B, T, H, Dh), (B, H, Q, K)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    context = edit_and_record(capture, query, key, value, weights, context, scaling,
                              _output_weight(module))
    return context, weights


AttentionInterface.register(ATTENTION_NAME, capturing_attention)
# Masks are built per implementation: ours takes the same additive float masks as eager.
AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


def install(model: nn.Module) -> nn.Module:
    """Switch a transformers model to the capturing attention (plain eager outside a capture).

    Installing twice is free: the second call finds the model already switched."""
    if model in _INSTALLED:
        return model
    model.set_attn_implementation(ATTENTION_NAME)
    layer_plan.prepare(model)  # per-thread plans for long inputs (models/streaming.py)
    for module in model.modules():
        inner, output = getattr(module, "self", None), getattr(module, "output", None)
        dense = getattr(output, "dense", None)
        if isinstance(inner, nn.Module) and isinstance(dense, nn.Linear):
            _SIBLING_OUTPUTS[inner] = dense
    _INSTALLED.add(model)
    return model


@contextmanager
def capturing(intervention: Intervention | None = None,
              sink: Callable[[int, LayerCapture], None] | None = None,
              stop_after: int | None = None, fast_until: int = 0,
              group_of: int | None = None, rows: slice | None = None):
    """Capture the attention layers run in this thread inside the block."""
    if active() is not None:
        raise RuntimeError("a capture is already running in this thread")
    if rows is not None and stop_after is None:
        raise ValueError("rows needs stop_after: a layer computed for some rows only must be the "
                         "last one the forward runs")
    capture = _Capture(intervention, sink=sink, stop_after=stop_after, fast_until=fast_until,
                       group_of=group_of, rows=rows)
    _active.capture = capture
    try:
        yield capture
    finally:
        _active.capture = None


def run_captured(model: nn.Module, inputs: dict[str, torch.Tensor],
                 intervention: Intervention | None = None) -> CapturedRun:
    """One forward of `model` on `inputs`, every attention layer captured (in call order)."""
    from models.encoder import Encoder  # the from-scratch encoder reports to the same capture

    with capturing(intervention) as capture, torch.inference_mode():
        if isinstance(model, Encoder):
            model(inputs["input_ids"], inputs.get("token_type_ids"), inputs.get("attention_mask"))
            logits = None
        else:
            output = model(**inputs, use_cache=False) if _is_causal(model) else model(**inputs)
            logits = getattr(output, "logits", None)
    if not capture.layers:
        raise RuntimeError(
            f"{type(model).__name__} ran no captured attention: load it through the app's "
            "loaders (or call models.capture.install) first")
    return CapturedRun(tuple(capture.layers), logits)


def run_streamed(model: nn.Module, inputs: dict[str, torch.Tensor],
                 sink: Callable[[int, LayerCapture], None], stop_after: int | None = None,
                 fast_until: int = 0, group_of: int | None = None,
                 rows: slice | None = None) -> int:
    """One forward of `model` on `inputs` with every attention layer handed to `sink(index,
    layer)` as it is computed and then let go, so at most one layer's maps are alive at a time.
    With `stop_after`, the forward ends once that layer is captured (the model's head never
    runs). Layers before `fast_until` run the fused (SDPA) attention of transformers and are
    not captured: their weights never exist, which is what makes one late layer on demand cheap
    (their outputs differ from eager attention's by float rounding). With `group_of`, a captured
    layer computes only the query heads that share head `group_of`'s keys and values (one head
    without grouped-query attention): for a forward that stops after that layer, the cheapest
    exact way to one head's map. With `rows`, the `stop_after` layer computes the attention of
    those query positions only (the same keys, mask rows and eager arithmetic). Returns how many
    layers ran."""
    from models.encoder import Encoder  # the from-scratch encoder reports to the same capture

    with capturing(sink=sink, stop_after=stop_after, fast_until=fast_until,
                   group_of=group_of, rows=rows) as capture, torch.inference_mode():
        try:
            if isinstance(model, Encoder):
                model(inputs["input_ids"], inputs.get("token_type_ids"),
                      inputs.get("attention_mask"))
            else:  # the model without its head: a long input's (T, V) logits are not wanted
                base = getattr(model, "base_model", model)
                base(**inputs, use_cache=False) if _is_causal(model) else base(**inputs)
        except _Stopped:
            pass
    if not capture.count:
        raise RuntimeError(
            f"{type(model).__name__} ran no captured attention: load it through the app's "
            "loaders (or call models.capture.install) first")
    return capture.count


def _is_causal(model: nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "is_decoder", False)) or \
        type(model).__name__.endswith("ForCausalLM") or type(model).__name__.endswith("LMHeadModel")

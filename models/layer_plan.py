"""Per-thread plans for a model's stack of layers: keep each layer's input, or skip the layers
before one and hand that one a kept input.

A server shares one model between every session, and each session's forward runs in its own
thread. Hooks added and removed around one session's forward would act on every other forward
running at the same time, and torch's hook tables are not safe to change while another thread
iterates them. So each layer gets, once, when the model is installed (before any forward), a
forward pre-hook and a forward that read this thread's plan: with no plan they do nothing and
call the layer's own forward. `keeping` and `skipping_to` set the plan of the calling thread only.
"""

from __future__ import annotations

import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

_PLANS = threading.local()


@dataclass
class _Plan:
    keep: object | None = None  # a LayerInputs: every layer's input is saved into it
    index: dict[int, int] = field(default_factory=dict)  # id(layer) -> its index
    skip: frozenset[int] = frozenset()  # id(layer): pass the input through
    replace: dict[int, torch.Tensor] = field(default_factory=dict)  # id(layer) -> its input
    items: int = 0  # what a layer returns: 0 = a tensor, n = a tuple of n items


def _plan() -> _Plan | None:
    return getattr(_PLANS, "plan", None)


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's stack of transformer layers (the ModuleList with one module per layer)."""
    count = getattr(model.config, "num_hidden_layers", None)
    base = getattr(model, "base_model", model)
    for module in base.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"{type(model).__name__}: its {count} layers could not be found")


def _hidden(args: tuple, kwargs: dict) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _before_layer(module, args, kwargs):
    plan = _plan()
    if plan is None:
        return None
    if plan.keep is not None and id(module) in plan.index:
        plan.keep.save(plan.index[id(module)], _hidden(args, kwargs))
    replacement = plan.replace.get(id(module))
    if replacement is None:
        return None
    if args:
        return (replacement, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": replacement}


def _layer_forward(self, *args, **kwargs):
    plan = _plan()
    if plan is not None and id(self) in plan.skip:
        hidden = _hidden(args, kwargs)
        return hidden if not plan.items else (hidden, *(None,) * (plan.items - 1))
    output = type(self).forward(self, *args, **kwargs)
    if plan is not None and plan.keep is not None and plan.index.get(id(self)) == 0:
        plan.keep.output_items = 0 if isinstance(output, torch.Tensor) else len(output)
    return output


def prepare(model: torch.nn.Module) -> None:
    """Give each of the model's layers the plan-reading pre-hook and forward, once (a model
    without one stack of layers, such as an encoder-decoder, is left as it is). The forward is
    a method bound to the layer, so a deep copy of the model calls its own layers."""
    try:
        layers = decoder_layers(model)
    except ValueError:
        return
    if layers.__dict__.get("_explorer_planned"):
        return
    for layer in layers:
        layer.register_forward_pre_hook(_before_layer, with_kwargs=True)
        layer.forward = types.MethodType(_layer_forward, layer)
    layers.__dict__["_explorer_planned"] = True


def _ready(model: torch.nn.Module) -> torch.nn.ModuleList:
    layers = decoder_layers(model)
    if not layers.__dict__.get("_explorer_planned"):
        raise RuntimeError(f"{type(model).__name__} was not installed: load it through the "
                           "app's loaders (or call models.capture.install) first")
    return layers


@contextmanager
def _planned(plan: _Plan):
    if _plan() is not None:
        raise RuntimeError("a layer plan is already active in this thread")
    _PLANS.plan = plan
    try:
        yield plan
    finally:
        _PLANS.plan = None


@contextmanager
def keeping(model: torch.nn.Module, kept):
    """While active, in this thread, every layer's input is saved into `kept` (a LayerInputs),
    and the form of the layers' output is noted on it."""
    layers = _ready(model)
    with _planned(_Plan(keep=kept, index={id(layer): i for i, layer in enumerate(layers)})):
        yield


@contextmanager
def skipping_to(model: torch.nn.Module, layer: int, hidden: torch.Tensor, items: int):
    """While active, in this thread, the layers before `layer` pass their input through (their
    output has `items` items, 0 for a tensor) and `layer` reads `hidden` (1, T, D) instead."""
    layers = _ready(model)
    with _planned(_Plan(skip=frozenset(id(m) for m in layers[:layer]),
                        replace={id(layers[layer]): hidden}, items=items)):
        yield

"""Hook points on a loaded Hugging Face model, installed once, before anyone runs it.

`install(model)` switches the model's attention to the hooked eager attention (models/hooks/
attention.py) and gives the modules that compute the other points (models/hooks/points.py) a
forward hook or pre-hook that hands the value to the active run (models/hooks/run.py). With no
run active every hook returns at once and the model computes exactly what it computes without
them. Each layer of the stack also gets a forward that skips the layer when the run's plan
says so (a long input's layer computed again from its kept input).

Where the points sit inside a layer depends on the architecture's layout, described as data in
models/hooks/layouts.py (one `Layout` per family: BERT-like encoders, DistilBERT, Llama-like and GPT-2 decoders,
BART/Marian (post-norm), mBART/Pegasus-like (pre-norm) and T5 encoder-decoders). A model of
another family still has the residual stream before and after each layer, every attention
point, the embeddings, the final norm and the logits; `point_names` lists what a model has,
and a run that asks for another point is refused by `check_points`.

Dimensions: B batch, T tokens, D model width, H heads, Dh head width.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Iterable

import torch
from torch import nn

from models.hooks import points
from models.hooks.attention import ATTENTION_NAME, WHERE
from models.hooks.layouts import (CROSS_MARKERS, IN, OUT, OUT0, POSITION_EMBEDDINGS,
                                  SEGMENT_EMBEDDINGS, TOKEN_EMBEDDINGS, Stack, child, stacks,
                                  submodule)
from models.hooks.run import active

HOOKED = "_explorer_hooked"  # True on a model (or from-scratch model) whose points exist
_OUTPUT_ITEMS: weakref.WeakKeyDictionary[type, int] = weakref.WeakKeyDictionary()


def _prefixed(stack: str, name: str) -> str:
    return f"{stack}.{name}" if stack else name


def _value(how: str, args: tuple, kwargs: dict, output=None) -> torch.Tensor:
    if how == IN:
        return args[0] if args else kwargs["hidden_states"]
    return output[0] if how == OUT0 or isinstance(output, tuple) else output


def _replace(how: str, args: tuple, kwargs: dict, output, value):
    """The module's inputs (for IN) or output with the point's value put back in its place."""
    if how == IN:
        return ((value, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": value})
    if isinstance(output, tuple):
        return (value, *output[1:])
    return value


def _output_hook(names: tuple[tuple[str, str], ...]):
    """A forward hook visiting the points read from a module's output, in order."""
    def hook(module, args, output):
        run = active()
        if run is None:
            return None
        changed = False
        for name, how in names:
            if run.wants(name) and not _skipped(run, module):
                value = _value(how, args, {}, output)
                new = run.visit(name, value)
                if new is not value:
                    output, changed = _replace(how, args, {}, output, new), True
        return output if changed else None
    return hook


def _input_hook(names: tuple[tuple[str, str], ...]):
    """A forward pre-hook visiting the points read from a module's first input."""
    def hook(module, args, kwargs):
        run = active()
        if run is None:
            return None
        changed = False
        for name, _ in names:
            if run.wants(name) and not _skipped(run, module):
                value = _value(IN, args, kwargs)
                new = run.visit(name, value)
                if new is not value:
                    args, kwargs = _replace(IN, args, kwargs, None, new)
                    changed = True
        return (args, kwargs) if changed else None
    return hook


def _skipped(run, module: nn.Module) -> bool:
    """Whether the module belongs to a layer the run's plan skips."""
    where = module.__dict__.get("_explorer_layer")
    return where is not None and where[0] == run.plan.stack and where[1] < run.plan.start


def _layer_pre_hook(stack: str, index: int, mid_from_attention: bool):
    pre = points.resid_pre(index, stack)
    mid = points.resid_mid(index, stack)
    embed = _prefixed(stack, points.EMBED)

    def hook(module, args, kwargs):
        run = active()
        if run is None or _skipped(run, module):
            return None
        value = _value(IN, args, kwargs)
        new = value
        if index == 0 and run.wants(embed):
            new = run.visit(embed, new)
        if run.wants(pre):
            new = run.visit(pre, new)
        if mid_from_attention and run.wants(mid):
            run.remember_residual(pre, new)
        if new is value:
            return None
        return _replace(IN, args, kwargs, None, new)
    return hook


def _layer_post_hook(stack: str, index: int, last: bool):
    post = points.resid_post(index, stack)
    final = _prefixed(stack, points.FINAL)

    def hook(module, args, output):
        run = active()
        if run is None or _skipped(run, module):
            return None
        _OUTPUT_ITEMS[type(module)] = len(output) if isinstance(output, tuple) else 0
        value = _value(OUT, args, {}, output)
        new = run.visit(post, value) if run.wants(post) else value
        if last and run.wants(final):  # no final norm: the unembedding reads the stream itself
            new = run.visit(final, new)
        return None if new is value else _replace(OUT, args, {}, output, new)
    return hook


def _attention_out_hook(stack: str, index: int):
    """Pre-norm layers: after attn_out, resid_mid = resid_pre + attn_out (the sum the layer forms
    next); an edit of resid_mid comes back as attn_out = edited - resid_pre."""
    name = points.attn_out(index, stack)
    mid = points.resid_mid(index, stack)
    pre = points.resid_pre(index, stack)

    def hook(module, args, output):
        run = active()
        if run is None or _skipped(run, module):
            return None
        value = _value(OUT0, args, {}, output)
        new = run.visit(name, value) if run.wants(name) else value
        if run.wants(mid):
            residual = run.residual(pre)
            summed = residual + new
            edited = run.visit(mid, summed)
            if edited is not summed:
                new = edited - residual
        return None if new is value else _replace(OUT0, args, {}, output, new)
    return hook


def _skipping_forward(stack: str, index: int, hands_on: bool):
    """The layer's forward, or its input handed on unchanged when the run's plan skips it.

    In a stack whose layers hand more than the stream on (T5's first layer computes the
    relative position bias, and every layer passes it to the next), a skipped layer still runs,
    silently (its points are not visited), and hands that on beside its unchanged input."""
    def forward(self, *args, **kwargs):
        run = active()
        if run is not None and run.plan.stack == stack and index < run.plan.start:
            hidden = _value(IN, args, kwargs)
            if hands_on:
                return (hidden, *type(self).forward(self, *args, **kwargs)[1:])
            items = _OUTPUT_ITEMS.get(type(self), 0)
            return hidden if not items else (hidden, *(None,) * (items - 1))
        return type(self).forward(self, *args, **kwargs)
    return forward


def _hands_on(layers: nn.ModuleList) -> bool:
    """Whether the stack's layers pass a relative position bias from one to the next (T5)."""
    return any(getattr(module, "has_relative_attention_bias", False) is True
               for module in layers.modules())


def install(model: nn.Module) -> nn.Module:
    """Give a transformers model its hook points (once; installing again does nothing)."""
    if getattr(model, HOOKED, False):
        return model
    model.set_attn_implementation(ATTENTION_NAME)
    for stack in stacks(model):
        _install_stack(stack, len(stack.layers))
    _hook_output(get_output_embeddings(model), ((points.LOGITS, OUT),))
    model.__dict__[HOOKED] = True
    getattr(model, "base_model", model).__dict__[HOOKED] = True  # run alone for long inputs
    return model


def get_output_embeddings(model: nn.Module) -> nn.Module | None:
    getter = getattr(model, "get_output_embeddings", None)
    return getter() if callable(getter) else None


def _hook_output(module: nn.Module | None, names: tuple[tuple[str, str], ...]) -> None:
    if module is not None and names:
        module.register_forward_hook(_output_hook(names))


def _install_stack(stack: Stack, count: int) -> None:
    name = stack.name
    for names, kind in ((TOKEN_EMBEDDINGS, points.TOKEN_EMBED), (POSITION_EMBEDDINGS,
                        points.POS_EMBED), (SEGMENT_EMBEDDINGS, points.SEGMENT_EMBED)):
        _hook_output(child(stack.root, names), ((_prefixed(name, kind), OUT),))
    if stack.final_norm is not None:
        _hook_output(stack.final_norm, ((_prefixed(name, points.FINAL), OUT),))
    layout = stack.layout
    hands_on = _hands_on(stack.layers)
    for index, layer in enumerate(stack.layers):
        for path, module in layer.named_modules():
            module.__dict__["_explorer_layer"] = (name, index)
            kind = "cross_attn" if any(m in path for m in CROSS_MARKERS) else "attn"
            module.__dict__[WHERE] = (name, index, kind)
        layer.register_forward_pre_hook(
            _layer_pre_hook(name, index, bool(layout and layout.mid_from_attention)),
            with_kwargs=True)
        layer.register_forward_hook(
            _layer_post_hook(name, index, index == count - 1 and stack.final_norm is None))
        layer.forward = types.MethodType(_skipping_forward(name, index, hands_on), layer)
        if layout is None:
            continue
        by_module: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for kind, (path, how) in layout.places.items():
            if kind == "attn_out" and layout.mid_from_attention:
                continue
            by_module.setdefault((path, "in" if how == IN else "out"), []).append(
                (points.Point(name, index, kind).name, how))
        for (path, side), names in by_module.items():
            module = submodule(layer, path)
            if module is None:
                continue
            if side == "in":
                module.register_forward_pre_hook(_input_hook(tuple(names)), with_kwargs=True)
            else:
                module.register_forward_hook(_output_hook(tuple(names)))
        if layout.mid_from_attention:
            module = submodule(layer, layout.places["attn_out"][0])
            module.register_forward_hook(_attention_out_hook(name, index))


def point_names(model: nn.Module) -> tuple[str, ...]:
    """Every hook point the installed model has, in the order a forward visits them."""
    if not getattr(model, HOOKED, False):
        raise ValueError(f"{type(model).__name__} has no hook points: install it first")
    explicit = getattr(model, "hook_point_names", None)
    if callable(explicit):  # the from-scratch models list their own
        return tuple(explicit())
    names: list[str] = []
    for stack in stacks(model):
        prefix = stack.name
        for names_, kind in ((TOKEN_EMBEDDINGS, points.TOKEN_EMBED),
                             (POSITION_EMBEDDINGS, points.POS_EMBED),
                             (SEGMENT_EMBEDDINGS, points.SEGMENT_EMBED)):
            if child(stack.root, names_) is not None:
                names.append(_prefixed(prefix, kind))
        names.append(_prefixed(prefix, points.EMBED))
        has = set(stack.layout.places) if stack.layout else set()
        cross = any(any(m in path for m in CROSS_MARKERS)
                    for path, _ in stack.layers[0].named_modules())
        for index in range(len(stack.layers)):
            names.append(points.resid_pre(index, prefix))
            if "ln1" in has:
                names.append(points.ln1(index, prefix))
            names.extend(points.Point(prefix, index, kind, "attn").name
                         for kind in points.ATTENTION_POINTS)
            names.extend(points.Point(prefix, index, kind).name
                         for kind in ("attn_out", "resid_mid")
                         if kind in has or (kind == "resid_mid" and stack.layout is not None
                                            and stack.layout.mid_from_attention))
            if cross:  # a decoder layer's cross-attention reads the stream after resid_mid
                names.extend(points.Point(prefix, index, kind, "cross_attn").name
                             for kind in points.ATTENTION_POINTS)
            names.extend(points.Point(prefix, index, kind).name
                         for kind in ("ln2", "mlp_pre", "mlp_post", "mlp_out") if kind in has)
            names.append(points.resid_post(index, prefix))
        names.append(_prefixed(prefix, points.FINAL))
    if get_output_embeddings(model) is not None:
        names.append(points.LOGITS)
    return tuple(names)


def check_points(model: nn.Module, names: Iterable[str], label: str = "") -> None:
    """A ValueError naming the first point the model does not have."""
    known = set(point_names(model))
    for name in names:
        if name not in known:
            raise ValueError(f"{label or type(model).__name__} has no hook point '{name}'.")


def output_weight(model: nn.Module, layer: int, stack: str = "") -> torch.Tensor | None:
    """(D, H*Dh) the attention output projection W_O of one layer, as a detached view of the
    model's parameter (None where the layout does not name it). The same view object on every
    call, so what is computed from it (models/analysis/norms.py) can be kept beside it."""
    explicit = getattr(model, "attention_output_weight", None)
    if callable(explicit):
        return explicit(layer)
    found = next((s for s in stacks(model) if s.name == stack), None)
    if found is None or found.layout is None or not found.layout.output:
        return None
    module = submodule(found.layers[layer], found.layout.output)
    parameter = getattr(module, "weight", None)
    if parameter is None:
        return None
    kept = module.__dict__.get("_explorer_output_weight")
    if kept is None or kept[0] is not parameter:
        # GPT-2's Conv1D stores (in, out); nn.Linear stores (out, in).
        view = parameter.detach() if isinstance(module, nn.Linear) else parameter.detach().T
        kept = (parameter, view)
        module.__dict__["_explorer_output_weight"] = kept
    return kept[1]

"""Hook points on a loaded Hugging Face model, installed once, before anyone runs it.

`install(model)` switches the model's attention to the hooked eager attention (models/hooks/
attention.py) and gives the modules that compute the other points (models/hooks/points.py) a
forward hook or pre-hook that hands the value to the active run (models/hooks/run.py). With no
run active every hook returns at once and the model computes exactly what it computes without
them. Each layer of the stack also gets a forward that skips the layer when the run's plan
says so (a long input's layer computed again from its kept input).

Where the points sit inside a layer depends on the architecture's layout, described below as
data (one `Layout` per family: BERT-like encoders, DistilBERT, Llama-like and GPT-2 decoders,
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
from dataclasses import dataclass, field

import torch
from torch import nn

from models.hooks import points
from models.hooks.attention import ATTENTION_NAME, WHERE
from models.hooks.run import active

HOOKED = "_explorer_hooked"  # True on a model (or from-scratch model) whose points exist
OUT, OUT0, IN = "output", "first output", "input"  # where a module's value is read
_CROSS_MARKERS = ("crossattention", "encoder_attn", "EncDecAttention", "cross_attn")
_OUTPUT_ITEMS: weakref.WeakKeyDictionary[type, int] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Layout:
    """Where one family's layer computes each point: kind -> (module path in the layer, how the
    value is read: its output, the first item of its output, or its first input). A path may
    index a ModuleList from the end ("layer.-1"). `requires` picks the family; with `mid_from_
    attention` (pre-norm layers) resid_mid is resid_pre + attn_out, formed where the layer
    forms it, and edited by changing attn_out. `model_types`, when given, are the only model
    types the layout describes: where the same modules run in another order (BART is post-norm,
    mBART pre-norm), the modules alone cannot tell which layout is right."""

    family: str
    requires: tuple[str, ...]
    places: dict[str, tuple[str, str]] = field(default_factory=dict)
    output: str = ""  # the attention's output projection W_O
    mid_from_attention: bool = False
    forbids: tuple[str, ...] = ()
    model_types: tuple[str, ...] = ()


_BART_MODULES = ("self_attn.out_proj", "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm")
_T5_PLACES = {"ln1": ("layer.0.layer_norm", OUT), "attn_out": ("layer.0.SelfAttention", OUT0),
               "resid_mid": ("layer.1", IN), "ln2": ("layer.-1.layer_norm", OUT),
               "mlp_post": ("layer.-1.DenseReluDense.wo", IN),
               "mlp_out": ("layer.-1.DenseReluDense", OUT)}
LAYOUTS = (
    Layout("bert", ("attention.self", "attention.output.dense", "intermediate.dense",
                    "output.dense"),
           {"attn_out": ("attention.output.dense", OUT), "resid_mid": ("attention.output", OUT),
            "mlp_pre": ("intermediate.dense", OUT), "mlp_post": ("intermediate", OUT),
            "mlp_out": ("output.dense", OUT)},
           output="attention.output.dense"),
    Layout("distilbert", ("attention.out_lin", "sa_layer_norm", "ffn.lin1", "ffn.lin2"),
           {"attn_out": ("attention", OUT0), "resid_mid": ("sa_layer_norm", OUT),
            "mlp_pre": ("ffn.lin1", OUT), "mlp_post": ("ffn.lin2", IN), "mlp_out": ("ffn", OUT)},
           output="attention.out_lin"),
    Layout("llama", ("self_attn.o_proj", "input_layernorm", "post_attention_layernorm",
                     "mlp.down_proj"),
           {"ln1": ("input_layernorm", OUT), "attn_out": ("self_attn", OUT0),
            "ln2": ("post_attention_layernorm", OUT), "mlp_pre": ("mlp.gate_proj", OUT),
            "mlp_post": ("mlp.down_proj", IN), "mlp_out": ("mlp", OUT)},
           output="self_attn.o_proj", mid_from_attention=True,
           forbids=("pre_feedforward_layernorm", "post_feedforward_layernorm")),
    Layout("gpt2", ("ln_1", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"),
           {"ln1": ("ln_1", OUT), "attn_out": ("attn", OUT0), "ln2": ("ln_2", OUT),
            "mlp_pre": ("mlp.c_fc", OUT), "mlp_post": ("mlp.c_proj", IN), "mlp_out": ("mlp", OUT)},
           output="attn.c_proj", mid_from_attention=True),
    Layout("bart", _BART_MODULES,
           {"attn_out": ("self_attn", OUT0), "resid_mid": ("self_attn_layer_norm", OUT),
            "mlp_pre": ("fc1", OUT), "mlp_post": ("fc2", IN), "mlp_out": ("fc2", OUT)},
           output="self_attn.out_proj",
           model_types=("bart", "marian", "blenderbot-small", "plbart", "mvp")),
    # The same modules, pre-norm: each sublayer reads its norm, the stream adds its output.
    Layout("bart-pre-norm", _BART_MODULES,
           {"ln1": ("self_attn_layer_norm", OUT), "attn_out": ("self_attn", OUT0),
            "ln2": ("final_layer_norm", OUT), "mlp_pre": ("fc1", OUT), "mlp_post": ("fc2", IN),
            "mlp_out": ("fc2", OUT)},
           output="self_attn.out_proj", mid_from_attention=True,
           model_types=("mbart", "pegasus", "m2m_100", "blenderbot", "whisper")),
    # T5: layer.0 self-attention, (decoder) layer.1 cross-attention, layer.-1 feed-forward; the
    # stream after the self-attention is what layer.1 reads (the feed-forward in the encoder,
    # the cross-attention in the decoder). Gated feed-forwards (T5 v1.1, flan) activate wi_0.
    Layout("t5-gated", ("layer.0.SelfAttention.o", "layer.0.layer_norm",
                        "layer.-1.DenseReluDense.wi_0", "layer.-1.DenseReluDense.wo"),
           {**_T5_PLACES, "mlp_pre": ("layer.-1.DenseReluDense.wi_0", OUT)},
           output="layer.0.SelfAttention.o"),
    Layout("t5", ("layer.0.SelfAttention.o", "layer.0.layer_norm", "layer.-1.DenseReluDense.wi",
                  "layer.-1.DenseReluDense.wo"),
           {**_T5_PLACES, "mlp_pre": ("layer.-1.DenseReluDense.wi", OUT)},
           output="layer.0.SelfAttention.o"),
)
_TOKEN_EMBEDDINGS = ("word_embeddings", "embed_tokens", "wte")
_POSITION_EMBEDDINGS = ("position_embeddings", "wpe", "embed_positions")
_SEGMENT_EMBEDDINGS = ("token_type_embeddings",)
_FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "layer_norm")


@dataclass(frozen=True)
class Stack:
    """One stack of layers: `name` ("" for a model with one stack, else "encoder"/"decoder"),
    the module holding it (its embeddings and final norm), its layers and their layout."""

    name: str
    root: nn.Module
    layers: nn.ModuleList
    layout: Layout | None
    final_norm: nn.Module | None


def submodule(root: nn.Module, path: str) -> nn.Module | None:
    """root.a.b.-1.c, None where a part is missing."""
    module = root
    for part in path.split("."):
        if part.lstrip("-").isdigit() and isinstance(module, (nn.ModuleList, nn.Sequential)):
            index = int(part)
            if not -len(module) <= index < len(module):
                return None
            module = module[index]
        else:
            module = getattr(module, part, None)
            if not isinstance(module, nn.Module):
                return None
    return module


def layer_list(root: nn.Module) -> nn.ModuleList:
    """The root's stack of transformer layers: its longest ModuleList of modules of one class."""
    best = None
    for module in root.modules():
        if isinstance(module, nn.ModuleList) and len(module) and \
                len({type(child) for child in module}) == 1 and \
                (best is None or len(module) > len(best)):
            if any(isinstance(child, nn.ModuleList) for child in module):
                continue
            best = module
    if best is None:
        raise ValueError(f"{type(root).__name__}: its stack of layers could not be found")
    return best


def _layout(layer: nn.Module, model_type: str) -> Layout | None:
    for layout in LAYOUTS:
        if all(submodule(layer, path) is not None for path in layout.requires) and \
                not any(submodule(layer, path) is not None for path in layout.forbids) and \
                (not layout.model_types or model_type in layout.model_types):
            return layout
    return None


def _child(root: nn.Module, names: Iterable[str]) -> nn.Module | None:
    for holder in (root, getattr(root, "embeddings", None)):
        if not isinstance(holder, nn.Module):
            continue
        for name in names:
            module = getattr(holder, name, None)
            if isinstance(module, nn.Module):
                return module
    return None


def stacks(model: nn.Module) -> tuple[Stack, ...]:
    """The model's stacks of layers, with their layouts (one for most models; an
    encoder-decoder's encoder and decoder)."""
    if getattr(model.config, "is_encoder_decoder", False):
        roots = (("encoder", model.get_encoder()), ("decoder", model.get_decoder()))
    else:
        roots = (("", getattr(model, "base_model", model)),)
    found = []
    for name, root in roots:
        layers = layer_list(root)
        final = next((getattr(root, n) for n in _FINAL_NORMS
                      if isinstance(getattr(root, n, None), nn.Module)), None)
        found.append(Stack(name, root, layers,
                           _layout(layers[0], getattr(model.config, "model_type", "")), final))
    return tuple(found)


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
    for names, kind in ((_TOKEN_EMBEDDINGS, points.TOKEN_EMBED), (_POSITION_EMBEDDINGS,
                        points.POS_EMBED), (_SEGMENT_EMBEDDINGS, points.SEGMENT_EMBED)):
        _hook_output(_child(stack.root, names), ((_prefixed(name, kind), OUT),))
    if stack.final_norm is not None:
        _hook_output(stack.final_norm, ((_prefixed(name, points.FINAL), OUT),))
    layout = stack.layout
    hands_on = _hands_on(stack.layers)
    for index, layer in enumerate(stack.layers):
        for path, module in layer.named_modules():
            module.__dict__["_explorer_layer"] = (name, index)
            kind = "cross_attn" if any(m in path for m in _CROSS_MARKERS) else "attn"
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
        for names_, kind in ((_TOKEN_EMBEDDINGS, points.TOKEN_EMBED),
                             (_POSITION_EMBEDDINGS, points.POS_EMBED),
                             (_SEGMENT_EMBEDDINGS, points.SEGMENT_EMBED)):
            if _child(stack.root, names_) is not None:
                names.append(_prefixed(prefix, kind))
        names.append(_prefixed(prefix, points.EMBED))
        has = set(stack.layout.places) if stack.layout else set()
        cross = any(any(m in path for m in _CROSS_MARKERS)
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

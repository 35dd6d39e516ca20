"""Where each family's layers compute the hook points, as data, and how a model's stacks of
layers are found (models/hooks/install.py installs the hooks there).

A `Layout` names, for one family of layers (BERT-like encoders, DistilBERT, Llama-like and GPT-2
decoders, BART/Marian and T5 encoder-decoders), the module whose output or input is each point.
A model of another family has no layout: it still has the residual stream around each layer and
every attention point, which need no layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from torch import nn

OUT, OUT0, IN = "output", "first output", "input"  # where a module's value is read
CROSS_MARKERS = ("crossattention", "encoder_attn", "EncDecAttention", "cross_attn")


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
TOKEN_EMBEDDINGS = ("word_embeddings", "embed_tokens", "wte")
POSITION_EMBEDDINGS = ("position_embeddings", "wpe", "embed_positions")
SEGMENT_EMBEDDINGS = ("token_type_embeddings",)
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


def child(root: nn.Module, names: Iterable[str]) -> nn.Module | None:
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

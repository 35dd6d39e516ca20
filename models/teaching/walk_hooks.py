"""Reading one encoder layer for the layer walk (models/teaching/layer_walk.py).

The embeddings' and the chosen layer's modules are named the same for the two layouts the walk
reads (the from-scratch `models.scratch.encoder.Encoder`, pre- or post-norm, and a Hugging Face BERT),
and one forward with forward hooks on them keeps the tensors the model itself computed there.

Dimension letters: B batch, T tokens, Q/K query/key positions, H heads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch import nn

from models.scratch.encoder import Encoder

WALKABLE_TYPES = ("bert",)
WALK_HOOK_MARK = "_attention_explorer_layer_walk"  # set on this module's hook functions


class WalkUnavailable(ValueError):
    """The model's layers are not laid out in a way this walk reads."""


@dataclass(frozen=True)
class LayerParts:
    """The modules of the embeddings and of one layer, named the same for every layout."""

    word: nn.Embedding
    position: nn.Embedding
    segment: nn.Embedding | None
    embedding_norm: nn.LayerNorm
    layer: nn.Module
    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear
    attention_norm: nn.LayerNorm
    expand: nn.Linear
    activation: object
    activation_module: nn.Module  # the module whose output is the activated hidden layer
    contract: nn.Linear
    feed_forward_norm: nn.LayerNorm
    num_layers: int
    num_heads: int
    pre_norm: bool


def layer_parts(model: nn.Module, layer: int) -> LayerParts:
    """The embeddings' and layer `layer`'s modules of a from-scratch Encoder or a BERT.

    WalkUnavailable for other models, ValueError for a layer out of range.
    """
    if isinstance(model, Encoder):
        count = len(model.layers)
        _check_layer(layer, count)
        block = model.layers[layer]
        return LayerParts(
            word=model.embeddings.tokens, position=model.embeddings.positions,
            segment=model.embeddings.segments, embedding_norm=model.embeddings.norm,
            layer=block, query=block.attention.query, key=block.attention.key,
            value=block.attention.value, output=block.attention.output,
            attention_norm=block.attention_norm, expand=block.feed_forward.expand,
            activation=block.feed_forward.activation,
            activation_module=block.feed_forward.activation,
            contract=block.feed_forward.contract, feed_forward_norm=block.feed_forward_norm,
            num_layers=count, num_heads=model.config.num_heads, pre_norm=block.pre_norm,
        )
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in WALKABLE_TYPES:
        raise WalkUnavailable("the layer walk reads the from-scratch encoder and BERT models, "
                              f"not '{model_type}' models")
    count = len(model.encoder.layer)
    _check_layer(layer, count)
    block = model.encoder.layer[layer]
    return LayerParts(
        word=model.embeddings.word_embeddings, position=model.embeddings.position_embeddings,
        segment=model.embeddings.token_type_embeddings, embedding_norm=model.embeddings.LayerNorm,
        layer=block, query=block.attention.self.query, key=block.attention.self.key,
        value=block.attention.self.value, output=block.attention.output.dense,
        attention_norm=block.attention.output.LayerNorm, expand=block.intermediate.dense,
        activation=block.intermediate.intermediate_act_fn, activation_module=block.intermediate,
        contract=block.output.dense, feed_forward_norm=block.output.LayerNorm,
        num_layers=count, num_heads=model.config.num_attention_heads, pre_norm=False,
    )


def _check_layer(layer: int, count: int) -> None:
    if not 0 <= layer < count:
        raise ValueError(f"layer must be in [0, {count}), got {layer}")


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


class _Recorder:
    """Forward hooks that keep the inputs and outputs of chosen modules during one run.

    The model is shared by every session of the server, and a forward runs in its caller's
    thread: the hooks record only the forwards of the thread that installed them, so another
    session running the same model meanwhile cannot slip its tensors into this walk.
    """

    def __init__(self) -> None:
        self.seen: dict[str, torch.Tensor] = {}
        self.handles = []
        self.owner = threading.get_ident()

    def output(self, name: str, module: nn.Module) -> None:
        def hook(_module, _args, result):
            if threading.get_ident() == self.owner:
                self.seen[name] = _first(result).detach().clone()
        setattr(hook, WALK_HOOK_MARK, True)
        self.handles.append(module.register_forward_hook(hook))

    def input(self, name: str, module: nn.Module) -> None:
        def hook(_module, args, kwargs):
            if threading.get_ident() == self.owner:
                value = args[0] if args else kwargs["hidden_states"]
                self.seen[name] = value.detach().clone()
        setattr(hook, WALK_HOOK_MARK, True)
        self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def remove_walk_hooks(model: nn.Module) -> None:
    """Drop this module's hooks from every submodule (a copy taken while a walk ran carries
    them); the model's other hooks (transformers records its outputs with hooks) stay."""
    for module in model.modules():
        for hooks in (module._forward_hooks, module._forward_pre_hooks):
            for handle_id in [i for i, hook in hooks.items() if getattr(hook, WALK_HOOK_MARK, False)]:
                del hooks[handle_id]


def run_hooked(model: nn.Module, parts: LayerParts, input_ids: torch.Tensor,
               token_type_ids: torch.Tensor, attention_mask: torch.Tensor
               ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor | None]:
    """Run the model once on a (B, T) batch; return the hooked tensors, the layer's weights and
    the encoder's mask."""
    recorder = _Recorder()
    recorder.output("tokens", parts.word)
    recorder.output("positions", parts.position)
    if parts.segment is not None:
        recorder.output("segments", parts.segment)
    recorder.input("embedding_sum", parts.embedding_norm)
    recorder.output("embeddings", parts.embedding_norm)
    recorder.input("layer_input", parts.layer)
    recorder.output("query", parts.query)
    recorder.output("key", parts.key)
    recorder.output("value", parts.value)
    recorder.input("concatenated", parts.output)
    recorder.output("attention_output", parts.output)
    recorder.input("attention_norm_input", parts.attention_norm)
    recorder.output("attention_norm", parts.attention_norm)
    recorder.output("expanded", parts.expand)
    recorder.output("activated", parts.activation_module)
    recorder.output("contracted", parts.contract)
    recorder.input("feed_forward_norm_input", parts.feed_forward_norm)
    recorder.output("feed_forward_norm", parts.feed_forward_norm)
    recorder.output("layer_output", parts.layer)
    try:
        with torch.inference_mode():
            if isinstance(model, Encoder):
                output = model(input_ids, token_type_ids, attention_mask)
                attentions, mask = output.attentions, output.mask
            else:
                output = model(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids, output_attentions=True)
                attentions, mask = output.attentions, None
    finally:
        recorder.remove()
    return recorder.seen, attentions, mask

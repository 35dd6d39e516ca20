"""Which modules of the embeddings and of one encoder layer the layer walk recomputes with
(models/teaching/layer_walk.py), named the same for the two layouts it reads: the from-scratch
`models.scratch.encoder.Encoder` (pre- or post-norm) and a Hugging Face BERT (post-norm).

The walk reads what the model itself computed from its hook points (one run, models/hooks);
these modules only give it the weights to recompute each step with and to display.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from models.hooks import points
from models.scratch.encoder import Encoder

WALKABLE_TYPES = ("bert",)


class WalkUnavailable(ValueError):
    """The model's layers are not laid out in a way this walk reads."""


@dataclass(frozen=True)
class LayerParts:
    """The modules of the embeddings and of one layer, named the same for every layout.

    embedding_order: the embedding points in the order the model adds them (the sum before the
    embeddings' LayerNorm is formed from them in that order)."""

    word: nn.Embedding
    position: nn.Embedding
    segment: nn.Embedding | None
    embedding_norm: nn.LayerNorm
    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear
    attention_norm: nn.LayerNorm
    expand: nn.Linear
    activation: object
    contract: nn.Linear
    feed_forward_norm: nn.LayerNorm
    num_layers: int
    num_heads: int
    pre_norm: bool
    embedding_order: tuple[str, ...]


def layer_parts(model: nn.Module, layer: int) -> LayerParts:
    """The embeddings' and layer `layer`'s modules of a from-scratch Encoder or a BERT.

    WalkUnavailable for other models, ValueError for a layer out of range.
    """
    if isinstance(model, Encoder):
        count = len(model.layers)
        _check_layer(layer, count)
        block = model.layers[layer]
        segment = model.embeddings.segments
        return LayerParts(
            word=model.embeddings.tokens, position=model.embeddings.positions,
            segment=segment, embedding_norm=model.embeddings.norm,
            query=block.attention.query, key=block.attention.key,
            value=block.attention.value, output=block.attention.output,
            attention_norm=block.attention_norm, expand=block.feed_forward.expand,
            activation=block.feed_forward.activation,
            contract=block.feed_forward.contract, feed_forward_norm=block.feed_forward_norm,
            num_layers=count, num_heads=model.config.num_heads, pre_norm=block.pre_norm,
            embedding_order=(points.TOKEN_EMBED, points.POS_EMBED)
            + ((points.SEGMENT_EMBED,) if segment is not None else ()),
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
        query=block.attention.self.query, key=block.attention.self.key,
        value=block.attention.self.value, output=block.attention.output.dense,
        attention_norm=block.attention.output.LayerNorm, expand=block.intermediate.dense,
        activation=block.intermediate.intermediate_act_fn,
        contract=block.output.dense, feed_forward_norm=block.output.LayerNorm,
        num_layers=count, num_heads=model.config.num_attention_heads, pre_norm=False,
        embedding_order=(points.TOKEN_EMBED, points.SEGMENT_EMBED, points.POS_EMBED),
    )


def _check_layer(layer: int, count: int) -> None:
    if not 0 <= layer < count:
        raise ValueError(f"layer must be in [0, {count}), got {layer}")

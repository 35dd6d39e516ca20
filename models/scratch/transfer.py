"""Copying a pretrained BERT's weights into the from-scratch encoder."""

from __future__ import annotations

import torch
from torch import nn

from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder


def config_from_bert(bert_config) -> EncoderConfig:
    """The from-scratch configuration that has the same shape as a Hugging Face BertConfig."""
    if bert_config.model_type != "bert":
        raise ValueError(f"only 'bert' weights can be copied, not '{bert_config.model_type}'")
    if getattr(bert_config, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"the from-scratch encoder uses GELU, not {bert_config.hidden_act!r}")
    position_type = getattr(bert_config, "position_embedding_type", "absolute")
    if position_type not in (None, "absolute"):
        raise ValueError(f"only absolute position embeddings are supported, not {position_type!r}")
    return EncoderConfig(
        vocab_size=bert_config.vocab_size,
        max_positions=bert_config.max_position_embeddings,
        type_vocab_size=bert_config.type_vocab_size,
        hidden_size=bert_config.hidden_size,
        num_heads=bert_config.num_attention_heads,
        num_layers=bert_config.num_hidden_layers,
        intermediate_size=bert_config.intermediate_size,
        dropout=bert_config.attention_probs_dropout_prob,
        layer_norm_eps=bert_config.layer_norm_eps,
        norm_style="post",
    )


def _copy(target: nn.Module, source: nn.Module) -> None:
    with torch.no_grad():
        target.weight.copy_(source.weight)
        if getattr(target, "bias", None) is not None:
            target.bias.copy_(source.bias)


def encoder_from_bert(bert: nn.Module) -> Encoder:
    """A from-scratch Encoder holding a copy of a Hugging Face BertModel's weights, in eval mode."""
    encoder = Encoder(config_from_bert(bert.config))
    source = bert.embeddings
    _copy(encoder.embeddings.tokens, source.word_embeddings)
    _copy(encoder.embeddings.positions, source.position_embeddings)
    _copy(encoder.embeddings.segments, source.token_type_embeddings)
    _copy(encoder.embeddings.norm, source.LayerNorm)
    for ours, theirs in zip(encoder.layers, bert.encoder.layer, strict=True):
        _copy(ours.attention.query, theirs.attention.self.query)
        _copy(ours.attention.key, theirs.attention.self.key)
        _copy(ours.attention.value, theirs.attention.self.value)
        _copy(ours.attention.output, theirs.attention.output.dense)
        _copy(ours.attention_norm, theirs.attention.output.LayerNorm)
        _copy(ours.feed_forward.expand, theirs.intermediate.dense)
        _copy(ours.feed_forward.contract, theirs.output.dense)
        _copy(ours.feed_forward_norm, theirs.output.LayerNorm)
    return encoder.eval()

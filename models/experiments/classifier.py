"""A classification head on an encoder: pool the last hidden states, then one linear layer.

Dimensions: B batch, T tokens, D model width, C classes.

Pooling. "mean" (the default) averages the last hidden state over the real tokens (padding left
out); "cls" takes the [CLS] position, as BERT's paper and seed 001's classifier do. The embedded
MiniLM (all-MiniLM-L6-v2) was trained to make sentence vectors by mean pooling, so its mean is
already a good summary of a sentence and a small data set fine-tunes it quickly, while its [CLS]
vector was never trained to summarise anything. Both are available and both are tested.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.scratch.config import EncoderConfig
from models.scratch.encoder import Encoder
from models.hooks.record import AttentionRecord
from models.scratch.build import random_encoder
from models.loading.tokenize import encode, first_item_attentions
from models.hooks.install import HOOKED, output_weight, point_names
from models.hooks.capture import num_layers
from models.hooks import points
from models.hooks.run import Run, run_model

POOLINGS = ("mean", "cls")
HEAD_INIT_STD = 0.02  # BERT's initialiser range
HEAD_DROPOUT = 0.1


class SequenceClassifier(nn.Module):
    """encoder -> pooled (B, D) -> dropout -> linear -> logits (B, C).

    `encoder` is the from-scratch `Encoder` or a Hugging Face encoder (e.g. BertModel); both are
    called with token ids, padding mask and segment ids and give a last hidden state (B, T, D).
    """

    def __init__(self, encoder: nn.Module, hidden_size: int, num_classes: int,
                 pooling: str = "mean", seed: int = 0):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if num_classes < 2:
            raise ValueError(f"a classifier needs at least 2 classes, got {num_classes}")
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = nn.Dropout(HEAD_DROPOUT)
        self.head = nn.Linear(hidden_size, num_classes)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.head.weight.normal_(0.0, HEAD_INIT_STD, generator=generator)
            self.head.bias.zero_()

    @property
    def num_classes(self) -> int:
        return self.head.out_features

    @property
    def _explorer_hooked(self) -> bool:
        """A run reads the classifier's points through its encoder's (models/hooks)."""
        return bool(getattr(self.encoder, HOOKED, False))

    def hook_layer_count(self) -> int:
        return num_layers(self.encoder)

    def hook_point_names(self) -> list[str]:
        return list(point_names(self.encoder))

    def attention_output_weight(self, layer: int):
        return output_weight(self.encoder, layer)

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last hidden state (B, T, D)."""
        if isinstance(self.encoder, Encoder):
            return self.encoder(input_ids, token_type_ids, attention_mask).last_hidden_state
        inputs = dict(input_ids=input_ids, attention_mask=attention_mask)
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        return self.encoder(**inputs).last_hidden_state

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, D): the [CLS] position, or the mean over real tokens."""
        if self.pooling == "cls":
            return hidden[:, 0]  # (B, D)
        real = attention_mask.to(hidden.dtype)[:, :, None]  # (B, T, 1)
        return (hidden * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)  # (B, D)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        pooled = self.pool(self.hidden(input_ids, attention_mask, token_type_ids), attention_mask)
        return self.head(self.dropout(pooled))  # (B, C)


def pretrained_classifier(model: nn.Module, num_classes: int, pooling: str = "mean",
                          seed: int = 0) -> SequenceClassifier:
    """A classifier on a COPY of a pretrained encoder (the cached original is never trained)."""
    encoder = copy.deepcopy(model)  # with the original's hook points (installed once, at load)
    return SequenceClassifier(encoder, model.config.hidden_size, num_classes, pooling, seed).eval()


def scratch_encoder_config(vocab_size: int) -> EncoderConfig:
    """The from-scratch encoder trained for classification: the sidebar's textbook size
    (4 layers x 4 heads, width 128, pre-norm) over the pretrained tokenizer's vocabulary."""
    return EncoderConfig(vocab_size=vocab_size, hidden_size=128, num_heads=4, num_layers=4,
                         intermediate_size=512, norm_style="pre")


def scratch_classifier(config: EncoderConfig, num_classes: int, pooling: str = "mean",
                       seed: int = 0) -> SequenceClassifier:
    """A classifier on a from-scratch encoder with seeded random weights."""
    encoder = random_encoder(config, seed)
    return SequenceClassifier(encoder, config.hidden_size, num_classes, pooling, seed).eval()


def with_head(classifier: SequenceClassifier, encoder: nn.Module,
              head: nn.Linear) -> SequenceClassifier:
    """A classifier made of `encoder` (shared, not copied) and a copy of `head`, in eval mode."""
    result = SequenceClassifier(encoder, head.in_features, head.out_features,
                                classifier.pooling)
    result.head.load_state_dict(head.state_dict())
    return result.eval()


def tokenize(tokenizer, texts, max_tokens: int) -> dict[str, torch.Tensor]:
    """A padded batch: input_ids, attention_mask (and token_type_ids when the tokenizer has them)."""
    encoded = tokenizer(list(texts), padding=True, truncation=True, max_length=max_tokens,
                        return_tensors="pt", verbose=False)
    return {name: encoded[name] for name in ("input_ids", "attention_mask", "token_type_ids")
            if name in encoded}


def predict(classifier: SequenceClassifier, tokenizer, texts, max_tokens: int,
            batch_size: int = 64) -> np.ndarray:
    """Class probabilities (N, C) for `texts`, in eval mode."""
    if classifier.training:
        raise ValueError("predict needs the classifier in eval mode")
    parts = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            logits = classifier(**tokenize(tokenizer, texts[start:start + batch_size], max_tokens))
            parts.append(torch.softmax(logits, dim=-1))  # (B, C)
    return torch.cat(parts).numpy()


@dataclass(frozen=True)
class Prediction:
    probabilities: tuple[float, ...]  # per class
    class_names: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.class_names[int(np.argmax(self.probabilities))]

    @property
    def confidence(self) -> float:
        return float(max(self.probabilities))


def predict_one(classifier: SequenceClassifier, tokenizer, text: str, max_tokens: int,
                class_names: tuple[str, ...]) -> Prediction:
    probabilities = predict(classifier, tokenizer, [text], max_tokens)[0]
    return Prediction(tuple(float(p) for p in probabilities), tuple(class_names))


def encoder_record(encoder: nn.Module, tokenizer, text: str, max_tokens: int,
                   source: str) -> AttentionRecord:
    """The attention of every layer and head of `encoder` (from-scratch or Hugging Face) for one
    text, as the encoder computed it (eval mode)."""
    if encoder.training:
        raise ValueError("the encoder must be in eval mode")
    encoded = encode(tokenizer, text, None, max_tokens)
    names = points.every_layer("pattern", num_layers(encoder))
    run = Run(cache=names)
    run_model(encoder, encoded.model_inputs(), run)
    attentions = tuple(run[name] for name in names)  # L of (1, H, Q, K)
    return AttentionRecord(tokens=encoded.tokens, weights=first_item_attentions(attentions),
                           source=source, segment_ids=encoded.segment_ids,
                           special_positions=encoded.special_positions,
                           dropped_tokens=encoded.dropped_tokens)

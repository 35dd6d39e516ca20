"""The same encoder under different masks: a causal twin, and two sentences in one padded batch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from models.scratch.encoder import Encoder
from models.hooks.record import AttentionRecord


def with_mask_style(encoder: Encoder, causal: bool) -> Encoder:
    """A copy of `encoder` with the same weights whose attention is causal (or not).

    The causal flag adds no parameters, so the two encoders differ in their mask alone.
    """
    twin = Encoder(replace(encoder.config, causal=causal))
    twin.load_state_dict(encoder.state_dict())
    return twin.eval()


@dataclass(frozen=True)
class PaddedBatch:
    """Sentences of different lengths run as one batch, padded at the end to the longest.

    masked: one record per sentence, padded tokens included, run with the padding mask.
    unmasked: the same batch run without it (what forgetting the mask does).
    lengths: real tokens per sentence (the rest are padding).
    alone_difference: per sentence, the largest |weight| difference between its real rows and
        columns in the masked batch and the same sentence run alone (float rounding only).
    unmasked_difference: the same comparison for the unmasked batch.
    unmasked_pad_share: per sentence, the mean weight its real queries put on padding keys
        when the mask is left out (0 with the mask).
    """

    masked: tuple[AttentionRecord, ...]
    unmasked: tuple[AttentionRecord, ...]
    lengths: tuple[int, ...]
    alone_difference: tuple[float, ...]
    unmasked_difference: tuple[float, ...]
    unmasked_pad_share: tuple[float, ...]

    @property
    def num_tokens(self) -> int:
        return self.masked[0].num_tokens

    @property
    def is_padded(self) -> bool:
        return min(self.lengths) < self.num_tokens


def _attentions(encoder: Encoder, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                attention_mask: torch.Tensor | None) -> torch.Tensor:
    with torch.inference_mode():
        output = encoder(input_ids, token_type_ids, attention_mask)
    return torch.stack(output.attentions, dim=1)  # (B, L, H, Q, K)


def padded_batch(encoder: Encoder, tokenizer, texts: tuple[str, ...], source: str) -> PaddedBatch:
    """Tokenize `texts` together (padding on the right), run them as one batch, and compare.

    Raises ValueError for an empty text or a tokenizer without a padding token.
    """
    if any(not text or not text.strip() for text in texts):
        raise ValueError("every sentence of the batch needs some text")
    if tokenizer.pad_token is None:
        raise ValueError("this tokenizer has no padding token")
    encoded = tokenizer(list(texts), padding=True, truncation=True,
                        max_length=encoder.config.max_positions, padding_side="right",
                        return_tensors="pt")
    input_ids = encoded["input_ids"]  # (B, T)
    attention_mask = encoded["attention_mask"]  # (B, T), 1 = real token
    token_type_ids = torch.zeros_like(input_ids)  # (B, T): one sentence each, segment 0
    with_mask = _attentions(encoder, input_ids, token_type_ids, attention_mask)
    without_mask = _attentions(encoder, input_ids, token_type_ids, None)
    lengths = tuple(int(n) for n in attention_mask.sum(dim=1))
    masked, unmasked, alone_diff, unmasked_diff, pad_share = [], [], [], [], []
    for index, length in enumerate(lengths):
        tokens = tuple(tokenizer.convert_ids_to_tokens(input_ids[index].tolist()))
        alone = _attentions(encoder, input_ids[index:index + 1, :length],
                            token_type_ids[index:index + 1, :length], None)[0]  # (L, H, Q, K)
        real_masked = with_mask[index, :, :, :length, :length]  # (L, H, Q, K)
        real_unmasked = without_mask[index, :, :, :length, :length]  # (L, H, Q, K)
        alone_diff.append(float((real_masked - alone).abs().max()))
        unmasked_diff.append(float((real_unmasked - alone).abs().max()))
        pad_weight = without_mask[index, :, :, :length, length:].sum(dim=-1)  # (L, H, Q)
        pad_share.append(float(pad_weight.mean()))
        masked.append(AttentionRecord(tokens=tokens, weights=with_mask[index].numpy(),
                                      source=source, masks=("padding",)))
        unmasked.append(AttentionRecord(tokens=tokens, weights=without_mask[index].numpy(),
                                        source=source))
    return PaddedBatch(tuple(masked), tuple(unmasked), lengths, tuple(alone_diff),
                       tuple(unmasked_diff), tuple(pad_share))

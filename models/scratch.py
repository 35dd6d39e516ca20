"""Running text through the from-scratch encoder into an AttentionRecord."""

from __future__ import annotations

import torch

from models.config import EncoderConfig
from models.encoder import Encoder, EncoderOutput
from models.record import AttentionRecord
from models.tokenize import EncodedText, encode, first_item_attentions


def random_encoder(config: EncoderConfig, seed: int) -> Encoder:
    """A from-scratch encoder with weights drawn from a seeded generator, in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = Encoder(config)
    return encoder.eval()


def run_encoder(
    encoder: Encoder, tokenizer, text: str, text_pair: str | None, source: str
) -> AttentionRecord:
    encoded = encode(tokenizer, text, text_pair, encoder.config.max_positions)
    with torch.inference_mode():
        output = encoder(encoded.input_ids, encoded.token_type_ids, encoded.attention_mask)
    return record_from_output(encoder, encoded, output, source)


def record_from_output(
    encoder: Encoder, encoded: EncodedText, output: EncoderOutput, source: str
) -> AttentionRecord:
    """The record of the first input of a batch the encoder has run."""
    weights = first_item_attentions(output.attentions)  # (L, H, Q, K)
    return AttentionRecord(
        tokens=encoded.tokens,
        weights=weights,
        source=source,
        masks=("causal",) if encoder.config.causal else (),
        segment_ids=encoded.segment_ids,
        special_positions=encoded.special_positions,
        dropped_tokens=encoded.dropped_tokens,
    )

"""Cached resources of the "Inside one encoder layer" page: walks and their from-scratch encoders.

A walk is kept per input in the byte-bounded store shared with the other pages
(models.store.stores.RESULTS): a MiniLM walk holds ~7 MB of weight matrices and ~30 MB more at 512
tokens, a from-scratch batch of 32 × 128 tokens at width 384 more still. The random encoders
the from-scratch walks run on (one per choice of sizes and seed; ~90 MB at width 384 with BERT's
vocabulary, more with a larger one) are kept in a store of their own, bounded in bytes too
(models.store.stores.WALK_ENCODERS, `models.limits.WALK_ENCODER_BYTES`).
"""

from __future__ import annotations

from models.scratch.encoder import Encoder
from models.experiments.labelled_data import load_shipped
from models.teaching.layer_walk import (LayerWalk, batch_texts, encode_batch, scratch_walk_config,
                               walk_layer)
from models.scratch.build import random_encoder
from models.store import stores
from models.store.keys import result_key
from ui import cache
from ui.byte_caches import kept


def scratch_encoder(vocab_size: int, hidden: int, heads: int, layers: int, norm_style: str,
                    seed: int) -> Encoder:
    return kept(
        stores.WALK_ENCODERS,
        result_key("scratch_encoder", vocab_size, hidden, heads, layers, norm_style, seed),
        lambda: random_encoder(scratch_walk_config(vocab_size, hidden, heads, layers, norm_style),
                               seed),
        "Building the from-scratch encoder…")


def pretrained_walk(name: str, text: str, layer: int) -> LayerWalk:
    def compute() -> LayerWalk:
        loaded = cache.pretrained(name)
        batch = encode_batch(loaded.tokenizer, [text], max_tokens=loaded.max_tokens)
        return walk_layer(loaded.model, batch, layer, name)

    return kept(stores.RESULTS, result_key("pretrained_walk", name, text, layer), compute,
                "Following the input…")


def scratch_walk(name: str, sizes: tuple, seed: int, batch_size: int, length: int, text: str,
                 layer: int) -> LayerWalk:
    """`sizes` is (hidden, heads, layers, norm style) of the from-scratch encoder."""
    def compute() -> LayerWalk:
        tokenizer = cache.pretrained(name).tokenizer
        encoder = scratch_encoder(len(tokenizer), *sizes, seed)
        texts = batch_texts(text, load_shipped().texts, batch_size)
        label = f"from-scratch encoder, random weights (seed {seed})"
        return walk_layer(encoder, encode_batch(tokenizer, texts, length=length), layer, label)

    key = result_key("scratch_walk", name, sizes, seed, batch_size, length, text, layer)
    return kept(stores.RESULTS, key, compute, "Following the batch…")

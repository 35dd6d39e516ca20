"""The from-scratch encoder (models/scratch/) with seeded random weights, on a pretrained
encoder's tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.loading.kinds.base import KindSpec, Loaders

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource, Source
    from models.scratch.config import EncoderConfig


def scratch_config(vocab_size: int) -> EncoderConfig:
    """The small from-scratch encoder used with random weights (textbook-sized)."""
    from models.scratch.config import EncoderConfig

    return EncoderConfig(vocab_size=vocab_size, hidden_size=128, num_heads=4, num_layers=4,
                         intermediate_size=512, norm_style="pre")


def scratch_runner(source: Source, seed: int, loaders: Loaders) -> LoadedSource:
    """A random from-scratch encoder on the tokenizer of `source.name`, its weights from `seed`."""
    from models.loading.runner import LoadedSource
    from models.scratch.build import random_encoder

    base = loaders.pretrained(source.name)
    encoder = random_encoder(scratch_config(len(base.tokenizer)), seed)
    limit = min(encoder.config.max_positions, base.max_tokens)
    return LoadedSource(source, encoder, base.tokenizer, limit, "positions")


@dataclass(frozen=True)
class ScratchRandomKind(KindSpec):
    def label(self, source: Source) -> str:
        return f"from-scratch encoder, random weights (seed {source.seed})"

    def caption(self, source: Source) -> str:
        return f"Tokenizer from {source.name}"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        return scratch_runner(source, source.seed, loaders)


SCRATCH_RANDOM = ScratchRandomKind("scratch-random", "From-scratch encoder, random weights",
                                   uses_seed=True, from_scratch=True)

"""A pretrained causal language model, loaded by name (the embedded SmolLM2 by default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.settings import setting
from models.loading.kinds.base import DECODER_NAMES, KindSpec, Loaders, limit_reason

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource, Source


@dataclass(frozen=True)
class DecoderKind(KindSpec):
    def caption(self, source: Source) -> str:
        return f"Decoder: {source.name}"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.hooks.install import install
        from models.loading.runner import LoadedSource

        loaded = loaders.decoder(source.name)
        return LoadedSource(source, install(loaded.model), loaded.tokenizer, loaded.max_tokens,
                            limit_reason(loaded))


DECODER = DecoderKind("decoder", "Pretrained causal decoder", causal=True, names=DECODER_NAMES,
                      default_name=setting("decoder"))  # the configured default decoder

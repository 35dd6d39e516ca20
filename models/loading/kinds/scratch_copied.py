"""The from-scratch encoder with a pretrained BERT's weights copied in: it reproduces that
model's attention."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

from models.errors import ModelLoadError
from models.loading.kinds.base import KindSpec, Loaders
from models.loading.kinds.pretrained import PRETRAINED

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource, Source


@dataclass(frozen=True)
class ScratchCopiedKind(KindSpec):
    def label(self, source: Source) -> str:
        return f"from-scratch encoder with {source.name}'s weights"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.loading.runner import LoadedSource
        from models.scratch.transfer import encoder_from_bert

        base = loaders.pretrained(source.name)
        if base.model_type != "bert":
            raise ModelLoadError(f"Weights can be copied only from a BERT model; '{source.name}' "
                                 f"is a '{base.model_type}' model.")
        encoder = encoder_from_bert(getattr(base.model, "base_model", base.model))
        limit = min(encoder.config.max_positions, base.max_tokens)
        return LoadedSource(source, encoder, base.tokenizer, limit, "positions")


SCRATCH_COPIED = ScratchCopiedKind("scratch-copied",
                                   "From-scratch encoder, pretrained weights copied in",
                                   from_scratch=True, reproduces=PRETRAINED.value)

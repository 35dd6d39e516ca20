"""A pretrained encoder (BERT-like), loaded by name, with its masked-LM head when it has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.loading.kinds.base import KindSpec, Loaders, limit_reason

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource, Source


@dataclass(frozen=True)
class PretrainedKind(KindSpec):
    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.hooks.install import install
        from models.loading.runner import LoadedSource

        base = loaders.pretrained(source.name)
        return LoadedSource(source, install(base.lm_model or base.model), base.tokenizer,
                            base.max_tokens, limit_reason(base))


PRETRAINED = PretrainedKind("pretrained", "Pretrained encoder (BERT-like)")

"""A small BERT-style masked LM pretrained here on the shipped corpus (models/experiments/masked_lm.py),
on a pretrained encoder's tokenizer. It is not offered in the sidebar: its page pretrains it with
progress the first time; loading it afterwards reads the copy kept on disk."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from models.loading.kinds.base import KindSpec, Loaders

if TYPE_CHECKING:
    from models.experiments import masked_lm
    from models.loading.runner import LoadedSource, Source


def settings_for(seed: int) -> masked_lm.PretrainingSettings:
    """The pretraining settings of a seed (the module's defaults otherwise)."""
    from models.experiments import masked_lm

    return replace(masked_lm.DEFAULT_SETTINGS, seed=seed)


def masked_lm_runner(source: Source, result: masked_lm.Pretrained, tokenizer,
                     max_tokens: int) -> LoadedSource:
    """The pretrained masked LM as a runnable model: text in, a Trace with its [MASK] fillers."""
    from models.loading.runner import LoadedSource

    limit = min(result.model.config.max_positions, max_tokens)
    return LoadedSource(source, result.model, tokenizer, limit, "positions")


@dataclass(frozen=True)
class MaskedLMKind(KindSpec):
    def label(self, source: Source) -> str:
        from models.experiments import masked_lm

        return f"{masked_lm.SOURCE_LABEL}, seed {source.seed}"

    def caption(self, source: Source) -> str:
        return f"Tokenizer from {source.name}; pretrained on the shipped corpus"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.experiments import masked_lm

        base = loaders.pretrained(source.name)
        result = masked_lm.pretrained(base.tokenizer, settings=settings_for(source.seed))
        return masked_lm_runner(source, result, base.tokenizer, base.max_tokens)


MASKED_LM = MaskedLMKind("masked-lm", "Masked LM pretrained here", offered=False, uses_seed=True,
                         from_scratch=True)

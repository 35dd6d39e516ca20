"""A Hugging Face encoder–decoder (T5, BART, Marian...), loaded by name. It is not offered in the
sidebar: the cross-attention page runs it (models/loading/hf_seq2seq.run_seq2seq), not `run`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.loading.kinds.base import KindSpec, Loaders

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource, Source


@dataclass(frozen=True)
class Seq2SeqKind(KindSpec):
    def caption(self, source: Source) -> str:
        return f"Encoder–decoder: {source.name}"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.loading.runner import LoadedSource

        loaded = loaders.seq2seq(source.name)
        return LoadedSource(source, loaded.model, loaded.tokenizer, loaded.max_tokens, "positions")


SEQ2SEQ = Seq2SeqKind("seq2seq", "Hugging Face encoder–decoder", offered=False, default_name="",
                      traced=False)

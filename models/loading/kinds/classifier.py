"""A classifier fine-tuned on this server (models/experiments/finetune.py), named by its training
key: the result is kept in models.store.stores.FINETUNED, what it was trained from in
stores.TRAINING_NAMES. It reads the tokenizer of the encoder it was trained from. Not offered in
the sidebar: the fine-tuning page trains it, the ablation page runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.loading.kinds.base import KindSpec, Loaders

if TYPE_CHECKING:
    from models.experiments.finetune import FinetuneResult
    from models.loading.runner import LoadedSource, Source


@dataclass(frozen=True)
class TrainingNames:
    """What a training key names: the encoder and the data it was trained from."""

    encoder_name: str
    data_name: str


def description(names: TrainingNames, result: FinetuneResult) -> str:
    """One line naming a trained classifier: its encoder, its data, how long and how well."""
    from models.experiments.finetune import PRETRAINED as PRETRAINED_ENCODER

    settings = result.settings
    encoder = (f"{names.encoder_name} (pretrained)" if settings.encoder == PRETRAINED_ENCODER
               else "from-scratch encoder")
    return (f"{encoder} fine-tuned on {names.data_name}, {settings.epochs} epoch(s), "
            f"held-out accuracy {result.held_out_accuracy:.0%}")


@dataclass(frozen=True)
class ClassifierKind(KindSpec):
    def label(self, source: Source) -> str:
        from models.store import stores

        names, result = stores.TRAINING_NAMES.peek(source.name), stores.FINETUNED.peek(source.name)
        if names is None or result is None:
            return "a fine-tuned classifier no longer kept on this server"
        return description(names, result)

    def trained(self, source: Source, loaders: Loaders = Loaders()) -> FinetuneResult:
        """The trained result a source of this kind names (ValueError when it is gone)."""
        return loaders.finetuned(source.name)

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        from models.experiments.ablation import capturable
        from models.loading.runner import LoadedSource
        from models.store import stores

        result = self.trained(source, loaders)
        names = stores.TRAINING_NAMES.peek(source.name)
        if names is None:
            raise ValueError("This server no longer knows which encoder this classifier was "
                             "trained from: train it again on the Fine-tuning page.")
        tokenizer = loaders.pretrained(names.encoder_name).tokenizer
        return LoadedSource(source, capturable(result.classifier), tokenizer,
                            result.settings.max_tokens, "positions")


CLASSIFIER = ClassifierKind("classifier", "Fine-tuned classifier", offered=False, default_name="",
                            classifies=True)

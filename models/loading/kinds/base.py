"""What a model kind is (`KindSpec`), how it finds the models it is built from (`Loaders`), and the
registry of kinds, keyed by each kind's stable value (the one a link carries).

Code that needs to know something about a model choice asks its kind's spec (`causal`,
`uses_seed`, `from_scratch`, `title`, `caption`...), never which kind it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.settings import setting

if TYPE_CHECKING:  # the registry itself loads no torch: a kind's model code loads when it loads
    from models.experiments.finetune import FinetuneResult
    from models.loading.pretrained import LoadedModel
    from models.loading.runner import LoadedSource, Source

# Which of the sidebar's two model names a kind reads (`KindSpec.names`).
ENCODER_NAMES, DECODER_NAMES = "encoder", "decoder"


def load_pretrained(name: str) -> LoadedModel:
    """models.loading.pretrained.load_pretrained, imported when first called."""
    from models.loading.pretrained import load_pretrained as load

    return load(name)


def load_decoder(name: str) -> LoadedModel:
    """models.loading.decoder.load_decoder, imported when first called."""
    from models.loading.decoder import load_decoder as load

    return load(name)


def load_seq2seq(name: str) -> LoadedModel:
    """models.loading.hf_seq2seq.load_seq2seq, imported when first called."""
    from models.loading.hf_seq2seq import load_seq2seq as load

    return load(name)


def kept_finetuned(key: str) -> FinetuneResult:
    """The classifier fine-tuned on this server under training key `key` (models.store.stores);
    ValueError with one sentence when it is no longer kept."""
    from models.store import stores

    result = stores.FINETUNED.peek(key)
    if result is None:
        raise ValueError("This fine-tuned classifier is no longer kept on the server: train it "
                             "again on the Fine-tuning page.")
    return result


@dataclass(frozen=True)
class Loaders:
    """How a kind gets the models it is built from, by name. The defaults load afresh; the app
    passes its kept ones (ui/cache.py), so a from-scratch encoder shares the encoder's tokenizer
    and a pretrained kind wraps the model the server keeps."""

    pretrained: Callable[[str], LoadedModel] = load_pretrained
    decoder: Callable[[str], LoadedModel] = load_decoder
    seq2seq: Callable[[str], LoadedModel] = load_seq2seq
    finetuned: Callable[[str], FinetuneResult] = kept_finetuned


@dataclass(frozen=True)
class KindSpec:
    """One kind of model. Subclasses say how it is labelled and loaded; the fields what it is.

    value: stable, it appears in links (`model=decoder`).
    title: the sidebar's name for it.
    causal: its attention is causal (each token reads only the tokens before it).
    offered: the sidebar's radio (and a link) may choose it.
    uses_seed: a seed shapes its weights (a source of another kind has seed 0).
    from_scratch: built here rather than loaded by name; a built model is kept whole, by source.
    names: which of the sidebar's model names it reads (ENCODER_NAMES or DECODER_NAMES).
    default_name: the model it uses when none is named ("" when there is none).
    reproduces: the kind whose model it reproduces exactly (weights copied in), or None.
    classifies: its outputs are classes, not tokens.
    traced: `run(text)` gives a Trace (an encoder–decoder runs on a page of its own).
    """

    value: str
    title: str
    causal: bool = False
    offered: bool = True
    uses_seed: bool = False
    from_scratch: bool = False
    names: str = ENCODER_NAMES
    default_name: str = setting("encoder")  # the configured default encoder
    reproduces: str | None = None
    classifies: bool = False
    traced: bool = True

    def seed(self, seed: int) -> int:
        """The seed a source of this kind keeps (two seeds giving one model are one source)."""
        return int(seed) if self.uses_seed else 0

    def label(self, source: Source) -> str:
        """How figures and notices name the model."""
        return source.name

    def caption(self, source: Source) -> str:
        """The sidebar's line under its model choice."""
        return f"Pretrained model: {source.name}"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        raise NotImplementedError(f"the kind '{self.value}' does not say how it loads")


def limit_reason(loaded: LoadedModel) -> str:
    """'positions' when the limit is the model's own, 'memory' when the app capped it lower."""
    config = loaded.model.config
    own = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    tokenizer_limit = getattr(loaded.tokenizer, "model_max_length", None) or own
    model_limit = min(x for x in (own, tokenizer_limit) if x) if (own or tokenizer_limit) else None
    return "memory" if model_limit and loaded.max_tokens < model_limit else "positions"


_REGISTRY: dict[str, KindSpec] = {}  # registration order
_LOCK = threading.Lock()


def register(kind: KindSpec) -> KindSpec:
    """Make `kind` known by its value; ValueError when another kind has that value."""
    with _LOCK:
        if kind.value in _REGISTRY and _REGISTRY[kind.value] is not kind:
            raise ValueError(f"a model kind '{kind.value}' is registered already")
        _REGISTRY[kind.value] = kind
    return kind


def unregister(value: str) -> None:
    """Forget the kind `value` (a kind registered for a while, e.g. by a test)."""
    with _LOCK:
        _REGISTRY.pop(value, None)


def spec(value: str) -> KindSpec:
    """The kind registered as `value`; ValueError with one sentence for any other."""
    with _LOCK:
        found = _REGISTRY.get(value)
    if found is None:
        raise ValueError(f"'{value}' is not a kind of model this app knows.")
    return found


def registered() -> tuple[KindSpec, ...]:
    """Every kind, in registration order."""
    with _LOCK:
        return tuple(_REGISTRY.values())


def offered() -> tuple[KindSpec, ...]:
    """The kinds the sidebar (and a link) may choose, in registration order."""
    return tuple(kind for kind in registered() if kind.offered)


def default_kind() -> KindSpec:
    """The kind the sidebar starts with (and a link means when it names none): the first offered."""
    return offered()[0]

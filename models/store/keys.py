"""The one way to key a stored value: what was computed (`kind`) and everything it depends on.

`result_key("head_ablation", source, text, pair, heads)` names one value in any store. Keys of
different kinds never meet, and parts that cannot be hashed fail here, naming the kind, rather
than deep inside a store.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class ResultKey:
    """What was computed and the inputs it depends on (model sources, texts, settings...)."""

    kind: str
    parts: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"a result key needs a kind, got {self.kind!r}")
        try:
            hash(self.parts)
        except TypeError as error:
            raise TypeError(f"the parts of a '{self.kind}' key must be hashable: {error}") from None


def result_key(kind: str, *parts: Hashable) -> ResultKey:
    """The key of a value of `kind` computed from `parts`."""
    return ResultKey(kind, parts)

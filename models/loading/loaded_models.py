"""A bounded, thread-safe registry of the models users load, keyed by what each model is.

Keys come from `models.loading.pretrained.model_identity`, so `/a/b`, `/a//b` and `/a/./b` are one
entry. At most `capacity` user-loaded models are kept; loading another drops the least recently
used. Pinned entries (the embedded defaults) are kept on top of those and never dropped. When
several sessions ask for the same key at once, one loads it and the others wait for that load.
A failed load is not remembered: the next request tries again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from models.limits import LOADED_MODELS

Value = TypeVar("Value")
EVICTIONS_REMEMBERED = 64


@dataclass
class _Loading:
    """One load in progress: the sessions waiting for it wait on `done`."""

    done: threading.Event
    value: object = None
    error: BaseException | None = None


class LoadedModels(Generic[Value]):
    """`get(key, load)` returns the model for `key`, calling `load()` only when it is not kept."""

    def __init__(self, capacity: int = LOADED_MODELS):
        if capacity < 1:
            raise ValueError(f"the registry must keep at least one model, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, Value] = OrderedDict()  # least recently used first
        self._pinned: dict[str, Value] = {}
        self._loading: dict[str, _Loading] = {}
        self._evicted: deque[str] = deque(maxlen=EVICTIONS_REMEMBERED)

    def get(self, key: str, load: Callable[[], Value], pinned: bool = False) -> Value:
        """The model kept under `key`, or `load()`'s result, kept from now on.

        `pinned` keeps it outside the bounded part, never evicted. Exceptions from `load()` reach
        every session waiting for that key, and nothing is kept.
        """
        with self._lock:
            if key in self._pinned:
                return self._pinned[key]
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
            loading = self._loading.get(key)
            owner = loading is None
            if owner:
                loading = self._loading[key] = _Loading(threading.Event())
        if not owner:
            loading.done.wait()
            if loading.error is not None:
                raise loading.error
            return loading.value  # type: ignore[return-value]
        try:
            value = load()
        except BaseException as error:
            loading.error = error
            with self._lock:
                del self._loading[key]
            loading.done.set()
            raise
        with self._lock:
            self._store(key, value, pinned)
            loading.value = value
            del self._loading[key]
        loading.done.set()
        return value

    def _store(self, key: str, value: Value, pinned: bool) -> None:
        if pinned:
            self._pinned[key] = value
            return
        self._kept[key] = value
        while len(self._kept) > self.capacity:
            dropped, _ = self._kept.popitem(last=False)
            self._evicted.append(dropped)

    def forget(self, key: str) -> None:
        """Drop a user-loaded model (pinned ones stay)."""
        with self._lock:
            self._kept.pop(key, None)

    def kept(self) -> tuple[str, ...]:
        """The keys of the user-loaded models kept, least recently used first."""
        with self._lock:
            return tuple(self._kept)

    def pinned(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._pinned)

    def evicted(self) -> tuple[str, ...]:
        """The last keys dropped to make room, oldest first."""
        with self._lock:
            return tuple(self._evicted)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._kept or key in self._pinned

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept) + len(self._pinned)

    def notice(self) -> str:
        """One sentence for the page: how many models the server keeps."""
        return (f"This server keeps at most {self.capacity} models loaded from the sidebar "
                "besides the built-in ones; loading another unloads the one used least recently.")

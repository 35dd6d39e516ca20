"""A thread-safe least-recently-used cache bounded in bytes, computing each key once.

Streamlit's caches bound entries by count, and one decoder trace can be a hundred megabytes
while an encoder trace at 8 tokens is a few kilobytes: a count is no bound on memory. Values here
report their size (`nbytes`); the cache drops the least recently used values until the total fits
its budget. Two threads asking for the same missing key compute it once: the second waits for
the first's result (or its exception).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


def size_of(value: Any) -> int:
    """A value's size in bytes: its `nbytes`, or the sum over a tuple's items."""
    if isinstance(value, tuple):
        return sum(size_of(item) for item in value)
    return int(getattr(value, "nbytes", 0))


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class ByteBudgetCache:
    def __init__(self, budget_bytes: int, sizer: Callable[[Any], int] = size_of):
        if budget_bytes <= 0:
            raise ValueError(f"the budget must be positive, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._sizer = sizer
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._total = 0

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value for `key`, computing it with `compute()` if missing."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key][0]
            pending = self._pending.get(key)
            owner = pending is None
            if owner:
                pending = self._pending[key] = _Pending()
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value = compute()
        except BaseException as error:
            pending.error = error
            raise
        else:
            pending.value = value
            self._store(key, value)
            return value
        finally:
            with self._lock:
                self._pending.pop(key, None)
            pending.done.set()

    def _store(self, key: Hashable, value: Any) -> None:
        size = self._sizer(value)
        with self._lock:
            if size > self.budget_bytes:
                return  # larger than the whole budget: hand it out, keep nothing
            old = self._values.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._values[key] = (value, size)
            self._total += size
            while self._total > self.budget_bytes:
                _, (_, dropped) = self._values.popitem(last=False)
                self._total -= dropped

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._total = 0

"""A thread-safe least-recently-used cache bounded in bytes, computing each key once.

Streamlit's caches bound entries by count, and one decoder trace can be a hundred megabytes
while an encoder trace at 8 tokens is a few kilobytes: a count is no bound on memory. Values here
report their size (`nbytes`); the cache drops the least recently used values until the total fits
its budget. Two threads asking for the same missing key compute it once: the second waits for
the first's result (or its exception). `array_bytes` measures what a value holds, for values
that do not report their own size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import torch
from torch import nn


def size_of(value: Any) -> int:
    """A value's size in bytes: its `nbytes`, or the sum over a tuple's items."""
    if isinstance(value, tuple):
        return sum(size_of(item) for item in value)
    return int(getattr(value, "nbytes", 0))


def _trim_function():
    """glibc's malloc_trim, or None where there is no glibc."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _trim_function()


def release_freed_memory() -> None:
    """Hand memory the allocator keeps after frees back to the system (glibc keeps freed heap
    pages for reuse, so without this a server's resident memory stays at its high-water mark
    after a cache drops values)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def array_bytes(value: Any) -> int:
    """The memory `value` holds, measured: every numpy array and torch tensor in it (counted once
    however often it is referenced, a view as the whole array it keeps alive), a torch module's
    parameters and buffers, and the shallow size of the Python objects around them.

    It walks dataclasses, tuples, lists, sets and dicts; any other object counts its own
    `nbytes` when it reports one, or its shallow size.
    """
    return _deep_bytes(value, set())


def _deep_bytes(value: Any, seen: set[tuple[str, int]]) -> int:
    if value is None or isinstance(value, (bool, int, float)):
        return 0  # small, and often shared singletons: not worth a count
    if isinstance(value, np.ndarray):
        while isinstance(value.base, np.ndarray):  # a view keeps its whole base alive
            value = value.base
        if isinstance(value.base, torch.Tensor):  # `tensor.numpy()` shares the tensor's memory
            return _deep_bytes(value.base, seen)
        return _once(("array", id(value)), seen, value.nbytes)
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        return _once(("storage", storage.data_ptr() or id(storage)), seen, storage.nbytes())
    if ("object", id(value)) in seen:
        return 0
    seen.add(("object", id(value)))
    if isinstance(value, nn.Module):
        return sys.getsizeof(value) + sum(
            _deep_bytes(tensor, seen) for tensor in (*value.parameters(), *value.buffers()))
    total = sys.getsizeof(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return total + sum(_deep_bytes(getattr(value, f.name), seen)
                           for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list, set, frozenset)):
        return total + sum(_deep_bytes(item, seen) for item in value)
    if isinstance(value, dict):
        return total + sum(_deep_bytes(k, seen) + _deep_bytes(v, seen) for k, v in value.items())
    if isinstance(value, (str, bytes)):
        return total
    return max(total, int(getattr(value, "nbytes", 0) or 0))


def _once(key: tuple[str, int], seen: set[tuple[str, int]], nbytes: int) -> int:
    if key in seen:
        return 0
    seen.add(key)
    return int(nbytes)


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
            evicted = []  # released outside the lock
            while self._total > self.budget_bytes:
                _, (dropped_value, dropped) = self._values.popitem(last=False)
                evicted.append(dropped_value)
                self._total -= dropped
        if evicted:
            evicted.clear()  # the last references this store held
            release_freed_memory()

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._total = 0

"""The one store of computed values: thread-safe, least recently used out, bounded in bytes (and,
where a count is what a person reasons about, in entries), computing each key once.

Streamlit's caches bound entries by count, and one decoder trace can be a hundred megabytes while
an encoder trace at 8 tokens is a few kilobytes: a count is no bound on memory. So every value a
store keeps is measured one way, `array_bytes` of its key and value, and the store drops the least
recently used values until the total fits its `Budget`. A value larger than the whole budget is
handed out and not kept (unless the budget keeps the newest whatever its size). Pinned values (the
embedded models, values no user input chooses) are kept outside the budget and never dropped.
Two threads asking for the same missing key compute it once: the second waits for the first's
result, or its exception. After dropping values the store hands freed memory back to the system.

models/store/stores.py declares every store of the server, each with its budget from
models/limits.py; models/store/keys.py builds their keys.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from models.limits import EVICTIONS_REMEMBERED, HEAP_MMAP_THRESHOLD_BYTES

Value = TypeVar("Value")
_MISSING = object()  # what `_find` returns for a key not kept (None may be a kept value)


def _libc_function(name: str):
    """A function of glibc (malloc_trim, mallopt), or None where there is no glibc."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")
_MALLINFO2 = _libc_function("mallinfo2")  # glibc 2.33 or later
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (malloc.h): ten size_t fields, summed over every arena."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


if _MALLINFO2 is not None:
    _MALLINFO2.restype = _MallInfo2


def mallopt(parameter: int, value: int) -> None:
    """glibc's mallopt (one of the M_* parameters above); nothing where there is no glibc."""
    if _MALLOPT is not None:
        _MALLOPT(parameter, value)


def map_large_blocks() -> None:
    """Have glibc map every block of HEAP_MMAP_THRESHOLD_BYTES or more on its own, and unmap it
    when it is freed. By default glibc raises that threshold each time such a block is freed,
    after which blocks of changing sizes (a corpus job's batches grow as its passages do) are
    carved from the heap and leave holes it keeps: measured on a 1,000-passage job, the peak was
    936 MB by default and 761 MB with this."""
    mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD_BYTES)


def heap_free_bytes() -> int | None:
    """The bytes glibc's heaps hold free (freed chunks, resident or not, that malloc_trim could
    hand back), or None where there is no glibc 2.33 or later to ask."""
    if _MALLINFO2 is None:
        return None
    return int(_MALLINFO2().fordblks)


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

    It walks dataclasses, tuples, lists, sets and dicts. An object whose class states its own
    `nbytes` (a trace, a record, a generation: each knows what it holds, some of it computed
    lazily) is counted by that statement; any other object by its shallow size.
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
    if getattr(type(value), "nbytes", None) is not None:  # the class states what it holds
        return total + int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return total + sum(_deep_bytes(getattr(value, f.name), seen)
                           for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list, set, frozenset, deque)):
        return total + sum(_deep_bytes(item, seen) for item in value)
    if isinstance(value, dict):
        return total + sum(_deep_bytes(k, seen) + _deep_bytes(v, seen) for k, v in value.items())
    return total


def _once(key: tuple[str, int], seen: set[tuple[str, int]], nbytes: int) -> int:
    if key in seen:
        return 0
    seen.add(key)
    return int(nbytes)


@dataclasses.dataclass(frozen=True)
class Budget:
    """What a store may keep besides its pinned values: at most `bytes` (measured) and at most
    `entries` values, either or both. With `keep_newest` the value just stored stays even when
    it alone is over `bytes` (everything else goes); without it such a value is not kept."""

    bytes: int | None = None
    entries: int | None = None
    keep_newest: bool = False

    def __post_init__(self) -> None:
        if self.bytes is None and self.entries is None:
            raise ValueError("a budget bounds bytes, entries or both")
        for name in ("bytes", "entries"):
            bound = getattr(self, name)
            if bound is not None and bound <= 0:
                raise ValueError(f"a budget's {name} must be positive, got {bound}")

    def exceeded(self, total_bytes: int, entries: int) -> bool:
        return ((self.bytes is not None and total_bytes > self.bytes)
                or (self.entries is not None and entries > self.entries))

    def admits(self, size: int) -> bool:
        """Whether one value of `size` bytes may be kept."""
        return self.keep_newest or self.bytes is None or size <= self.bytes


@dataclasses.dataclass
class _Kept:
    value: Any
    size: int


class _Pending:
    """One computation in progress: the threads waiting for it wait on `done`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class Store:
    """A named store of computed values within `budget`; see the module's docstring."""

    def __init__(self, name: str, budget: Budget):
        self.name = name
        self.budget = budget
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, _Kept] = OrderedDict()  # least recently used first
        self._pinned: dict[Hashable, Any] = {}
        self._pending: dict[Hashable, _Pending] = {}
        self._evicted: deque[Hashable] = deque(maxlen=EVICTIONS_REMEMBERED)
        self._total = 0

    def __repr__(self) -> str:
        return f"Store({self.name!r}, {self.budget})"

    def get(self, key: Hashable, compute: Callable[[], Value], pinned: bool = False) -> Value:
        """The value kept for `key`, or `compute()`'s result, kept from now on if the budget
        allows (`pinned`: outside the budget, never dropped). Exceptions from `compute()` reach
        every thread waiting for that key, and nothing is kept."""
        with self._lock:
            found = self._find(key)
            if found is not _MISSING:
                return found
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
            self.put(key, value, pinned)
            return value
        finally:
            with self._lock:
                self._pending.pop(key, None)
            pending.done.set()

    def peek(self, key: Hashable) -> Any | None:
        """The value kept for `key` (now the most recently used), or None; never computes."""
        with self._lock:
            found = self._find(key)
        return None if found is _MISSING else found

    def put(self, key: Hashable, value: Any, pinned: bool = False) -> None:
        """Keep `value` under `key` (replacing what was there), dropping the least recently used
        values beyond the budget."""
        if pinned:
            with self._lock:
                self._pinned[key] = value
            return
        size = array_bytes((key, value))
        evicted = []  # released outside the lock
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._total -= old.size
                evicted.append(old.value)
            if self.budget.admits(size):  # else larger than the whole budget: handed out only
                self._kept[key] = _Kept(value, size)
                self._total += size
            while len(self._kept) > 1 and self.budget.exceeded(self._total, len(self._kept)):
                dropped_key, dropped = self._kept.popitem(last=False)
                self._total -= dropped.size
                self._evicted.append(dropped_key)
                evicted.append(dropped.value)
        if evicted:
            evicted.clear()  # the last references this store held
            release_freed_memory()

    def forget(self, key: Hashable) -> None:
        """Drop the value kept for `key` (a pinned value stays)."""
        with self._lock:
            dropped = self._kept.pop(key, None)
            if dropped is not None:
                self._total -= dropped.size
        if dropped is not None:
            dropped = None  # the last reference this store held
            release_freed_memory()

    def clear(self) -> None:
        """Drop every value but the pinned ones."""
        with self._lock:
            self._kept.clear()
            self._total = 0
        release_freed_memory()

    def _find(self, key: Hashable) -> Any:
        if key in self._pinned:
            return self._pinned[key]
        kept = self._kept.get(key)
        if kept is None:
            return _MISSING
        self._kept.move_to_end(key)
        return kept.value

    @property
    def total_bytes(self) -> int:
        """The measured bytes of the values kept within the budget (pinned ones aside)."""
        with self._lock:
            return self._total

    def keys(self) -> tuple[Hashable, ...]:
        """The keys kept within the budget, least recently used first."""
        with self._lock:
            return tuple(self._kept)

    def items(self) -> list[tuple[Hashable, Any]]:
        """(key, value) kept within the budget, least recently used first (no use is recorded)."""
        with self._lock:
            return [(key, kept.value) for key, kept in self._kept.items()]

    def pinned(self) -> tuple[Hashable, ...]:
        with self._lock:
            return tuple(self._pinned)

    def evicted(self) -> tuple[Hashable, ...]:
        """The last keys dropped to make room, oldest first."""
        with self._lock:
            return tuple(self._evicted)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._kept or key in self._pinned

    def __len__(self) -> int:
        """How many values are kept, pinned ones included."""
        with self._lock:
            return len(self._kept) + len(self._pinned)


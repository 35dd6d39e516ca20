"""The one store of computed values (models/store/byte_cache.py) and its keys: least recently used
out within its budget in bytes or entries, a value larger than the budget handed out and not kept
(or kept alone with `keep_newest`), pinned values outside the budget, one computation per key
whatever the threads (a session stopped mid-computation does not stop the one waiting for it),
freed memory handed back on eviction.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from models import limits
from models.loading import kinds
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.source import ModelSource
from models.store import byte_cache
from models.store.byte_cache import Budget, Store, array_bytes
from models.store.keys import result_key
from ui import byte_caches


ARRAY = 40_000  # bytes of one test value's array


AROUND = 2_000  # what the store measures around it (the key, the object holding the array)


def test_array_bytes_counts_each_array_once_and_a_view_as_its_base():
    base = np.zeros((100, 100), np.float32)  # 40,000 bytes
    assert 40_000 <= array_bytes(base) < 40_200
    assert array_bytes((base, base, base[:10])) < 40_400  # the same memory, counted once
    tensor = torch.zeros(1000)  # 4,000 bytes, shared with its numpy view
    assert 4_000 <= array_bytes((tensor, tensor[10:], tensor.numpy())) < 4_200
    linear = nn.Linear(100, 100)
    assert 40_400 <= array_bytes(linear) < 41_000
    assert array_bytes(("a" * 10_000,)) >= 10_000


@dataclass(frozen=True)
class Pair:
    first: np.ndarray
    second: tuple[np.ndarray, ...]


def test_array_bytes_walks_dataclasses_and_containers():
    value = Pair(np.ones(1000), (np.ones(500), np.ones(500)))
    assert 16_000 <= array_bytes({"kept": [value]}) < 16_000 + 2_000


class Stated:
    """A value whose class states what it holds (as a trace does for what it computes lazily)."""

    def __init__(self, held: int):
        self.held = held
        self.small = np.zeros(10)  # not walked: the statement is what counts

    @property
    def nbytes(self) -> int:
        return self.held


def test_a_value_that_states_its_size_is_counted_by_that_statement():
    assert 1_000_000 <= array_bytes(Stated(1_000_000)) < 1_000_000 + 200
    assert array_bytes((Stated(5_000), np.zeros(1000))) >= 5_000 + 8_000


def value(tag: int = 0) -> np.ndarray:
    return np.full(ARRAY // 8, tag, dtype=np.float64)


def test_the_store_keeps_within_its_budget_and_drops_the_least_recently_used():
    store = Store("test", Budget(bytes=2 * ARRAY + 3 * AROUND))
    for key in "abc":
        store.get(key, value)
    assert store.keys() == ("b", "c") and store.evicted() == ("a",)
    assert 2 * ARRAY <= store.total_bytes <= store.budget.bytes
    store.get("b", lambda: pytest.fail("kept: not computed again"))  # b is now the most recent
    store.get("d", value)
    assert store.keys() == ("b", "d") and store.total_bytes <= store.budget.bytes


def test_a_value_larger_than_the_budget_is_handed_out_and_not_kept():
    store = Store("test", Budget(bytes=2 * ARRAY))
    store.get("small", lambda: np.zeros(100))
    huge = store.get("huge", lambda: np.zeros(ARRAY))  # 8 x ARRAY bytes
    assert huge.nbytes == 8 * ARRAY and "huge" not in store and store.keys() == ("small",)


def test_keep_newest_keeps_the_newest_value_alone_over_the_budget():
    store = Store("test", Budget(bytes=2 * ARRAY + 3 * AROUND, keep_newest=True))
    store.put("a", value())
    store.put("b", value())
    store.put("big", np.zeros(ARRAY))  # 8 x ARRAY bytes
    assert store.keys() == ("big",) and store.total_bytes > store.budget.bytes
    store.put("c", value())  # the big one goes as soon as something newer comes
    assert store.keys() == ("c",)


def test_a_count_budget_keeps_that_many_and_pinned_values_on_top():
    store = Store("test", Budget(entries=2))
    store.get("built-in", lambda: "pinned model", pinned=True)
    for index in range(5):
        store.get(f"m{index}", lambda index=index: f"model {index}")
    store.get("m3", lambda: pytest.fail("kept, not loaded again"))
    assert store.keys() == ("m4", "m3") and store.pinned() == ("built-in",)
    assert store.evicted() == ("m0", "m1", "m2") and "built-in" in store and len(store) == 3
    assert store.peek("built-in") == "pinned model" and store.peek("m0") is None


def test_the_budget_bounds_bytes_and_entries_together():
    store = Store("test", Budget(bytes=10 * ARRAY, entries=2))
    for key in "abc":
        store.put(key, value())
    assert store.keys() == ("b", "c")  # the count bound, though the bytes would fit
    with pytest.raises(ValueError):
        Budget()
    with pytest.raises(ValueError):
        Budget(bytes=0)


def test_dropping_values_hands_freed_memory_back(monkeypatch):
    calls = []
    monkeypatch.setattr(byte_cache, "release_freed_memory", lambda: calls.append(1))
    store = Store("test", Budget(entries=1))
    store.put("a", value())
    assert not calls  # nothing dropped yet
    store.put("b", value())
    assert len(calls) == 1 and store.keys() == ("b",)
    store.forget("b")
    assert len(calls) == 2 and len(store) == 0


def test_the_store_computes_a_key_once_for_concurrent_callers():
    store = Store("test", Budget(bytes=limits.GIB))
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return value(7)

    results = []
    threads = [threading.Thread(target=lambda: results.append(store.get("k", slow)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 4 and all(r is results[0] for r in results)


def test_a_failed_computation_reaches_every_waiter_and_is_not_kept():
    store = Store("test", Budget(entries=2))
    started, release = threading.Event(), threading.Event()
    errors = {}

    def broken():
        started.set()
        release.wait()
        raise ValueError("bad input")

    def ask(name: str, compute) -> None:
        try:
            store.get("x", compute)
        except ValueError as error:
            errors[name] = str(error)

    first = threading.Thread(target=ask, args=("first", broken))
    first.start()
    started.wait()
    second = threading.Thread(target=ask, args=(
        "second", lambda: pytest.fail("the first computation is still running")))
    second.start()
    time.sleep(0.1)  # the second is waiting for the first computation
    release.set()
    first.join()
    second.join()
    assert errors == {"first": "bad input", "second": "bad input"} and "x" not in store
    assert store.get("x", lambda: "tried again") == "tried again"


def test_result_keys_name_what_was_computed_and_refuse_unhashable_parts():
    source = ModelSource(kinds.PRETRAINED, DEFAULT_MODEL)
    assert result_key("trace", source, "a b", "") == result_key("trace", source, "a b", "")
    assert result_key("trace", source, "a b", "") != result_key("view", source, "a b", "")
    assert len({result_key("row", 64, 256, 0), result_key("row", 64, 256, 1)}) == 2
    with pytest.raises(TypeError, match="'row' key"):
        result_key("row", np.zeros(3))
    with pytest.raises(ValueError):
        result_key("")


class Rerun(BaseException):
    """Stands in for Streamlit's script control (StopException, RerunException)."""


def test_a_session_stopped_mid_computation_does_not_stop_the_one_waiting_for_it():
    store = Store("test", Budget(bytes=limits.GIB))
    started, release = threading.Event(), threading.Event()
    outcomes = {}

    def interrupted():
        started.set()
        release.wait()
        raise Rerun()

    def first():
        try:
            byte_caches.kept(store, "key", interrupted)
        except Rerun:
            outcomes["first"] = "rerun"

    def second():
        started.wait()
        outcomes["second"] = byte_caches.kept(store, "key", lambda: "computed here")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(0.1)  # the second session is waiting for the first one's result
    release.set()
    for thread in threads:
        thread.join()
    assert outcomes == {"first": "rerun", "second": "computed here"}

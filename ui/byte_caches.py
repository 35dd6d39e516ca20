"""The byte-bounded stores of per-input results, shared by every session of the server.

Streamlit's own caches bound entries by count, and one entry here may be a few kilobytes (a
softmax row) or hundreds of megabytes (a decoder's ablation comparison): a count bounds no memory.
So every result that depends on what a student types or chooses is kept in one of these
least-recently-used stores (models/store/byte_cache.py), each with its budget in models/limits.py.
An entry's size is measured (`array_bytes` of its key and value), not guessed. ui/cache.py keeps
the traces the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

import streamlit as st

from models.store.byte_cache import ByteBudgetCache, array_bytes
from models.limits import ANALYSIS_CACHE_BYTES, RESULT_CACHE_BYTES

Value = TypeVar("Value")


class Store(Protocol):
    """A compute-once store: ByteBudgetCache, or models.loading.loaded_models.LoadedModels."""

    def __contains__(self, key: Hashable) -> bool: ...

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any: ...


@st.cache_resource
def analyses() -> ByteBudgetCache:
    """Ablations, knockouts, importance grids and detector runs (ui/analysis_cache.py)."""
    return ByteBudgetCache(ANALYSIS_CACHE_BYTES)


@st.cache_resource
def results() -> ByteBudgetCache:
    """Every other page's per-input results: teaching pages, translations, fine-tuning's
    before/after, layer walks, generations."""
    return ByteBudgetCache(RESULT_CACHE_BYTES)


class Measured:
    """A kept value with the bytes it holds (`nbytes`, what the store adds up)."""

    def __init__(self, key: Hashable, value: Any):
        self.value = value
        self.nbytes = array_bytes((key, value))


class _Interrupted(Exception):
    """A computation stopped by its session's script control (Streamlit stops or reruns a script
    by raising a BaseException at its next `st` call, e.g. a progress bar's). It goes on as that
    exception in that session; a session waiting for the same key computes the value itself."""

    def __init__(self, error: BaseException, thread: int):
        super().__init__(str(error))
        self.error = error
        self.thread = thread


def kept(store: ByteBudgetCache, key: Hashable, compute: Callable[[], Value],
         message: str | None = None) -> Value:
    """`store`'s value for `key`, computed once per server by `compute()` when missing and
    measured, with a spinner showing `message` while it computes (or another session does)."""
    thread = threading.get_ident()

    def measured() -> Measured:
        try:
            return Measured(key, compute())
        except Exception:
            raise
        except BaseException as error:
            raise _Interrupted(error, thread) from error

    while True:
        try:
            return spinning(store, key, measured, message).value
        except _Interrupted as interrupted:
            if interrupted.thread == thread:
                raise interrupted.error from None


def spinning(store: Store, key: Hashable, compute: Callable[[], Value],
             message: str | None = None) -> Value:
    """`store.get(key, compute)` with a spinner showing `message` unless `key` is kept already
    (a ByteBudgetCache, or a models.loading.loaded_models.LoadedModels registry)."""
    if message is None or key in store:
        return store.get(key, compute)
    with st.spinner(message):
        return store.get(key, compute)

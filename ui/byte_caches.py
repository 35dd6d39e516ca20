"""The one way a page keeps a computed value: `kept(store, key, compute, message)`.

Every model, trace and result a page asks for goes through it into one of the server's stores
(models/store/stores.py, each bounded by its budget in models/limits.py), keyed with
models.store.keys.result_key. A spinner shows `message` only while the value is computed (here
or by another session); a value already kept comes back at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from models.store.byte_cache import Store

Value = TypeVar("Value")


class _Interrupted(Exception):
    """A computation stopped by its session's script control (Streamlit stops or reruns a script
    by raising a BaseException at its next `st` call, e.g. a progress bar's). It goes on as that
    exception in that session; a session waiting for the same key computes the value itself."""

    def __init__(self, error: BaseException, thread: int):
        super().__init__(str(error))
        self.error = error
        self.thread = thread


def kept(store: Store, key: Hashable, compute: Callable[[], Value], message: str | None = None,
         pinned: bool = False) -> Value:
    """`store`'s value for `key`, computed once per server by `compute()` when missing, with a
    spinner showing `message` while it computes (or another session does). `pinned` keeps it
    outside the store's budget (the embedded models, values no user input chooses)."""
    thread = threading.get_ident()

    def guarded() -> Value:
        try:
            return compute()
        except Exception:
            raise
        except BaseException as error:
            raise _Interrupted(error, thread) from error

    while True:
        try:
            if message is None or key in store or get_script_run_ctx(True) is None:
                return store.get(key, guarded, pinned)  # no spinner outside a page's run
            with st.spinner(message):
                return store.get(key, guarded, pinned)
        except _Interrupted as interrupted:
            if interrupted.thread == thread:
                raise interrupted.error from None

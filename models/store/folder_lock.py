"""A lock on a cache folder for one writer at a time, across the threads of this process (a
thread lock) and across processes (an advisory lock on a file beside the folder)."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def folder_lock(folder: Path, thread_lock: threading.Lock) -> Iterator[None]:
    """Held while one thread of one process trains, writes or reads `folder`'s contents."""
    with thread_lock:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f".{folder.name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

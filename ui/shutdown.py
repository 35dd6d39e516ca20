"""What the server removes when it stops: the files it wrote for this process (exports, long
inputs' layer inputs).

Registered here rather than with `atexit` alone: `streamlit run server.py` runs on uvicorn, which
ends a stopped server (SIGTERM, as systemd and the tests stop it) by raising the signal again
once it has shut down, so the process dies by the signal and `atexit` functions never run. The
server's lifespan (ui/serving.py) runs these as it shuts down; `atexit` runs whatever is left at a
normal exit (`streamlit run app.py`, Ctrl+C, a script).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

_LOCK = threading.Lock()
_CLEANUPS: list[tuple[Callable, tuple]] = []


def on_shutdown(function: Callable, *args) -> None:
    """Call `function(*args)` once when the server stops or the process exits, whichever is
    first (the last registered first, as atexit does)."""
    with _LOCK:
        _CLEANUPS.append((function, args))


def run_cleanups() -> None:
    """Run and forget every cleanup registered so far; a failing one is logged, the others run."""
    while True:
        with _LOCK:
            if not _CLEANUPS:
                return
            function, args = _CLEANUPS.pop()
        try:
            function(*args)
        except Exception:
            logging.getLogger("attention_explorer").exception("a cleanup at shutdown failed")


atexit.register(run_cleanups)

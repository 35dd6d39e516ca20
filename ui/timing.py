"""How long the server spends on each script run, logged when the operator asks for it.

With ATTENTION_EXPLORER_TIMING_LOG=<file> set, every run of app.py appends one JSON line to that
file: the session's id, the page, the run's wall time and the CPU time of the thread that ran it
(`time.thread_time`: the server's own work for that session, which other sessions' runs on the
same cores do not inflate). bench/bench_class.py reads it. Unset, nothing is measured or written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass

from streamlit.runtime.scriptrunner import get_script_run_ctx

TIMING_LOG = "ATTENTION_EXPLORER_TIMING_LOG"
_WRITING = threading.Lock()


@dataclass(frozen=True)
class RunClock:
    """When a script run started: wall and thread CPU time."""

    wall: float
    cpu: float

    @classmethod
    def start(cls) -> RunClock:
        return cls(time.perf_counter(), time.thread_time())

    def log(self, page: str) -> None:
        """Append this run's times to the timing log, when one is set."""
        path = os.environ.get(TIMING_LOG)
        if not path:
            return
        context = get_script_run_ctx()
        line = json.dumps({"session": context.session_id if context else "", "page": page,
                           "wall_s": time.perf_counter() - self.wall,
                           "cpu_s": time.thread_time() - self.cpu})
        with _WRITING, open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")

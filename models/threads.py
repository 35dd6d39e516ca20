"""Threads chosen on purpose: how many threads each forward runs on, and how they wait for work.

torch runs a forward's matrix products and elementwise work on OpenMP threads (its intra-op
threads). Left alone it takes one per core, and its OpenMP threads wait for work by spinning.
On a machine whose cores are also wanted by something else (another session's forward, the
browser, another process), a spinning thread holds a core another thread needs, and a forward
can take twenty times longer (issue 27: SmolLM2 at 128 tokens, 11.2 s with 2 threads against
0.52 s with 1). The plan:

- threads per forward: the setting ATTENTION_EXPLORER_THREADS (`threads_setting`: a whole
  number, or `auto`), else OMP_NUM_THREADS when the operator set it, else the cores this
  process may use divided by the forwards expected at the same moment (`sessions`), at least 1.
  A served app expects one forward per core at a time (`configure_server_threads`): a class's
  sessions run side by side, each on one core, instead of two threads fighting for each core.
  The exception is the server's long line (ui/attention.py: long texts are read one at a time):
  its one forward takes every core (`one_forward_threads`), so a lecturer alone with a 4,096-token
  text waits for two threads' work, not one's (bench/bench_long.py, (d)); other sessions' short
  forwards meanwhile share the cores with it, waiting passively;
- OpenMP's wait policy PASSIVE: a thread with no work sleeps instead of spinning, so an
  oversubscribed core is shared, not fought over;
- large buffers on huge pages: torch's CPU allocator asks the kernel for transparent huge pages
  (2 MB) for every buffer of 2 MB or more when THP_MEM_ALLOC_ENABLE=1 (a torch setting). A long
  input's maps are hundreds of MB a layer (SmolLM2 at 4,096 tokens: 604 MB), allocated afresh
  for the scores, the scaled scores, the masked scores and the softmax; on 4 kB pages the kernel
  faults each one in 4 kB at a time, and that costs more than the arithmetic (a 604 MB multiply
  0.23 s against 0.04 s in place). Measured here (bench/bench_long.py, THP_MEM_ALLOC_ENABLE=0
  against the default): the eager forward at 4,096 tokens 75.0 s against 37.9 s, the whole
  "read all" 97.2 s against 60.1 s.

- Python's cyclic collector less often: it runs a pass each time 700 more container objects were
  made than freed; importing torch, transformers and the engine makes about a million, and
  those passes took 1.1-1.3 s of the 5.5 s the imports took here. `collect_less_often` raises
  that count to GC_FIRST_GENERATION (10,000): the imports then took 4.4-4.7 s. Garbage that
  reference counting frees (nearly all of it) is freed as before.

The wait policy is read once, when OpenMP starts, that is when torch is first imported (numpy's
own BLAS threads likewise when numpy is; torch reads THP_MEM_ALLOC_ENABLE at its first
allocation, as it loads). `configure_threads` therefore puts the plan in the
environment and only then imports torch: called first thing in an entry point (the CLI, the
benches, the app before it imports the engine) it takes effect; called later it still sets
torch's thread count, and `ThreadPlan.wait_policy_active` says the policy came too late (a
launcher such as start.sh can export OMP_WAIT_POLICY=PASSIVE itself). Variables the operator
set are left as they are: OMP_NUM_THREADS, when set, is the thread count, and
THP_MEM_ALLOC_ENABLE=0 keeps 4 kB pages.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

SETTING_VARIABLE = "ATTENTION_EXPLORER_THREADS"  # threads per forward, or "auto"
AUTO = "auto"
SERVED_FORWARDS_PER_CORE = 1  # a served class: one forward at a time per core (bench_threads.py)
WAIT_POLICY = "PASSIVE"
WAIT_POLICY_VARIABLE = "OMP_WAIT_POLICY"
THREADS_VARIABLE = "OMP_NUM_THREADS"
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"  # numpy's BLAS (torch's own follows OpenMP)
HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"  # torch: buffers >= 2 MB on transparent huge pages
GC_FIRST_GENERATION = 10_000  # objects made before the collector's youngest pass (Python: 700)
CGROUP_QUOTA = Path("/sys/fs/cgroup/cpu.max")  # "max 100000" or "<quota> <period>" (cgroup v2)


@dataclass(frozen=True)
class ThreadPlan:
    """What a process runs its forwards with: `threads` intra-op threads for each of `sessions`
    concurrent forwards on `cores` cores, OpenMP waiting by `wait_policy`; `wait_policy_active`
    is False when OpenMP had started before the policy was put in the environment."""

    cores: int
    sessions: int
    threads: int
    wait_policy: str
    wait_policy_active: bool

    def describe(self) -> str:
        """One sentence for a log or a bench's header."""
        late = "" if self.wait_policy_active else " (set too late: OpenMP had already started)"
        return (f"{self.threads} torch thread(s) per forward for {self.sessions} concurrent "
                f"forward(s) on {self.cores} core(s), OpenMP wait policy "
                f"{self.wait_policy}{late}")


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, cut by a cgroup CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    try:
        quota, period = CGROUP_QUOTA.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota here: the affinity is the limit
    return max(1, cores)


def threads_setting() -> int | None:
    """The threads per forward the operator chose (ATTENTION_EXPLORER_THREADS, a whole number of
    at least 1), or None for `auto` or unset; anything else is a ValueError of one sentence."""
    text = os.environ.get(SETTING_VARIABLE, "").strip()
    if not text or text.lower() == AUTO:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{SETTING_VARIABLE} must be a whole number of threads (at least 1) "
                         f"or '{AUTO}', not '{text}'.")
    return int(text)


def operator_threads() -> int | None:
    """The threads per forward the operator set: ATTENTION_EXPLORER_THREADS (`threads_setting`),
    else OMP_NUM_THREADS when it is a whole number of at least 1; None when neither is."""
    setting = threads_setting()
    if setting is not None:
        return setting
    chosen = os.environ.get(THREADS_VARIABLE, "").strip()
    return int(chosen) if chosen.isdigit() and int(chosen) >= 1 else None


def thread_plan(sessions: int | None = None, cores: int | None = None,
                threads: int | None = None) -> ThreadPlan:
    """The plan for `sessions` concurrent forwards (None: one) on `cores` cores (None: the
    available ones), nothing applied yet: `threads` per forward when the caller fixes them (a
    corpus actor given one core), else cores // sessions, at least 1; waiting passively. The
    operator's choices win: `operator_threads()` for the threads, OMP_WAIT_POLICY for the wait
    policy."""
    sessions = 1 if sessions is None else int(sessions)
    if sessions < 1:
        raise ValueError("The number of concurrent sessions must be at least 1.")
    cores = available_cores() if cores is None else max(1, int(cores))
    chosen = operator_threads()
    if chosen is None:
        chosen = max(1, cores // sessions if threads is None else int(threads))
    given = os.environ.get(WAIT_POLICY_VARIABLE, "").strip().upper()
    return ThreadPlan(cores=cores, sessions=sessions, threads=chosen,
                      wait_policy=given or WAIT_POLICY,
                      wait_policy_active=bool(given) or "torch" not in sys.modules)


def configure_threads(sessions: int | None = None, threads: int | None = None) -> ThreadPlan:
    """Apply `thread_plan(sessions, threads=threads)` (see the module docstring): the collector's
    threshold, the wait policy, numpy's BLAS threads and torch's huge pages into the environment
    when torch has not loaded yet, then torch's intra-op threads. Call it first thing in an entry
    point; calling it again (an app's rerun) sets torch's threads again. A setting that is not a
    number of threads is logged in one sentence and dropped (as `auto`), so an entry point still
    starts."""
    try:
        threads_setting()
    except ValueError as error:
        logging.getLogger(__name__).warning("%s Using '%s'.", error, AUTO)
        os.environ[SETTING_VARIABLE] = AUTO
    collect_less_often()  # before torch and the engine import
    plan = thread_plan(sessions, threads=threads)
    if "torch" not in sys.modules:
        os.environ.setdefault(WAIT_POLICY_VARIABLE, plan.wait_policy)
        os.environ.setdefault(HUGE_PAGES_VARIABLE, "1")
        if "numpy" not in sys.modules:
            os.environ.setdefault(BLAS_THREADS_VARIABLE, str(plan.threads))
    import torch  # after the environment is set: OpenMP reads it as torch loads

    set_own_threads(plan.threads)
    return plan


def set_own_threads(count: int) -> None:
    """torch's intra-op threads for this thread. torch gives a thread its count lazily, at its
    first parallel work, from the count last set by any thread; a thread that sets its count
    before that is reset by it (a session's script thread that set 1 ran on 2 when the long line
    had set 2 meanwhile). Asking for the count first makes the thread take its own now."""
    import torch

    torch.get_num_threads()  # this thread's lazy start, before the count is set
    torch.set_num_threads(count)


def collect_less_often() -> None:
    """Raise the cyclic collector's first threshold to GC_FIRST_GENERATION (module doc); a
    process that set its own higher threshold keeps it."""
    first, *older = gc.get_threshold()
    if 0 < first < GC_FIRST_GENERATION:
        gc.set_threshold(GC_FIRST_GENERATION, *older)


def configure_server_threads() -> ThreadPlan:
    """`configure_threads` for a served app: SERVED_FORWARDS_PER_CORE forwards at a time on each
    core (one thread per forward unless the operator set the threads)."""
    return configure_threads(sessions=available_cores() * SERVED_FORWARDS_PER_CORE)


def one_forward_threads() -> int:
    """The threads of a forward that runs alone (the server's long line): every available core,
    unless the operator set the threads."""
    return thread_plan(sessions=1).threads


@contextlib.contextmanager
def torch_threads(count: int):
    """torch's intra-op threads set to `count` in this thread for the block, then put back (a
    thread's OpenMP thread count is its own: other sessions' forwards keep theirs)."""
    import torch

    before = torch.get_num_threads()
    set_own_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)

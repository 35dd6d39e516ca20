"""The C heap while a corpus job runs: a batch's large blocks reused within the batch, and the
whole batch's memory handed back to the system once it is measured.

Outside a job the app has glibc map every block of HEAP_MMAP_THRESHOLD_BYTES or more on its own
(models.store.byte_cache.map_large_blocks), so freed blocks leave the process at once. A job's
forward allocates and frees blocks of the same few sizes layer after layer (projections,
scores, maps: tens of MB a batch); mapped one by one, every one of them is faulted in page by
page and zeroed by the kernel again (measured on 200 MiniLM passages: about 1.1 million page
faults, 3 s of system time against 6 s of forward). Within `batch_heap()` glibc keeps every
block below CORPUS_HEAP_MMAP_THRESHOLD_BYTES on its heap and does not trim the heap's top when
one is freed, so a freed block is reused by the next of its size once the heap has grown to hold
it (a round or two: how soon depends on what the process allocated before). After each batch
the job calls `release_slack`: when the heap holds more than CORPUS_HEAP_SLACK_BYTES free, every
free page of it, top and holes alike, is handed back to the system (malloc_trim); below that the
pages stay for the next batch, which would otherwise fault them in and have them zeroed again.
The plan puts the longest batches first (models.corpus.plan), so the next batch fits in the
pages the last one freed and the kept pages do not add to the job's peak. Memory between batches
stays what is alive plus at most the slack.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from models.limits import (CORPUS_HEAP_MMAP_THRESHOLD_BYTES, CORPUS_HEAP_SLACK_BYTES,
                           CORPUS_HEAP_TRIM_THRESHOLD_BYTES, HEAP_TRIM_THRESHOLD_BYTES)
from models.store.byte_cache import (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, heap_free_bytes,
                                     mallopt, map_large_blocks, release_freed_memory)


@contextmanager
def batch_heap() -> Iterator[None]:
    """Keep a job's blocks on the heap while the block runs (see the module doc); afterwards
    large blocks are mapped on their own again (map_large_blocks), the heap's top trimmed at
    glibc's default, and what the job freed handed back."""
    mallopt(M_MMAP_THRESHOLD, CORPUS_HEAP_MMAP_THRESHOLD_BYTES)
    mallopt(M_TRIM_THRESHOLD, CORPUS_HEAP_TRIM_THRESHOLD_BYTES)
    try:
        yield
    finally:
        mallopt(M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD_BYTES)
        map_large_blocks()
        release_freed_memory()


def release_slack(slack: int = CORPUS_HEAP_SLACK_BYTES) -> bool:
    """Between two batches: hand the heap's free pages back when it holds more than `slack`
    bytes free (always, where glibc cannot say how much it holds). True when it did."""
    free = heap_free_bytes()
    if free is not None and free <= slack:
        return False
    release_freed_memory()
    return True

"""The C heap during a corpus job (models.corpus.heap): inside `batch_heap` freed blocks of a
batch's size are reused by the next ones once the heap has grown to hold them (no page is
faulted in again); before it such a block is mapped on its own and every page of a new one is
faulted in anew (its memory left the process when it was freed), and at its end the job's pages
are handed back, so the first block after it is faulted in anew too.

Measured in a fresh interpreter: how many rounds the heap takes to grow depends on what the
process allocated before (a test worker's heap after a thousand tests is not a job's), so the
check runs where the state is what a job's process starts from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 8  # a freed block and a new one of its size, this many times on each side
# A block faulted in anew is read from the resident bytes it adds, not from a count of faults:
# with torch's huge pages (models/threads.py, on in the tests as in the app) the kernel faults a
# 2 MB-aligned part in 2 MB at a time (a whole 16 MB block once took 9 faults, against 4,096 on
# 4 kB pages). A reused block faults in less than a 100th of its pages.
MIB_, BLOCK_ = 2**20, 16 * 2**20  # as in BLOCKS

BLOCKS = """
import ctypes, json, resource, torch
from models.corpus.heap import batch_heap, release_slack
from models.store.byte_cache import heap_free_bytes, map_large_blocks

BLOCK = 16 * 2**20  # a batch's layer of projections or maps

def faults_of_a_block():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.empty(BLOCK // 4)
    block.fill_(1.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del block
    return faults

def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()

def growth_of_a_block():
    # resident bytes a new block adds while it lives: the whole block when its memory had left
    # the process, whatever size of page the kernel faulted it in with
    before = resident_bytes()
    block = torch.empty(BLOCK // 4)
    block.fill_(1.0)
    grown = resident_bytes() - before
    del block
    return grown

def faults_of_a_second_block():
    faults_of_a_block()
    return faults_of_a_block()

def growth_of_a_second_block():
    faults_of_a_block()
    return growth_of_a_block()
"""

MEASURE = BLOCKS + f"""
map_large_blocks()  # as a job finds the process
before = [growth_of_a_second_block() for _ in range({ROUNDS})]
with batch_heap():
    inside = [faults_of_a_second_block() for _ in range({ROUNDS})]
after = [growth_of_a_second_block() for _ in range({ROUNDS})]
print(json.dumps({{"pages": BLOCK // resource.getpagesize(), "before": before,
                  "inside": inside, "after": after}}))
"""


def in_a_fresh_interpreter(code: str) -> tuple[dict, str]:
    """What `code` printed last (JSON), and its stderr."""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def test_a_freed_block_is_reused_within_a_job_and_handed_back_outside_it():
    faults, _ = in_a_fresh_interpreter(MEASURE)
    pages = faults["pages"]
    # before a job every new block is mapped on its own and faulted in anew, every time: its
    # whole memory comes back into the process (resident bytes, whatever the page size)
    assert all(grown >= BLOCK_ - MIB_ for grown in faults["before"]), faults
    # inside, once the heap holds the block, the next ones reuse its pages: no fault
    assert all(count < pages // 100 for count in faults["inside"][-3:]), faults
    # the job's end handed the pages back: the first block after it is faulted in anew
    assert faults["after"][0] >= BLOCK_ - MIB_, faults


SLACK = BLOCKS + f"""
MIB = 2**20
map_large_blocks()
found = {{}}
with batch_heap():
    for _ in range({ROUNDS}):  # the heap grows to hold the block
        faults_of_a_block()
    found["free"] = heap_free_bytes()
    ctypes.CDLL("libc.so.6").malloc_stats()  # glibc's own account, on stderr
    found["resident_before"] = resident_bytes()
    found["kept"] = release_slack(found["free"] + MIB)
    found["resident_kept"] = resident_bytes()
    found["handed"] = release_slack(found["free"] - BLOCK)
    found["resident_handed"] = resident_bytes()
    found["grown_after_handed"] = growth_of_a_block()
found["pages"] = BLOCK // resource.getpagesize()
print(json.dumps(found))
"""


def glibc_free_bytes(stats: str) -> int:
    """Free heap bytes by glibc's malloc_stats: each arena's system bytes less its bytes in
    use."""
    numbers = {"system": [], "in use": []}
    arenas = stats.split("Total (incl. mmap):")[0]
    for line in arenas.splitlines():
        for name in numbers:
            if line.strip().startswith(f"{name} bytes"):
                numbers[name].append(int(line.split("=")[1]))
    assert numbers["system"] and len(numbers["system"]) == len(numbers["in use"]), stats
    return sum(numbers["system"]) - sum(numbers["in use"])


def test_between_batches_the_heap_keeps_a_bounded_slack_and_hands_back_the_rest():
    found, stats = in_a_fresh_interpreter(SLACK)
    # the free bytes the job reads are glibc's own account of its arenas, and hold the block
    assert found["free"] >= 16 * 2**20, found
    assert abs(found["free"] - glibc_free_bytes(stats)) <= 2**20, (found, stats)
    # within the slack nothing is handed back: the process keeps every resident page (not
    # read from the next block's faults: most often none, but once in a dozen full runs under
    # load a 2 MB-aligned block reached past the heap's top, about 520 faults, as many as a
    # block faulted in anew on huge pages)
    assert found["kept"] is False, found
    assert found["resident_kept"] >= found["resident_before"] - MIB_, found
    # beyond it the free pages go back to the system and the next block is faulted in anew: its
    # memory comes back into the process (read from the resident bytes, not from the count of
    # faults: on huge pages a 2 MB-aligned block faults in 8 times, once a 16 MB block here)
    assert found["handed"] is True, found
    assert found["resident_handed"] <= found["resident_before"] - BLOCK_, found
    assert found["grown_after_handed"] >= BLOCK_ - MIB_, found

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

MEASURE = f"""
import json, resource, torch
from models.corpus.heap import batch_heap
from models.store.byte_cache import map_large_blocks

BLOCK = 16 * 2**20  # a batch's layer of projections or maps

def faults_of_a_second_block():
    first = torch.empty(BLOCK // 4)
    first.fill_(1.0)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = torch.empty(BLOCK // 4)
    second.fill_(1.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del second
    return faults

map_large_blocks()  # as a job finds the process
before = [faults_of_a_second_block() for _ in range({ROUNDS})]
with batch_heap():
    inside = [faults_of_a_second_block() for _ in range({ROUNDS})]
after = [faults_of_a_second_block() for _ in range({ROUNDS})]
print(json.dumps({{"pages": BLOCK // resource.getpagesize(), "before": before,
                  "inside": inside, "after": after}}))
"""


def test_a_freed_block_is_reused_within_a_job_and_handed_back_outside_it():
    run = subprocess.run([sys.executable, "-c", MEASURE], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    faults = json.loads(run.stdout.strip().splitlines()[-1])
    pages = faults["pages"]
    # before a job every new block is mapped and faulted in page by page, every time
    assert all(count > pages // 2 for count in faults["before"]), faults
    # inside, once the heap holds the block, the next ones reuse its pages
    assert all(count < pages // 100 for count in faults["inside"][-3:]), faults
    # the job's end handed the pages back: the first block after it is faulted in anew
    assert faults["after"][0] > pages // 2, faults
